// Package authtest makes credentials for tests at test time: a CA, host and
// user certificates, RFC 3820 proxies, VOMS-like attribute certificates and
// token issuers with their keys. Nothing it makes is committed; every key
// lives in memory or in a test's temporary directory.
package authtest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/realclient"
)

var serial atomic.Int64

func nextSerial() *big.Int { return big.NewInt(time.Now().UnixNano()/1000 + serial.Add(1)) }

// ECKey returns a fresh P-256 key (fast to make).
func ECKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

// rsaKeys caches RSA keys: making one takes long, so a test process makes
// a few and hands each out once per index.
var (
	rsaMu   sync.Mutex
	rsaKeys []*rsa.PrivateKey
)

// RSAKey returns the i-th 2048-bit RSA key of this process (made on first
// use). Distinct i give distinct keys.
func RSAKey(tb testing.TB, i int) *rsa.PrivateKey {
	tb.Helper()
	rsaMu.Lock()
	defer rsaMu.Unlock()
	for len(rsaKeys) <= i {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			tb.Fatal(err)
		}
		rsaKeys = append(rsaKeys, k)
	}
	return rsaKeys[i]
}

// Cred is a certificate with its key and the chain up to (excluding) the
// root CA.
type Cred struct {
	Cert  *x509.Certificate
	Key   crypto.Signer
	Chain []*x509.Certificate // Cert first, then its issuers except the root
}

// CA is a test certificate authority.
type CA struct {
	Cred
}

// Name builds a grid-style DN: DC=org, DC=hepcache-test, then the given
// O/OU/CN parts in order.
func Name(parts ...string) pkix.Name {
	n := pkix.Name{ExtraNames: []pkix.AttributeTypeAndValue{
		{Type: asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 25}, Value: "org"},
		{Type: asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 25}, Value: "hepcache-test"},
	}}
	oids := map[string]asn1.ObjectIdentifier{"O": {2, 5, 4, 10}, "OU": {2, 5, 4, 11}, "CN": {2, 5, 4, 3}}
	for _, p := range parts {
		k, v, _ := strings.Cut(p, "=")
		n.ExtraNames = append(n.ExtraNames, pkix.AttributeTypeAndValue{Type: oids[k], Value: v})
	}
	return n
}

// NewCA makes a self-signed root CA named CN=cn.
func NewCA(tb testing.TB, cn string) *CA {
	tb.Helper()
	key := ECKey(tb)
	tmpl := &x509.Certificate{
		SerialNumber:          nextSerial(),
		Subject:               Name("CN=" + cn),
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(48 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		SubjectKeyId:          ski(&key.PublicKey),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &CA{Cred{Cert: cert, Key: key, Chain: nil}}
}

func ski(pub crypto.PublicKey) []byte {
	der, _ := x509.MarshalPKIXPublicKey(pub)
	s := sha1.Sum(der)
	return s[:]
}

// Issue signs tmpl (with its serial, validity and key ids filled in if
// unset) for the public key of key.
func (ca *CA) Issue(tb testing.TB, tmpl *x509.Certificate, key crypto.Signer) *Cred {
	tb.Helper()
	if tmpl.SerialNumber == nil {
		tmpl.SerialNumber = nextSerial()
	}
	if tmpl.NotBefore.IsZero() {
		tmpl.NotBefore = time.Now().Add(-time.Hour)
	}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	}
	if key == nil {
		key = ECKey(tb)
	}
	if tmpl.SubjectKeyId == nil {
		tmpl.SubjectKeyId = ski(key.Public()) // VOMS tools need it (authorityKeyIdentifier of ACs)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return &Cred{Cert: cert, Key: key, Chain: append([]*x509.Certificate{cert}, ca.Chain...)}
}

// Host issues a server certificate for names (DNS names or IPs).
func (ca *CA) Host(tb testing.TB, names ...string) *Cred {
	tb.Helper()
	return ca.HostKey(tb, nil, names...)
}

// HostKey is Host with the given key (nil: a fresh P-256 key); gsi host
// certificates need RSA (RSAKey).
func (ca *CA) HostKey(tb testing.TB, key crypto.Signer, names ...string) *Cred {
	tb.Helper()
	tmpl := &x509.Certificate{
		Subject:     Name("OU=Hosts", "CN="+names[0]),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	return ca.Issue(tb, tmpl, key)
}

// User issues a user (end-entity) certificate with CN=cn and an RSA key
// (grid user certificates are RSA, and proxies of RSA users are what
// real clients present).
func (ca *CA) User(tb testing.TB, cn string, rsaIndex int) *Cred {
	tb.Helper()
	tmpl := &x509.Certificate{
		Subject:     Name("OU=Users", "CN="+cn),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageDataEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return ca.Issue(tb, tmpl, RSAKey(tb, rsaIndex))
}

// ProxyOpts shapes a proxy certificate.
type ProxyOpts struct {
	// Limited makes a Globus limited proxy.
	Limited bool
	// PathLen is the proxyCertInfo path length constraint; nil for none.
	PathLen *int
	// Lifetime defaults to 12 h; NotBefore is an hour ago.
	Lifetime time.Duration
	// VOMS is the VOMS extension value (see VOMSExtension).
	VOMS []byte
	// CN is the extra CN; default a serial number as voms-proxy-init does.
	CN string
	// Mutate changes the template before signing (for negative tests).
	Mutate func(*x509.Certificate)
	// NoProxyCertInfo omits the extension; NonCritical marks it
	// non-critical; Policy overrides the policy language.
	NoProxyCertInfo, NonCritical bool
	Policy                       asn1.ObjectIdentifier
	// Key is the proxy's key; default a fresh P-256 key. gsi needs RSA
	// (RSAKey).
	Key crypto.Signer
}

// Proxy makes an RFC 3820 proxy certificate signed by c, with a fresh key.
func (c *Cred) Proxy(tb testing.TB, o ProxyOpts) *Cred {
	tb.Helper()
	key := o.Key
	if key == nil {
		key = ECKey(tb)
	}
	sn := nextSerial()
	cn := o.CN
	if cn == "" {
		cn = sn.String()
	}
	// The subject is the issuer's RDNs, byte for byte, plus one CN.
	var rdns []asn1.RawValue
	if _, err := asn1.Unmarshal(c.Cert.RawSubject, &rdns); err != nil {
		tb.Fatal(err)
	}
	cnRDN, err := asn1.Marshal(pkix.RelativeDistinguishedNameSET{{Type: asn1.ObjectIdentifier{2, 5, 4, 3}, Value: cn}})
	if err != nil {
		tb.Fatal(err)
	}
	rdns = append(rdns, asn1.RawValue{FullBytes: cnRDN})
	rawSubject, err := asn1.Marshal(rdns)
	if err != nil {
		tb.Fatal(err)
	}
	lifetime := o.Lifetime
	if lifetime == 0 {
		lifetime = 12 * time.Hour
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		RawSubject:   rawSubject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(lifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}
	if !o.NoProxyCertInfo {
		tmpl.ExtraExtensions = append(tmpl.ExtraExtensions, pkix.Extension{
			Id: asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 1, 14}, Critical: !o.NonCritical,
			Value: ProxyCertInfo(o.PathLen, o.policy()),
		})
	}
	if o.VOMS != nil {
		tmpl.ExtraExtensions = append(tmpl.ExtraExtensions, pkix.Extension{
			Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 8005, 100, 100, 5}, Value: o.VOMS,
		})
	}
	if o.Mutate != nil {
		o.Mutate(tmpl)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.Cert, key.Public(), c.Key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return &Cred{Cert: cert, Key: key, Chain: append([]*x509.Certificate{cert}, c.Chain...)}
}

func (o ProxyOpts) policy() asn1.ObjectIdentifier {
	switch {
	case o.Policy != nil:
		return o.Policy
	case o.Limited:
		return asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 3536, 1, 1, 1, 9}
	}
	return asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 21, 1}
}

// ProxyCertInfo encodes an RFC 3820 ProxyCertInfo value.
func ProxyCertInfo(pathLen *int, lang asn1.ObjectIdentifier) []byte {
	pol, _ := asn1.Marshal(struct{ Lang asn1.ObjectIdentifier }{lang})
	var body []byte
	if pathLen != nil {
		n, _ := asn1.Marshal(*pathLen)
		body = append(body, n...)
	}
	body = append(body, pol...)
	der, _ := asn1.Marshal(asn1.RawValue{Class: asn1.ClassUniversal, Tag: asn1.TagSequence, IsCompound: true, Bytes: body})
	return der
}

// Int returns a pointer to n (for ProxyOpts.PathLen).
func Int(n int) *int { return &n }

// CertPEM encodes certificates as PEM.
func CertPEM(certs ...*x509.Certificate) []byte {
	var b []byte
	for _, c := range certs {
		b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	return b
}

// KeyPEM encodes a private key as PEM (PKCS#8).
func KeyPEM(tb testing.TB, k crypto.Signer) []byte {
	tb.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		tb.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// TLS returns the credential as a tls.Certificate: the chain (Cert first)
// and the key, with Leaf set.
func (c *Cred) TLS() *tls.Certificate {
	tc := &tls.Certificate{PrivateKey: c.Key, Leaf: c.Cert}
	for _, x := range c.Chain {
		tc.Certificate = append(tc.Certificate, x.Raw)
	}
	return tc
}

// WriteFiles writes the certificate chain and the key to dir/name.pem and
// dir/name.key (mode 0600) and returns their paths.
func (c *Cred) WriteFiles(tb testing.TB, dir, name string) (certFile, keyFile string) {
	tb.Helper()
	certFile = filepath.Join(dir, name+".pem")
	keyFile = filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, CertPEM(c.Chain...), 0o644); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(keyFile, KeyPEM(tb, c.Key), 0o600); err != nil {
		tb.Fatal(err)
	}
	return certFile, keyFile
}

// WriteProxyFile writes a proxy file as grid tools do (the proxy
// certificate, its key, then the rest of the chain) and returns its path.
func (c *Cred) WriteProxyFile(tb testing.TB, dir, name string) string {
	tb.Helper()
	b := CertPEM(c.Cert)
	b = append(b, KeyPEM(tb, c.Key)...)
	b = append(b, CertPEM(c.Chain[1:]...)...)
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

// Pool returns a pool holding the CA certificates.
func Pool(cas ...*CA) *x509.CertPool {
	p := x509.NewCertPool()
	for _, ca := range cas {
		p.AddCert(ca.Cert)
	}
	return p
}

// RequireCADir is WriteCADir for tests that hand the directory to XrdCl or
// another OpenSSL user: without openssl (no hash links) the test fails in
// CI and is skipped elsewhere, as for any missing real client.
func RequireCADir(tb testing.TB, dir string, cas ...*CA) {
	tb.Helper()
	if !WriteCADir(tb, dir, cas...) {
		realclient.Require(tb, "openssl")
	}
}

// WriteCADir writes the CA certificates into dir as OpenSSL expects of
// X509_CERT_DIR (/etc/grid-security/certificates): name.pem plus a
// <subject-hash>.0 copy, the hash computed by the openssl tool. It
// returns false if openssl is not installed (only the .pem files exist).
func WriteCADir(tb testing.TB, dir string, cas ...*CA) bool {
	tb.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	hashed := true
	for i, ca := range cas {
		p := filepath.Join(dir, "ca"+string(rune('a'+i))+".pem")
		if err := os.WriteFile(p, CertPEM(ca.Cert), 0o644); err != nil {
			tb.Fatal(err)
		}
		out, err := exec.Command("openssl", "x509", "-hash", "-noout", "-in", p).Output()
		if err != nil {
			hashed = false
			continue
		}
		h := strings.TrimSpace(string(out))
		for n := 0; ; n++ {
			hp := filepath.Join(dir, h+"."+string(rune('0'+n)))
			if _, err := os.Stat(hp); err == nil {
				continue
			}
			if err := os.WriteFile(hp, CertPEM(ca.Cert), 0o644); err != nil {
				tb.Fatal(err)
			}
			break
		}
	}
	return hashed
}
