package gsi

import (
	"crypto"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	"github.com/hepcache/hepcache/internal/auth/x509proxy"
)

// maxChainCerts and maxChainBytes bound the client's chain.
const (
	maxChainCerts = 12
	maxChainBytes = 64 << 10
)

// Server is the server side of gsi. Safe for concurrent use; the state of
// one client's handshake is in its Handshake.
type Server struct {
	cert    func() *tls.Certificate
	version int32 // announced and spoken; tests lower it to 10300
}

// NewServer returns a server presenting the host certificate cert returns
// (called at every login and handshake, so that a reloaded certificate is
// used by new handshakes). The key must be RSA: gsi signs with RSA only.
func NewServer(cert func() *tls.Certificate) *Server {
	if cert == nil {
		panic("gsi: nil host certificate source")
	}
	return &Server{cert: cert, version: Version}
}

// CheckHostCert reports whether c can serve as a gsi host certificate.
func CheckHostCert(c *tls.Certificate) error {
	if c == nil || len(c.Certificate) == 0 {
		return errors.New("gsi: no host certificate")
	}
	if _, ok := c.PrivateKey.(*rsa.PrivateKey); !ok {
		return fmt.Errorf("gsi: the host key is %T; gsi needs an RSA key", c.PrivateKey)
	}
	return nil
}

// Params returns the login parameters announcing gsi ("&P=gsi,v:10400,
// c:ssl,ca:<hash>"): the client needs the hash of the CA that issued the
// host certificate to find it in its X509_CERT_DIR.
func (s *Server) Params() (string, error) {
	c := s.cert()
	if err := CheckHostCert(c); err != nil {
		return "", err
	}
	leaf := c.Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return "", fmt.Errorf("gsi: host certificate: %w", err)
		}
	}
	h, err := NameHash(leaf.RawIssuer)
	if err != nil {
		return "", fmt.Errorf("gsi: host certificate issuer: %w", err)
	}
	return fmt.Sprintf("&P=gsi,v:%d,c:ssl,ca:%s", s.version, h), nil
}

// maxStarts bounds the certificate requests on one connection: each
// costs the server an RSA signature and a DH key, and a real client sends
// one.
const maxStarts = 4

// Handshake is the state of one client's handshake between its steps.
// The zero value is ready for the first step.
type Handshake struct {
	dh     *dhKey
	rtag   []byte // the tag the client must sign
	signed bool   // protocol 10400: signed DH parts, IV
	padded bool   // the DH secret is padded (both sides pad)
	starts int    // certificate requests so far
}

// Step processes one client step (the kXR_auth credentials of type
// "gsi"). It returns more, the server step to send as kXR_authmore, or,
// when done, the client's certificate chain (the proxy first), whose key
// the client has proven to hold. The caller must still verify the chain
// (CA, proxy rules, VOMS). cred is not retained.
func (s *Server) Step(h *Handshake, cred []byte) (chain []*x509.Certificate, more []byte, err error) {
	in, err := parseBuffer(cred)
	if err != nil {
		return nil, nil, err
	}
	switch in.step {
	case stepCertReq:
		if h.starts == maxStarts {
			return nil, nil, fmt.Errorf("gsi: more than %d certificate requests on one connection", maxStarts)
		}
		*h = Handshake{starts: h.starts + 1}
		more, err = s.certReq(h, in)
		return nil, more, err
	case stepCert:
		if h.dh == nil {
			return nil, nil, fmt.Errorf("gsi: client certificate before the certificate request: %w", ErrMalformed)
		}
		chain, err = s.clientCert(h, in)
		h.dh, h.rtag = nil, nil // one use: a replayed step finds nothing
		return chain, nil, err
	case stepSigPxy:
		return nil, nil, errors.New("gsi: proxy delegation is not supported")
	}
	return nil, nil, fmt.Errorf("gsi: unknown client step %d: %w", in.step, ErrMalformed)
}

// certReq answers kXGC_certreq with kXGS_cert: the host certificate, the
// client's tag signed with the host key, the DH public part and a tag for
// the client to sign.
func (s *Server) certReq(h *Handshake, in *buffer) ([]byte, error) {
	if v, ok := in.getInt(bkVersion); ok && v < 10000 {
		return nil, fmt.Errorf("gsi: client protocol version %d is too old", v)
	}
	mod, ok := cryptoSSL(in.get(bkCryptoMod))
	if !ok {
		return nil, fmt.Errorf("gsi: client crypto modules %q do not include ssl", in.get(bkCryptoMod))
	}
	h.signed = s.version >= versionDHSigned
	h.padded = h.signed && !strings.HasSuffix(mod, "nopad")
	mainRaw := in.get(bkMain)
	if mainRaw == nil {
		return nil, fmt.Errorf("gsi: main buffer missing: %w", ErrMalformed)
	}
	m, err := parseBuffer(mainRaw)
	if err != nil {
		return nil, fmt.Errorf("gsi: main buffer: %w", err)
	}
	ctag := m.get(bkRtag)
	if !isTag(ctag) {
		return nil, fmt.Errorf("gsi: the client's random tag is not a short tag of [A-Za-z0-9./]: %w", ErrMalformed)
	}
	cert := s.cert()
	if err := CheckHostCert(cert); err != nil {
		return nil, err
	}
	key := cert.PrivateKey.(*rsa.PrivateKey)
	sig, err := key.Sign(nil, ctag, crypto.Hash(0))
	if err != nil {
		return nil, fmt.Errorf("gsi: sign the client's tag: %w", err)
	}
	if h.dh, err = newDHKey(rfc3526Group14); err != nil {
		return nil, err
	}
	h.rtag = newTag()

	reply := &buffer{step: stepSrvCert}
	reply.set(bkSignedRtag, sig)
	reply.set(bkRtag, h.rtag)
	out := &buffer{step: stepSrvCert}
	out.set(bkCryptoMod, []byte("ssl"))
	if h.signed {
		pub, err := signChunks(key, h.dh.public())
		if err != nil {
			return nil, fmt.Errorf("gsi: sign the DH public part: %w", err)
		}
		out.set(bkCipher, pub)
	} else {
		out.set(bkPuk, h.dh.public())
	}
	out.set(bkCipherAlg, []byte(sessionCipher))
	out.set(bkMDAlg, []byte("sha256:sha1"))
	out.set(bkX509, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}))
	out.set(bkMain, reply.marshal())
	return out.marshal(), nil
}

// clientCert checks kXGC_cert: it finishes the key agreement, decrypts the
// main buffer and checks that the chain's key signed the server's tag.
func (s *Server) clientCert(h *Handshake, in *buffer) ([]*x509.Certificate, error) {
	if alg := in.get(bkCipherAlg); alg != nil {
		name, _, _ := strings.Cut(string(alg), "#")
		if name != sessionCipher {
			return nil, fmt.Errorf("gsi: the client chose cipher %q; only %s is offered", name, sessionCipher)
		}
	}
	dhPub := in.get(bkPuk)
	var signer *rsa.PublicKey // the key that signed the client's DH part
	if h.signed {
		blk, _ := pem.Decode(in.get(bkPuk))
		if blk == nil {
			return nil, fmt.Errorf("gsi: client public key missing: %w", ErrMalformed)
		}
		k, err := x509.ParsePKIXPublicKey(blk.Bytes)
		if signer, _ = k.(*rsa.PublicKey); err != nil || signer == nil {
			return nil, fmt.Errorf("gsi: client public key is not RSA: %w", errors.Join(ErrMalformed, err))
		}
		if err := checkRSAKey(signer); err != nil {
			return nil, fmt.Errorf("client public key: %w", err)
		}
		if dhPub, err = recoverChunks(signer, in.get(bkCipher)); err != nil {
			return nil, fmt.Errorf("gsi: client DH public part: %w", err)
		}
	}
	_, y, err := parsePublic(dhPub, false)
	if err != nil {
		return nil, fmt.Errorf("gsi: client DH public part: %w", err)
	}
	key, err := h.dh.sessionKey(y, h.padded)
	if err != nil {
		return nil, fmt.Errorf("gsi: %w", err)
	}
	plain, err := decrypt(key, in.get(bkMain), h.signed)
	if err != nil {
		return nil, fmt.Errorf("gsi: %w", err)
	}
	m, err := parseBuffer(plain)
	if err != nil {
		return nil, fmt.Errorf("gsi: main buffer: %w", err)
	}
	chain, err := parseChain(m.get(bkX509))
	if err != nil {
		return nil, err
	}
	pub, ok := chain[0].PublicKey.(*rsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("gsi: the proxy key is %T; gsi needs an RSA key", chain[0].PublicKey)
	}
	if err := checkRSAKey(pub); err != nil {
		return nil, fmt.Errorf("proxy key: %w", err)
	}
	if signer != nil && !signer.Equal(pub) {
		return nil, errors.New("gsi: the DH public part is not signed by the key of the presented certificate")
	}
	sig := m.get(bkSignedRtag)
	if sig == nil {
		return nil, fmt.Errorf("gsi: the client did not sign the server's random tag: %w", ErrMalformed)
	}
	if err := rsa.VerifyPKCS1v15(pub, crypto.Hash(0), h.rtag, sig); err != nil {
		return nil, errors.New("gsi: the random tag is not signed by the key of the presented certificate (no proof of possession)")
	}
	return chain, nil
}

// cryptoSSL returns the entry of a crypto module list ("ssl",
// "ssl|...", "sslnopad") that names the OpenSSL module.
func cryptoSSL(b []byte) (string, bool) {
	for _, m := range strings.Split(string(b), "|") {
		if strings.TrimSuffix(m, "nopad") == "ssl" {
			return m, true
		}
	}
	return "", false
}

// parseChain decodes the PEM certificates of a chain bucket (key blocks,
// which a proxy export may include, are skipped).
func parseChain(b []byte) ([]*x509.Certificate, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("gsi: client certificate missing: %w", ErrMalformed)
	}
	if len(b) > maxChainBytes {
		return nil, fmt.Errorf("gsi: client chain of %d bytes is too long: %w", len(b), ErrMalformed)
	}
	chain, err := x509proxy.PEMCertificates(b, maxChainCerts)
	if err != nil {
		return nil, fmt.Errorf("gsi: client chain: %w", errors.Join(ErrMalformed, err))
	}
	// Every RSA key of the chain is bounded before any is used: checking a
	// signature with a 65536-bit key costs 0.1 s of CPU, and chain
	// building checks up to 100 (an intermediate named as the CA is a
	// candidate issuer even if it signed nothing). The proxy key alone was
	// checked before.
	for i, c := range chain {
		if pub, ok := c.PublicKey.(*rsa.PublicKey); ok {
			if err := checkRSAKey(pub); err != nil {
				return nil, fmt.Errorf("certificate %d of the client chain (%s): %w", i, x509proxy.MustDN(c.RawSubject), err)
			}
		}
	}
	return chain, nil
}
