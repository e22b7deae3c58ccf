package gsi

import (
	"bytes"
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"encoding/asn1"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// sessionCipher is the only session cipher hepcache offers and accepts.
// XrdCl prefers it too; blowfish and 3DES, also in XrdSecgsi's default
// list, are weaker and not in Go's standard library.
const sessionCipher = "aes-128-cbc"

// dhParams are Diffie-Hellman domain parameters.
type dhParams struct {
	P, G *big.Int
}

// rfc3526Group14 is the 2048-bit MODP group of RFC 3526 (generator 2),
// which OpenSSL knows by name and so accepts without a primality check.
var rfc3526Group14 = func() *dhParams {
	p, _ := new(big.Int).SetString(""+
		"FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74"+
		"020BBEA63B139B22514A08798E3404DDEF9519B3CD3A431B302B0A6DF25F1437"+
		"4FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED"+
		"EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF05"+
		"98DA48361C55D39A69163FA8FD24CF5F83655D23DCA3AD961C62F356208552BB"+
		"9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3B"+
		"E39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF695581718"+
		"3995497CEA956AE515D2261898FA051015728E5A8AACAA68FFFFFFFFFFFFFFFF", 16)
	return &dhParams{P: p, G: big.NewInt(2)}
}()

// dhKey is one side's ephemeral Diffie-Hellman key.
type dhKey struct {
	params *dhParams
	x, y   *big.Int // private, public
}

func newDHKey(p *dhParams) (*dhKey, error) {
	// A 256-bit exponent: far beyond the strength of a 512-bit group and
	// enough for 2048 bits (NIST SP 800-56A allows 224 for 2048).
	x, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 256))
	if err != nil {
		return nil, err
	}
	x.Add(x, big.NewInt(2))
	return &dhKey{params: p, x: x, y: new(big.Int).Exp(p.G, x, p.P)}, nil
}

// public encodes the parameters and the public value as XrdCryptosslCipher
// does: the PEM "DH PARAMETERS", then "---BPUB---<hex>---EPUB---".
func (k *dhKey) public() []byte {
	der, _ := asn1.Marshal(*k.params)
	b := pem.EncodeToMemory(&pem.Block{Type: "DH PARAMETERS", Bytes: der})
	b = append(b, "---BPUB---"...)
	b = append(b, strings.ToUpper(k.y.Text(16))...)
	return append(b, "---EPUB---"...)
}

// maxDHBits bounds the peer's DH modulus (and so the work it can ask for).
const maxDHBits = 8192

// The peer's RSA keys are bounded before any work is done with them: a
// key of 56 KB cost 0.26 s of CPU per signed block, a client's choice.
// The bounds are crypto/rsa's (at least 1024 bits; an odd exponent of at
// most 2^31-1) with the size capped at 8192 bits (XRootD makes 2048-bit
// proxies); maxSignedPlain bounds what a peer may sign in blocks: more than
// any DH public part (at most maxDHBits of parameters and key, in text).
const (
	minRSABits     = 1024
	maxRSABits     = 8192
	maxSignedPlain = 8192
)

// checkRSAKey refuses a peer's RSA key outside the bounds above.
func checkRSAKey(pub *rsa.PublicKey) error {
	if pub == nil || pub.N == nil {
		return fmt.Errorf("gsi: no RSA key: %w", ErrMalformed)
	}
	if bits := pub.N.BitLen(); bits < minRSABits || bits > maxRSABits {
		return fmt.Errorf("gsi: RSA key of %d bits, want %d to %d: %w", bits, minRSABits, maxRSABits, ErrMalformed)
	}
	if pub.E < 3 || pub.E > 1<<31-1 || pub.E%2 == 0 {
		return fmt.Errorf("gsi: RSA public exponent %d, want an odd number from 3 to 2^31-1: %w", pub.E, ErrMalformed)
	}
	return nil
}

// parsePublic reads the peer's public part: its parameters when
// withParams (the server's), and its public value.
func parsePublic(b []byte, withParams bool) (*dhParams, *big.Int, error) {
	i := bytes.Index(b, []byte("---BPUB---"))
	j := bytes.Index(b, []byte("---EPUB--"))
	if i < 0 || j < i+10 {
		return nil, nil, fmt.Errorf("DH public part without ---BPUB---...---EPUB---: %w", ErrMalformed)
	}
	y, ok := new(big.Int).SetString(string(b[i+10:j]), 16)
	if !ok || len(b[i+10:j]) > maxDHBits/4 {
		return nil, nil, fmt.Errorf("DH public value is not hexadecimal: %w", ErrMalformed)
	}
	if !withParams {
		return nil, y, nil
	}
	blk, _ := pem.Decode(b[:i])
	if blk == nil || blk.Type != "DH PARAMETERS" {
		return nil, nil, fmt.Errorf("no PEM DH PARAMETERS before the public value: %w", ErrMalformed)
	}
	var p dhParams
	if _, err := asn1.Unmarshal(blk.Bytes, &p); err != nil {
		return nil, nil, fmt.Errorf("DH PARAMETERS: %w", errors.Join(ErrMalformed, err))
	}
	if p.P == nil || p.G == nil || p.P.BitLen() < 512 || p.P.BitLen() > maxDHBits || p.G.Cmp(big.NewInt(1)) <= 0 || p.G.Cmp(p.P) >= 0 {
		return nil, nil, fmt.Errorf("DH parameters out of range (%d-bit modulus): %w", p.P.BitLen(), ErrMalformed)
	}
	return &p, y, nil
}

// sessionKey derives the AES-128 key from the peer's public value: the
// first 16 bytes of the shared secret, left-padded with zeros to the size
// of the modulus when padded (protocol 10400 between peers that both pad,
// as XrdCryptosslCipher does), else without its leading zeros.
func (k *dhKey) sessionKey(peer *big.Int, padded bool) ([]byte, error) {
	one := big.NewInt(1)
	pm1 := new(big.Int).Sub(k.params.P, one)
	if peer.Cmp(one) <= 0 || peer.Cmp(pm1) >= 0 {
		return nil, fmt.Errorf("DH public value out of range: %w", ErrMalformed)
	}
	z := new(big.Int).Exp(peer, k.x, k.params.P)
	s := z.Bytes()
	if padded {
		s = z.FillBytes(make([]byte, (k.params.P.BitLen()+7)/8))
	}
	if len(s) < 16 {
		return nil, fmt.Errorf("DH shared secret too short: %w", ErrMalformed)
	}
	return s[:16], nil
}

// encrypt is AES-128-CBC with PKCS #7 padding, as XrdCryptosslCipher: with
// withIV a random IV is sent before the ciphertext (protocol 10400), else
// the IV is zero (each key then encrypts one message per direction).
func encrypt(key, plain []byte, withIV bool) []byte {
	blk, _ := aes.NewCipher(key)
	iv := make([]byte, aes.BlockSize)
	if withIV {
		if _, err := rand.Read(iv); err != nil {
			panic(err) // crypto/rand never fails on Linux
		}
	}
	n := aes.BlockSize - len(plain)%aes.BlockSize
	buf := append(append([]byte(nil), plain...), bytes.Repeat([]byte{byte(n)}, n)...)
	cipher.NewCBCEncrypter(blk, iv).CryptBlocks(buf, buf)
	if withIV {
		return append(iv, buf...)
	}
	return buf
}

// decrypt reverses encrypt.
func decrypt(key, ct []byte, withIV bool) ([]byte, error) {
	iv := make([]byte, aes.BlockSize)
	if withIV {
		if len(ct) < aes.BlockSize {
			return nil, fmt.Errorf("encrypted main buffer of %d bytes has no IV: %w", len(ct), ErrMalformed)
		}
		iv, ct = ct[:aes.BlockSize], ct[aes.BlockSize:]
	}
	if len(ct) == 0 || len(ct)%aes.BlockSize != 0 {
		return nil, fmt.Errorf("encrypted main buffer of %d bytes is not whole AES blocks: %w", len(ct), ErrMalformed)
	}
	blk, _ := aes.NewCipher(key)
	buf := make([]byte, len(ct))
	cipher.NewCBCDecrypter(blk, iv).CryptBlocks(buf, ct)
	n := int(buf[len(buf)-1])
	if n == 0 || n > aes.BlockSize || !bytes.Equal(buf[len(buf)-n:], bytes.Repeat([]byte{byte(n)}, n)) {
		return nil, fmt.Errorf("main buffer does not decrypt with the session key: %w", ErrMalformed)
	}
	return buf[:len(buf)-n], nil
}

// signChunks "encrypts with the private key" as XrdCryptosslRSA does: a
// PKCS #1 v1.5 type 1 signature over each chunk of at most k-11 bytes of
// data, unhashed. Only data this side made (its DH public part) or a short
// tag is ever passed here.
func signChunks(key *rsa.PrivateKey, data []byte) ([]byte, error) {
	k := key.Size()
	var out []byte
	for len(data) > 0 {
		n := min(len(data), k-11)
		sig, err := rsa.SignPKCS1v15(nil, key, crypto.Hash(0), data[:n])
		if err != nil {
			return nil, err
		}
		out = append(out, sig...)
		data = data[n:]
	}
	return out, nil
}

// recoverChunks reverses signChunks with the public key ("decrypt with the
// public key"): each k-byte block must be a valid type 1 block.
func recoverChunks(pub *rsa.PublicKey, data []byte) ([]byte, error) {
	if err := checkRSAKey(pub); err != nil {
		return nil, err
	}
	k := pub.Size()
	if len(data) == 0 || len(data)%k != 0 || len(data)/k > maxSignedPlain/(k-11)+1 {
		return nil, fmt.Errorf("signed block of %d bytes for a %d-byte key: %w", len(data), k, ErrMalformed)
	}
	e := big.NewInt(int64(pub.E))
	var out []byte
	for ; len(data) > 0; data = data[k:] {
		c := new(big.Int).SetBytes(data[:k])
		if c.Cmp(pub.N) >= 0 {
			return nil, fmt.Errorf("signed block out of range: %w", ErrMalformed)
		}
		em := new(big.Int).Exp(c, e, pub.N).FillBytes(make([]byte, k))
		if em[0] != 0 || em[1] != 1 {
			return nil, errors.New("a signed block does not verify with the key of the certificate")
		}
		i := 2
		for i < k && em[i] == 0xff {
			i++
		}
		if i < 10 || i == k || em[i] != 0 {
			return nil, errors.New("a signed block does not verify with the key of the certificate")
		}
		out = append(out, em[i+1:]...)
	}
	return out, nil
}

// tagChars are the characters of an XrdSutRndm random tag.
const tagChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789./"

// rtagLen is the length of XrdSutRndm tags; maxPeerTag bounds what the
// server signs for a client.
const (
	rtagLen    = 8
	maxPeerTag = 16
)

// newTag returns a random tag as XrdSutRndm::GetRndmTag makes them.
func newTag() []byte {
	b := make([]byte, rtagLen)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	for i := range b {
		b[i] = tagChars[int(b[i])%len(tagChars)]
	}
	return b
}

// isTag reports whether b looks like a random tag: the only client data
// the server signs with its host key. A longer or binary value could be a
// DigestInfo the client wants a PKCS #1 signature for (a forged
// certificate or proxy), so it is refused.
func isTag(b []byte) bool {
	if len(b) == 0 || len(b) > maxPeerTag {
		return false
	}
	for _, c := range b {
		if strings.IndexByte(tagChars, c) < 0 {
			return false
		}
	}
	return true
}

// NameHash is OpenSSL's X509_NAME_hash of a DER name (the "<hash>.0" file
// names of a CA directory): the first four bytes, little-endian, of the
// SHA-1 of the canonical encoding (string values as lower-case UTF8String
// with collapsed spaces, the RDN SETs without the outer SEQUENCE).
func NameHash(rawName []byte) (string, error) {
	var rdns []asn1.RawValue
	if rest, err := asn1.Unmarshal(rawName, &rdns); err != nil || len(rest) > 0 {
		return "", fmt.Errorf("name: %w", errors.Join(ErrMalformed, err))
	}
	var canon []byte
	for _, rdn := range rdns {
		var atvs []struct {
			Type  asn1.ObjectIdentifier
			Value asn1.RawValue
		}
		if _, err := asn1.UnmarshalWithParams(rdn.FullBytes, &atvs, "set"); err != nil {
			return "", fmt.Errorf("name RDN: %w", errors.Join(ErrMalformed, err))
		}
		var body []byte
		for _, a := range atvs {
			v := a.Value.FullBytes
			if a.Value.Class == asn1.ClassUniversal && canonString(a.Value.Tag) {
				s, err := asn1.MarshalWithParams(canonValue(a.Value), "utf8")
				if err != nil {
					return "", err
				}
				v = s
			}
			oid, _ := asn1.Marshal(a.Type)
			seq, _ := asn1.Marshal(asn1.RawValue{Class: asn1.ClassUniversal, Tag: asn1.TagSequence, IsCompound: true, Bytes: append(oid, v...)})
			body = append(body, seq...)
		}
		set, _ := asn1.Marshal(asn1.RawValue{Class: asn1.ClassUniversal, Tag: asn1.TagSet, IsCompound: true, Bytes: body})
		canon = append(canon, set...)
	}
	sum := sha1.Sum(canon)
	return fmt.Sprintf("%08x", binary.LittleEndian.Uint32(sum[:4])), nil
}

// canonString reports whether OpenSSL canonicalises values of this
// universal tag (ASN1_MASK_CANON).
func canonString(tag int) bool {
	switch tag {
	case asn1.TagUTF8String, asn1.TagPrintableString, asn1.TagT61String, asn1.TagIA5String,
		26 /* VisibleString */, 28 /* UniversalString */, asn1.TagBMPString:
		return true
	}
	return false
}

// canonValue lower-cases ASCII letters, trims and collapses white space.
// UniversalString and BMPString are decoded first; the other types are
// taken as bytes (ASCII or UTF-8 in practice).
func canonValue(v asn1.RawValue) string {
	s := string(v.Bytes)
	switch v.Tag {
	case asn1.TagBMPString:
		var r []rune
		for i := 0; i+1 < len(v.Bytes); i += 2 {
			r = append(r, rune(binary.BigEndian.Uint16(v.Bytes[i:])))
		}
		s = string(r)
	case 28:
		var r []rune
		for i := 0; i+3 < len(v.Bytes); i += 4 {
			r = append(r, rune(binary.BigEndian.Uint32(v.Bytes[i:])))
		}
		s = string(r)
	}
	var out []byte
	space := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == ' ' || c >= '\t' && c <= '\r' {
			space = true
			continue
		}
		if space && len(out) > 0 {
			out = append(out, ' ')
		}
		space = false
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		out = append(out, c)
	}
	return string(out)
}
