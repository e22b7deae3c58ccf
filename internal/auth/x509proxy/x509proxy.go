// Package x509proxy verifies X.509 client certificate chains that may hold
// RFC 3820 proxy certificates, which crypto/x509 refuses because a proxy is
// signed by an end-entity certificate. It verifies the end-entity
// certificate against the CA pool with crypto/x509, then each proxy step
// itself: names, signature, proxyCertInfo, key usage, validity, path length.
package x509proxy

import (
	"bytes"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"github.com/hepcache/hepcache/internal/auth/crl"
)

// ErrInvalid marks a chain that does not verify. Check with errors.Is.
var ErrInvalid = errors.New("x509proxy: invalid certificate chain")

// Object identifiers of RFC 3820 and Globus.
var (
	// OIDProxyCertInfo is the RFC 3820 proxyCertInfo extension.
	OIDProxyCertInfo = asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 1, 14}
	// OIDInheritAll is the policy language of a normal proxy.
	OIDInheritAll = asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 21, 1}
	// OIDIndependent is the policy language of a proxy without rights.
	OIDIndependent = asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 21, 2}
	// OIDLimited is the Globus limited proxy policy language.
	OIDLimited = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 3536, 1, 1, 1, 9}
	// oidDraftProxyCertInfo marks pre-RFC (GT3) proxies.
	oidDraftProxyCertInfo = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 3536, 1, 222}
	oidCommonName         = asn1.ObjectIdentifier{2, 5, 4, 3}
	oidIssuerAltName      = asn1.ObjectIdentifier{2, 5, 29, 18}
)

// defaultMaxProxies bounds the proxies in one chain (delegation depth).
const defaultMaxProxies = 10

// maxRSABits bounds the RSA keys of a chain, as crypto/tls bounds TLS
// peers' (tlsmaxrsasize).
const maxRSABits = 8192

// Config configures a Verifier.
type Config struct {
	// Roots are the trusted CAs (the IGTF bundle of
	// /etc/grid-security/certificates). Required.
	Roots *x509.CertPool
	// MaxProxies bounds the proxy certificates in a chain. Default 10.
	MaxProxies int
	// CRL checks the end-entity certificate against its CA's revocation
	// list. Nil: revocation is not checked.
	CRL *crl.Checker
}

// Verifier verifies client chains. Safe for concurrent use.
type Verifier struct {
	roots      *x509.CertPool
	crl        *crl.Checker
	maxProxies int
	now        func() time.Time
}

// New returns a Verifier.
func New(cfg *Config) (*Verifier, error) {
	return newVerifier(cfg, time.Now)
}

func newVerifier(cfg *Config, now func() time.Time) (*Verifier, error) {
	if cfg.Roots == nil {
		return nil, errors.New("x509proxy: no CA pool")
	}
	v := &Verifier{roots: cfg.Roots, crl: cfg.CRL, maxProxies: cfg.MaxProxies, now: now}
	if v.maxProxies == 0 {
		v.maxProxies = defaultMaxProxies
	}
	if v.maxProxies < 0 {
		return nil, fmt.Errorf("x509proxy: max proxies %d must not be negative", v.maxProxies)
	}
	return v, nil
}

// Chain is a verified client chain.
type Chain struct {
	// EndEntity is the user's (or robot's) certificate that the proxies
	// descend from: the identity.
	EndEntity *x509.Certificate
	// Proxies are the proxy certificates, the one EndEntity signed first
	// and the leaf (the TLS peer's) last. Empty for a plain certificate.
	Proxies []*x509.Certificate
	// CAChain is EndEntity's verified path, EndEntity first, root last.
	CAChain []*x509.Certificate
	// Subject is EndEntity's DN in slash form ("/DC=ch/.../CN=alice").
	Subject string
	// Limited is set when a proxy in the chain is a limited proxy.
	Limited bool
	// NotAfter is the earliest expiry in the chain.
	NotAfter time.Time
}

// Verify verifies certs as a TLS peer sends them: the leaf first, then its
// issuers. The leaf may be a proxy, whose issuer may be a proxy, down to an
// end-entity certificate issued by a trusted CA (with intermediates after
// it).
func (v *Verifier) Verify(certs []*x509.Certificate) (*Chain, error) {
	if len(certs) == 0 {
		return nil, fmt.Errorf("no certificate: %w", ErrInvalid)
	}
	ee := 0
	for ee < len(certs) && isProxy(certs[ee]) {
		ee++
	}
	if ee == len(certs) {
		return nil, fmt.Errorf("chain of %d proxies has no end-entity certificate: %w", ee, ErrInvalid)
	}
	if ee > v.maxProxies {
		return nil, fmt.Errorf("chain has %d proxies, at most %d are accepted: %w", ee, v.maxProxies, ErrInvalid)
	}
	// No signature is checked with a key the TLS stack would refuse (RSA
	// over 8192 bits, crypto/tls's bound): a 65536-bit key costs 0.1 s per
	// signature check, and chain building may try 100 candidates. TLS
	// peers are bounded before they get here; gsi peers are not.
	for _, c := range certs {
		if pub, ok := c.PublicKey.(*rsa.PublicKey); ok && pub.N.BitLen() > maxRSABits {
			return nil, fmt.Errorf("certificate %s has an RSA key of %d bits, at most %d are accepted: %w", MustDN(c.RawSubject), pub.N.BitLen(), maxRSABits, ErrInvalid)
		}
	}
	eeCert := certs[ee]
	now := v.now()
	if ee == 0 && len(certs) > 1 && looksLikeLegacyProxy(certs[0], certs[1]) {
		return nil, fmt.Errorf("certificate %s is a legacy (pre-RFC 3820) proxy, which is not accepted: make an RFC 3820 proxy (voms-proxy-init -rfc): %w", MustDN(certs[0].RawSubject), ErrInvalid)
	}
	inter := x509.NewCertPool()
	for _, c := range certs[ee+1:] {
		inter.AddCert(c)
	}
	paths, err := eeCert.Verify(x509.VerifyOptions{
		Roots:         v.roots,
		Intermediates: inter,
		CurrentTime:   now,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, fmt.Errorf("certificate %s: %w", MustDN(eeCert.RawSubject), errors.Join(ErrInvalid, err))
	}
	if err := v.crl.Check(paths[0]); err != nil {
		return nil, fmt.Errorf("certificate %s: %w", MustDN(eeCert.RawSubject), errors.Join(ErrInvalid, err))
	}
	ch := &Chain{EndEntity: eeCert, CAChain: paths[0], Subject: MustDN(eeCert.RawSubject), NotAfter: eeCert.NotAfter}
	for _, c := range paths[0] {
		if c.NotAfter.Before(ch.NotAfter) {
			ch.NotAfter = c.NotAfter
		}
	}
	if ee > 0 && eeCert.BasicConstraintsValid && eeCert.IsCA {
		return nil, fmt.Errorf("CA certificate %s cannot issue proxies: %w", ch.Subject, ErrInvalid)
	}
	issuer := eeCert
	for j := ee - 1; j >= 0; j-- {
		p := certs[j]
		info, err := checkProxy(p, issuer, j, now)
		if err != nil {
			return nil, fmt.Errorf("proxy %s: %w", MustDN(p.RawSubject), errors.Join(ErrInvalid, err))
		}
		if info.limited {
			ch.Limited = true
		}
		if p.NotAfter.Before(ch.NotAfter) {
			ch.NotAfter = p.NotAfter
		}
		ch.Proxies = append(ch.Proxies, p)
		issuer = p
	}
	return ch, nil
}

// isProxy reports whether c says it is an RFC 3820 (or draft) proxy.
func isProxy(c *x509.Certificate) bool {
	for _, e := range c.Extensions {
		if e.Id.Equal(OIDProxyCertInfo) || e.Id.Equal(oidDraftProxyCertInfo) {
			return true
		}
	}
	return false
}

// looksLikeLegacyProxy recognises a Globus 2 proxy: issued by the next
// certificate, with its subject plus CN=proxy or CN=limited proxy.
func looksLikeLegacyProxy(c, issuer *x509.Certificate) bool {
	if !bytes.Equal(c.RawIssuer, issuer.RawSubject) {
		return false
	}
	cn, ok := extraCN(c.RawSubject, issuer.RawSubject)
	return ok && (cn == "proxy" || cn == "limited proxy")
}

type proxyInfo struct {
	pathLen int // -1: unlimited
	limited bool
}

// checkProxy checks proxy p issued by issuer; below proxies follow p in
// the chain (were signed by p, directly or not).
func checkProxy(p, issuer *x509.Certificate, below int, now time.Time) (proxyInfo, error) {
	var info proxyInfo
	if !bytes.Equal(p.RawIssuer, issuer.RawSubject) {
		return info, fmt.Errorf("issuer %s is not the subject of the certificate that should have signed it, %s", MustDN(p.RawIssuer), MustDN(issuer.RawSubject))
	}
	if _, ok := extraCN(p.RawSubject, issuer.RawSubject); !ok {
		return info, fmt.Errorf("subject must be its issuer's subject %s plus one CN", MustDN(issuer.RawSubject))
	}
	if err := issuer.CheckSignature(p.SignatureAlgorithm, p.RawTBSCertificate, p.Signature); err != nil {
		return info, fmt.Errorf("signature does not verify with the key of %s: %w", MustDN(issuer.RawSubject), err)
	}
	if now.Before(p.NotBefore) {
		return info, fmt.Errorf("not valid before %s", p.NotBefore.UTC().Format(time.RFC3339))
	}
	if now.After(p.NotAfter) {
		return info, fmt.Errorf("expired at %s", p.NotAfter.UTC().Format(time.RFC3339))
	}
	var ext *pkix.Extension
	for i := range p.Extensions {
		e := &p.Extensions[i]
		switch {
		case e.Id.Equal(OIDProxyCertInfo):
			if ext != nil {
				return info, errors.New("proxyCertInfo extension appears twice")
			}
			ext = e
		case e.Id.Equal(oidDraftProxyCertInfo):
			return info, errors.New("pre-RFC 3820 (draft) proxies are not accepted: make an RFC 3820 proxy")
		case e.Id.Equal(oidIssuerAltName):
			return info, errors.New("a proxy must not carry an issuer alternative name")
		}
	}
	if ext == nil {
		return info, errors.New("no proxyCertInfo extension")
	}
	if !ext.Critical {
		return info, errors.New("the proxyCertInfo extension must be critical")
	}
	for _, oid := range p.UnhandledCriticalExtensions {
		if !oid.Equal(OIDProxyCertInfo) {
			return info, fmt.Errorf("unknown critical extension %s", oid)
		}
	}
	pathLen, lang, err := ParseProxyCertInfo(ext.Value)
	if err != nil {
		return info, err
	}
	switch {
	case lang.Equal(OIDInheritAll):
	case lang.Equal(OIDLimited):
		info.limited = true
	case lang.Equal(OIDIndependent):
		return info, errors.New("an independent proxy carries none of its issuer's rights")
	default:
		return info, fmt.Errorf("unknown proxy policy language %s", lang)
	}
	info.pathLen = pathLen
	if pathLen >= 0 && below > pathLen {
		return info, fmt.Errorf("path length constraint %d allows %d more proxies, the chain has %d", pathLen, pathLen, below)
	}
	if p.BasicConstraintsValid && p.IsCA {
		return info, errors.New("a proxy must not be a CA")
	}
	if p.KeyUsage != 0 && (p.KeyUsage&x509.KeyUsageDigitalSignature == 0 || p.KeyUsage&x509.KeyUsageCertSign != 0) {
		return info, errors.New("key usage must include digitalSignature and exclude keyCertSign")
	}
	if issuer.KeyUsage != 0 && issuer.KeyUsage&x509.KeyUsageDigitalSignature == 0 {
		return info, fmt.Errorf("issuer %s may not sign proxies: its key usage lacks digitalSignature", MustDN(issuer.RawSubject))
	}
	if len(p.DNSNames)+len(p.EmailAddresses)+len(p.IPAddresses)+len(p.URIs) > 0 {
		return info, errors.New("a proxy must not carry a subject alternative name")
	}
	return info, nil
}

// extraCN checks that subject is issuer followed by exactly one RDN with a
// single CN, comparing the issuer's RDNs byte for byte, and returns that
// CN.
func extraCN(subject, issuer []byte) (string, bool) {
	var s, i []asn1.RawValue
	if rest, err := asn1.Unmarshal(subject, &s); err != nil || len(rest) > 0 {
		return "", false
	}
	if rest, err := asn1.Unmarshal(issuer, &i); err != nil || len(rest) > 0 {
		return "", false
	}
	if len(s) != len(i)+1 {
		return "", false
	}
	for k := range i {
		if !bytes.Equal(s[k].FullBytes, i[k].FullBytes) {
			return "", false
		}
	}
	var last pkix.RelativeDistinguishedNameSET
	if rest, err := asn1.Unmarshal(s[len(i)].FullBytes, &last); err != nil || len(rest) > 0 {
		return "", false
	}
	if len(last) != 1 || !last[0].Type.Equal(oidCommonName) {
		return "", false
	}
	cn, ok := last[0].Value.(string)
	return cn, ok && cn != ""
}

// ParseProxyCertInfo decodes an RFC 3820 ProxyCertInfo extension value:
//
//	ProxyCertInfo ::= SEQUENCE {
//	    pCPathLenConstraint INTEGER (0..MAX) OPTIONAL,
//	    proxyPolicy ProxyPolicy }
//	ProxyPolicy ::= SEQUENCE {
//	    policyLanguage OBJECT IDENTIFIER,
//	    policy OCTET STRING OPTIONAL }
//
// pathLen is -1 when there is no constraint.
func ParseProxyCertInfo(der []byte) (pathLen int, lang asn1.ObjectIdentifier, err error) {
	var seq asn1.RawValue
	rest, err := asn1.Unmarshal(der, &seq)
	if err != nil || len(rest) > 0 || seq.Class != asn1.ClassUniversal || seq.Tag != asn1.TagSequence || !seq.IsCompound {
		return 0, nil, errors.New("malformed proxyCertInfo")
	}
	body := seq.Bytes
	pathLen = -1
	var first asn1.RawValue
	if body, err = asn1.Unmarshal(body, &first); err != nil {
		return 0, nil, errors.New("malformed proxyCertInfo")
	}
	if first.Class == asn1.ClassUniversal && first.Tag == asn1.TagInteger {
		var n int64
		if _, err := asn1.Unmarshal(first.FullBytes, &n); err != nil || n < 0 || n > 1<<20 {
			return 0, nil, errors.New("malformed proxyCertInfo path length")
		}
		pathLen = int(n)
		if body, err = asn1.Unmarshal(body, &first); err != nil {
			return 0, nil, errors.New("malformed proxyCertInfo: no policy")
		}
	}
	if len(body) > 0 {
		return 0, nil, errors.New("malformed proxyCertInfo: trailing data")
	}
	var pol struct {
		Language asn1.ObjectIdentifier
		Policy   []byte `asn1:"optional"`
	}
	if rest, err := asn1.Unmarshal(first.FullBytes, &pol); err != nil || len(rest) > 0 {
		return 0, nil, errors.New("malformed proxyCertInfo policy")
	}
	return pathLen, pol.Language, nil
}

// PEMCertificates returns the certificates in PEM data in order, skipping
// other blocks (a proxy file holds its private key too). With max > 0,
// more than max certificates is an error: the data may come from a client.
func PEMCertificates(b []byte, max int) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		if max > 0 && len(out) == max {
			return nil, fmt.Errorf("more than %d certificates", max)
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return out, nil
}
