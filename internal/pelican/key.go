package pelican

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Key is the cache's identity in the federation: an ECDSA P-256 key (the
// registry reads the public key set as ECDSA, registry/registry.go
// keySignChallengeCommit), kept in a PEM file readable by its owner only.
// The private key never leaves this type: nothing prints it.
type Key struct {
	priv *ecdsa.PrivateKey
	kid  string
	file string
}

// maxKeyFile bounds the key file read.
const maxKeyFile = 64 << 10

// LoadOrCreateKey reads the key of file, or, when the file does not exist,
// creates one there (mode 0600, its directory 0700 if it must be made);
// created says which. A key file that another user can read is refused:
// whoever reads it can advertise as this cache.
func LoadOrCreateKey(file string) (k *Key, created bool, err error) {
	b, err := readKeyFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		k, err := createKey(file)
		return k, err == nil, err
	}
	if err != nil {
		return nil, false, err
	}
	priv, err := parseKey(b)
	if err != nil {
		return nil, false, fmt.Errorf("pelican key %s: %w", file, err)
	}
	return newKey(priv, file), false, nil
}

func readKeyFile(file string) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("pelican key: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("pelican key: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("pelican key %s: not a regular file", file)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("pelican key %s: mode %v lets others read it: chmod 600 %s", file, st.Mode().Perm(), file)
	}
	if st.Size() > maxKeyFile {
		return nil, fmt.Errorf("pelican key %s: %d bytes, more than a key", file, st.Size())
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, fmt.Errorf("pelican key %s: %w", file, err)
	}
	return b, nil
}

// parseKey reads a PEM PKCS#8 ("PRIVATE KEY", as Pelican writes its issuer
// keys) or SEC 1 ("EC PRIVATE KEY") P-256 key. Errors never quote the file.
func parseKey(b []byte) (*ecdsa.PrivateKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, errors.New("no PEM block")
	}
	var key any
	var err error
	switch blk.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(blk.Bytes)
	default:
		return nil, fmt.Errorf("PEM block %q: want PRIVATE KEY or EC PRIVATE KEY", blk.Type)
	}
	if err != nil {
		return nil, errors.New("malformed private key")
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, errors.New("not an ECDSA P-256 key (the Pelican registry accepts only those)")
	}
	return ec, nil
}

func createKey(file string) (*Key, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pelican key: generate: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("pelican key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return nil, fmt.Errorf("pelican key: %w", err)
	}
	// Written aside and renamed: a crash never leaves half a key, and
	// O_EXCL on the final name is kept by link (another process that
	// created the key first wins and its key is used).
	tmp, err := os.CreateTemp(filepath.Dir(file), ".pelican-key-*")
	if err != nil {
		return nil, fmt.Errorf("pelican key: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err == nil {
		_, err = tmp.Write(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
		if err == nil {
			err = tmp.Sync()
		}
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Link(tmp.Name(), file)
		}
		if errors.Is(err, fs.ErrExist) {
			k, _, lerr := LoadOrCreateKey(file)
			return k, lerr
		}
		if err != nil {
			return nil, fmt.Errorf("pelican key %s: %w", file, err)
		}
	} else {
		tmp.Close()
		return nil, fmt.Errorf("pelican key: %w", err)
	}
	return newKey(priv, file), nil
}

func newKey(priv *ecdsa.PrivateKey, file string) *Key {
	k := &Key{priv: priv, file: file}
	k.kid = thumbprint(&priv.PublicKey)
	return k
}

// File is where the key is kept.
func (k *Key) File() string { return k.file }

// KID is the key id: the RFC 7638 thumbprint (SHA-256, base64url) of the
// public key, the id Pelican's jwk.AssignKeyID gives the same key.
func (k *Key) KID() string { return k.kid }

func b64u(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// coords returns the public key's x and y, 32 bytes each.
func coords(pub *ecdsa.PublicKey) (x, y []byte) {
	b, err := pub.Bytes() // 0x04 || X || Y
	if err != nil || len(b) != 65 {
		panic("pelican: a P-256 public key that does not encode") // a bug: keys are checked at load
	}
	return b[1:33], b[33:]
}

// thumbprint is the RFC 7638 JWK thumbprint of an EC public key: SHA-256
// of the required members in lexicographic order, without spaces.
func thumbprint(pub *ecdsa.PublicKey) string {
	x, y := coords(pub)
	doc := `{"crv":"P-256","kty":"EC","x":"` + b64u(x) + `","y":"` + b64u(y) + `"}`
	sum := sha256.Sum256([]byte(doc))
	return b64u(sum[:])
}

// jwk is a public JSON Web Key.
type jwk struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
}

// PublicJWK is the public key as a JWK with kid and alg (ES256): the
// director verifies advertisement tokens with a key set fetched from the
// registry, matched by kid and alg.
func (k *Key) PublicJWK() json.RawMessage {
	x, y := coords(&k.priv.PublicKey)
	b, _ := json.Marshal(jwk{Kty: "EC", Crv: "P-256", X: b64u(x), Y: b64u(y), Kid: k.kid, Alg: "ES256", Use: "sig"})
	return b
}

// PublicJWKS is the key set {"keys":[PublicJWK]} the registry records.
func (k *Key) PublicJWKS() json.RawMessage {
	b, _ := json.Marshal(map[string][]json.RawMessage{"keys": {k.PublicJWK()}})
	return b
}

// SignASN1 signs the SHA-256 of payload and returns the ASN.1 DER
// signature, as the registry's key-sign challenge verifies it
// (utils/crypto_utils.go VerifySignature: ecdsa.VerifyASN1).
func (k *Key) SignASN1(payload []byte) ([]byte, error) {
	sum := sha256.Sum256(payload)
	return k.priv.Sign(rand.Reader, sum[:], crypto.SHA256)
}

// JWT signs claims as an ES256 JSON Web Token with the key's kid.
func (k *Key) JWT(claims any) (string, error) {
	hdr, _ := json.Marshal(map[string]string{"alg": "ES256", "typ": "JWT", "kid": k.kid})
	body, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("pelican token claims: %w", err)
	}
	signed := b64u(hdr) + "." + b64u(body)
	sum := sha256.Sum256([]byte(signed))
	r, s, err := ecdsa.Sign(rand.Reader, k.priv, sum[:])
	if err != nil {
		return "", fmt.Errorf("pelican token: sign: %w", err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signed + "." + b64u(sig), nil
}

// String names the key without showing it.
func (k *Key) String() string { return "ECDSA P-256 key " + k.kid + " (" + k.file + ")" }

// GoString is String: %#v never prints the key either.
func (k *Key) GoString() string { return k.String() }
