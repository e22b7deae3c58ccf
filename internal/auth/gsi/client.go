package gsi

import (
	"crypto"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ClientConfig is the client side's credential and trust.
type ClientConfig struct {
	// Certificate returns the client's proxy: the chain (proxy first, then
	// its issuers up to but excluding the root CA) and its RSA key. It is
	// called at every handshake, since proxies are renewed while a
	// process runs. Required.
	Certificate func() (*tls.Certificate, error)
	// Roots verify the server's host certificate. Nil: the system pool.
	Roots *x509.CertPool
}

// ClientHandshake is one client handshake. Not safe for concurrent use.
type ClientHandshake struct {
	cfg  *ClientConfig
	host string
	cert *tls.Certificate
	key  *rsa.PrivateKey
	rtag []byte // the tag the server must sign
	// signed: the server speaks 10400 or later (signed DH parts, padded
	// DH secret, IV); else 10300.
	signed bool
	done   bool
}

// NewClientHandshake starts a handshake with the server at host (the name
// its certificate must carry) that announced params, the text after
// "&P=gsi," in the login answer. It returns the first step's credentials.
func NewClientHandshake(cfg *ClientConfig, host, params string) (*ClientHandshake, []byte, error) {
	opts := map[string]string{}
	for _, kv := range strings.Split(strings.TrimRight(params, "\x00"), ",") {
		k, v, _ := strings.Cut(kv, ":")
		opts[k] = v
	}
	if c, ok := opts["c"]; ok {
		if _, ok := cryptoSSL([]byte(c)); !ok {
			return nil, nil, fmt.Errorf("gsi: the server offers crypto modules %q, not ssl", c)
		}
	}
	srvVersion, err := strconv.Atoi(opts["v"])
	if err != nil {
		return nil, nil, fmt.Errorf("gsi: server parameters %q without a version", params)
	}
	if cfg.Certificate == nil {
		return nil, nil, errors.New("gsi: no proxy certificate configured")
	}
	cert, err := cfg.Certificate()
	if err != nil {
		return nil, nil, fmt.Errorf("gsi: proxy: %w", err)
	}
	key, ok := cert.PrivateKey.(*rsa.PrivateKey)
	if !ok || len(cert.Certificate) == 0 {
		return nil, nil, fmt.Errorf("gsi: the proxy key is %T; gsi needs an RSA key", cert.PrivateKey)
	}
	last, err := x509.ParseCertificate(cert.Certificate[len(cert.Certificate)-1])
	if err != nil {
		return nil, nil, fmt.Errorf("gsi: proxy chain: %w", err)
	}
	hash, err := NameHash(last.RawIssuer)
	if err != nil {
		return nil, nil, fmt.Errorf("gsi: proxy chain issuer: %w", err)
	}
	h := &ClientHandshake{cfg: cfg, host: host, cert: cert, key: key, rtag: newTag(), signed: srvVersion >= versionDHSigned}
	version := int32(Version)
	if !h.signed {
		version = 10300 // the server would otherwise expect signed DH parts
	}
	m := &buffer{step: stepCertReq}
	m.set(bkRtag, h.rtag)
	out := &buffer{step: stepCertReq}
	out.set(bkCryptoMod, []byte("ssl")) // no "nopad": this side pads the DH secret
	out.setInt(bkVersion, version)
	out.set(bkIssuerHash, []byte(hash))
	out.setInt(bkClntOpts, 0)
	out.set(bkMain, m.marshal())
	return h, out.marshal(), nil
}

// Next answers the server's kXGS_cert (the kXR_authmore body) with the
// proxy chain. srv is not retained.
func (h *ClientHandshake) Next(srv []byte) ([]byte, error) {
	if h.done {
		return nil, errors.New("gsi: the server asks for more steps than the protocol has (proxy delegation is not supported)")
	}
	h.done = true
	in, err := parseBuffer(srv)
	if err != nil {
		return nil, err
	}
	if in.step != stepSrvCert {
		return nil, fmt.Errorf("gsi: server step %d where its certificate was expected: %w", in.step, ErrMalformed)
	}
	host, err := h.verifyHost(in.get(bkX509))
	if err != nil {
		return nil, err
	}
	m, err := parseBuffer(in.get(bkMain))
	if err != nil {
		return nil, fmt.Errorf("gsi: server main buffer: %w", err)
	}
	if err := rsa.VerifyPKCS1v15(host, crypto.Hash(0), h.rtag, m.get(bkSignedRtag)); err != nil {
		return nil, errors.New("gsi: the server did not sign our random tag with the key of its certificate")
	}
	stag := m.get(bkRtag)
	if !isTag(stag) {
		return nil, fmt.Errorf("gsi: the server's random tag is not a short tag of [A-Za-z0-9./]: %w", ErrMalformed)
	}
	sig, err := h.key.Sign(nil, stag, crypto.Hash(0))
	if err != nil {
		return nil, fmt.Errorf("gsi: sign the server's tag: %w", err)
	}
	if !listHas(in.get(bkCipherAlg), sessionCipher) {
		return nil, fmt.Errorf("gsi: the server offers ciphers %q, not %s", in.get(bkCipherAlg), sessionCipher)
	}
	md, _, _ := strings.Cut(string(in.get(bkMDAlg)), ":")
	srvPub := in.get(bkPuk)
	if h.signed {
		if srvPub, err = recoverChunks(host, in.get(bkCipher)); err != nil {
			return nil, fmt.Errorf("gsi: server DH public part: %w", err)
		}
	}
	params, y, err := parsePublic(srvPub, true)
	if err != nil {
		return nil, fmt.Errorf("gsi: server DH public part: %w", err)
	}
	dh, err := newDHKey(params)
	if err != nil {
		return nil, err
	}
	key, err := dh.sessionKey(y, h.signed)
	if err != nil {
		return nil, fmt.Errorf("gsi: %w", err)
	}
	var chain []byte
	for _, der := range h.cert.Certificate {
		chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	reply := &buffer{step: stepCert}
	reply.set(bkSignedRtag, sig)
	reply.set(bkX509, chain)
	reply.set(bkRtag, newTag())
	out := &buffer{step: stepCert}
	out.set(bkCryptoMod, []byte("ssl"))
	if h.signed {
		pub, err := signChunks(h.key, dh.public())
		if err != nil {
			return nil, fmt.Errorf("gsi: sign the DH public part: %w", err)
		}
		der, err := x509.MarshalPKIXPublicKey(&h.key.PublicKey)
		if err != nil {
			return nil, err
		}
		out.set(bkCipher, pub)
		out.set(bkPuk, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
		out.set(bkCipherAlg, []byte(sessionCipher+"#16"))
	} else {
		out.set(bkPuk, dh.public())
		out.set(bkCipherAlg, []byte(sessionCipher))
	}
	if md != "" {
		out.set(bkMDAlg, []byte(md))
	}
	out.set(bkMain, encrypt(key, reply.marshal(), h.signed))
	return out.marshal(), nil
}

// verifyHost verifies the server's certificate (one PEM certificate) for
// h.host and returns its RSA key.
func (h *ClientHandshake) verifyHost(b []byte) (*rsa.PublicKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("gsi: server certificate missing: %w", ErrMalformed)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("gsi: server certificate: %w", errors.Join(ErrMalformed, err))
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: h.cfg.Roots, DNSName: h.host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("gsi: server certificate of %s: %w", h.host, err)
	}
	pub, ok := c.PublicKey.(*rsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("gsi: the server key is %T, not RSA", c.PublicKey)
	}
	if err := checkRSAKey(pub); err != nil {
		return nil, fmt.Errorf("server key: %w", err)
	}
	return pub, nil
}

// listHas reports whether a ':'-separated list names s.
func listHas(list []byte, s string) bool {
	for _, e := range strings.Split(string(list), ":") {
		if e == s {
			return true
		}
	}
	return false
}
