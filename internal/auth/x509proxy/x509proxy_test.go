package x509proxy

import (
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/auth/authtest"
)

func TestDN(t *testing.T) {
	ca := authtest.NewCA(t, "Test CA")
	u := ca.User(t, "Alice Analyst", 0)
	got, err := DN(u.Cert.RawSubject)
	if err != nil {
		t.Fatal(err)
	}
	if want := "/DC=org/DC=hepcache-test/OU=Users/CN=Alice Analyst"; got != want {
		t.Fatalf("DN = %q, want %q", got, want)
	}
	if got != authtest.DN(u.Cert) {
		t.Fatalf("DN %q differs from the test helper's %q", got, authtest.DN(u.Cert))
	}
}

func TestVerifyChains(t *testing.T) {
	ca := authtest.NewCA(t, "Test CA")
	other := authtest.NewCA(t, "Other CA")
	user := ca.User(t, "alice", 0)
	v, err := New(&Config{Roots: authtest.Pool(ca)})
	if err != nil {
		t.Fatal(err)
	}
	p1 := user.Proxy(t, authtest.ProxyOpts{})
	p2 := p1.Proxy(t, authtest.ProxyOpts{})
	lim := p1.Proxy(t, authtest.ProxyOpts{Limited: true})

	t.Run("plain certificate", func(t *testing.T) {
		ch, err := v.Verify(user.Chain)
		if err != nil {
			t.Fatal(err)
		}
		if ch.Subject != "/DC=org/DC=hepcache-test/OU=Users/CN=alice" || len(ch.Proxies) != 0 {
			t.Fatalf("chain %+v", ch)
		}
	})
	t.Run("proxy", func(t *testing.T) {
		ch, err := v.Verify(p1.Chain)
		if err != nil {
			t.Fatal(err)
		}
		if ch.EndEntity != user.Cert || len(ch.Proxies) != 1 || ch.Limited {
			t.Fatalf("chain %+v", ch)
		}
		if !ch.NotAfter.Equal(p1.Cert.NotAfter) && ch.NotAfter.After(p1.Cert.NotAfter) {
			t.Errorf("NotAfter %v later than the proxy's %v", ch.NotAfter, p1.Cert.NotAfter)
		}
	})
	t.Run("proxy of proxy", func(t *testing.T) {
		ch, err := v.Verify(p2.Chain)
		if err != nil {
			t.Fatal(err)
		}
		if len(ch.Proxies) != 2 || ch.Proxies[0] != p1.Cert || ch.Proxies[1] != p2.Cert {
			t.Fatalf("proxies %v", ch.Proxies)
		}
	})
	t.Run("limited", func(t *testing.T) {
		ch, err := v.Verify(lim.Chain)
		if err != nil {
			t.Fatal(err)
		}
		if !ch.Limited {
			t.Fatal("limited proxy not marked")
		}
	})

	mutated := func(m func(*x509.Certificate)) []*x509.Certificate {
		return user.Proxy(t, authtest.ProxyOpts{Mutate: m}).Chain
	}
	otherUser := other.User(t, "mallory", 1)
	// A proxy whose subject does not extend the issuer's (signed correctly).
	wrongSubject := mutated(func(c *x509.Certificate) {
		c.RawSubject = nil
		c.Subject = pkix.Name{CommonName: "alice"}
	})
	twoCNs := mutated(func(c *x509.Certificate) {
		var rdns []asn1.RawValue
		asn1.Unmarshal(c.RawSubject, &rdns)
		rdns = append(rdns, rdns[len(rdns)-1])
		c.RawSubject, _ = asn1.Marshal(rdns)
	})
	// The proxy is presented with someone else's certificate below it.
	swapped := []*x509.Certificate{p1.Cert, ca.User(t, "bob", 1).Cert}
	forged := []*x509.Certificate{otherUser.Proxy(t, authtest.ProxyOpts{}).Cert, user.Cert}
	pathLen0 := p1.Proxy(t, authtest.ProxyOpts{PathLen: authtest.Int(0)}).Proxy(t, authtest.ProxyOpts{}).Chain
	deep := user
	for i := 0; i < 12; i++ {
		deep = deep.Proxy(t, authtest.ProxyOpts{})
	}

	cases := []struct {
		name  string
		chain []*x509.Certificate
		want  string
	}{
		{"unknown CA", otherUser.Chain, "unknown authority"},
		{"proxy of unknown CA user", otherUser.Proxy(t, authtest.ProxyOpts{}).Chain, "unknown authority"},
		{"expired proxy", user.Proxy(t, authtest.ProxyOpts{Lifetime: -time.Minute}).Chain, "expired"},
		{"proxy not yet valid", mutated(func(c *x509.Certificate) { c.NotBefore = time.Now().Add(time.Hour) }), "not valid before"},
		{"non-critical proxyCertInfo", user.Proxy(t, authtest.ProxyOpts{NonCritical: true}).Chain, "critical"},
		{"independent policy", user.Proxy(t, authtest.ProxyOpts{Policy: OIDIndependent}).Chain, "independent"},
		{"unknown policy", user.Proxy(t, authtest.ProxyOpts{Policy: asn1.ObjectIdentifier{1, 2, 3}}).Chain, "policy language"},
		{"subject not issuer plus CN", wrongSubject, "plus one CN"},
		{"subject with two extra CNs", twoCNs, "plus one CN"},
		{"legacy proxy", user.Proxy(t, authtest.ProxyOpts{NoProxyCertInfo: true, CN: "proxy"}).Chain, "legacy"},
		{"proxy that is a CA", mutated(func(c *x509.Certificate) { c.BasicConstraintsValid, c.IsCA = true, true }), "must not be a CA"},
		{"proxy with keyCertSign", mutated(func(c *x509.Certificate) { c.KeyUsage |= x509.KeyUsageCertSign }), "key usage"},
		{"proxy with SAN", mutated(func(c *x509.Certificate) { c.DNSNames = []string{"evil.example"} }), "alternative name"},
		{"swapped end-entity", swapped, "not the subject"},
		{"proxy signed by another key", forged, "not the subject"},
		{"path length exceeded", pathLen0, "path length"},
		{"too deep", deep.Chain, "at most 10"},
		{"only proxies", []*x509.Certificate{p2.Cert, p1.Cert}, "no end-entity"},
		{"empty", nil, "no certificate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := v.Verify(tc.chain)
			if err == nil {
				t.Fatalf("accepted: %+v", ch)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%v does not wrap ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

// TestProxySignatureChecked re-signs nothing but swaps the proxy's
// signature for another proxy's: the names match, the signature must not.
func TestProxySignatureChecked(t *testing.T) {
	ca := authtest.NewCA(t, "Test CA")
	user := ca.User(t, "alice", 0)
	v, _ := New(&Config{Roots: authtest.Pool(ca)})
	a := user.Proxy(t, authtest.ProxyOpts{})
	b := user.Proxy(t, authtest.ProxyOpts{})
	bad := *a.Cert
	bad.Signature = b.Cert.Signature
	_, err := v.Verify([]*x509.Certificate{&bad, user.Cert})
	if err == nil || !strings.Contains(err.Error(), "signature") {
		t.Fatalf("proxy with a foreign signature: %v", err)
	}
}

func TestParseProxyCertInfo(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pathLen *int
		want    int
	}{{"none", nil, -1}, {"zero", authtest.Int(0), 0}, {"three", authtest.Int(3), 3}} {
		t.Run(tc.name, func(t *testing.T) {
			n, lang, err := ParseProxyCertInfo(authtest.ProxyCertInfo(tc.pathLen, OIDInheritAll))
			if err != nil || n != tc.want || !lang.Equal(OIDInheritAll) {
				t.Fatalf("got %d %v %v", n, lang, err)
			}
		})
	}
	for _, bad := range [][]byte{nil, {0x30, 0x00}, {0x30, 0x03, 0x02, 0x01, 0x01}, {0x04, 0x00}} {
		if _, _, err := ParseProxyCertInfo(bad); err == nil {
			t.Errorf("ParseProxyCertInfo(%x) accepted", bad)
		}
	}
}

func TestPEMCertificates(t *testing.T) {
	ca := authtest.NewCA(t, "Test CA")
	u := ca.User(t, "alice", 0)
	p := u.Proxy(t, authtest.ProxyOpts{})
	// A proxy file: the proxy, its key, then the chain.
	b := append(authtest.CertPEM(p.Cert), authtest.KeyPEM(t, p.Key)...)
	b = append(b, authtest.CertPEM(u.Cert, ca.Cert)...)
	certs, err := PEMCertificates(b, 0)
	if err != nil || len(certs) != 3 || !certs[0].Equal(p.Cert) {
		t.Fatalf("got %d certificates, %v", len(certs), err)
	}
	if _, err := PEMCertificates(b, 2); err == nil {
		t.Fatal("three certificates accepted with a limit of two")
	}
	if _, err := PEMCertificates(authtest.KeyPEM(t, p.Key), 0); err == nil {
		t.Fatal("a key alone accepted as a chain")
	}
}

// TestHugeRSAKeysRefused: a chain holding a certificate with an RSA key
// over 8192 bits is refused before any signature is checked (the huge
// key here signed nothing it could verify): the error names the size.
func TestHugeRSAKeysRefused(t *testing.T) {
	ca := authtest.NewCA(t, "Test CA")
	user := ca.User(t, "alice", 0)
	v, _ := New(&Config{Roots: authtest.Pool(ca)})
	p := user.Proxy(t, authtest.ProxyOpts{})
	huge := *p.Cert
	n := new(big.Int).Lsh(big.NewInt(1), 16383)
	huge.PublicKey = &rsa.PublicKey{N: n.Or(n, big.NewInt(1)), E: 65537}
	_, err := v.Verify([]*x509.Certificate{&huge, user.Cert})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "RSA key of 16384 bits") {
		t.Fatalf("chain with a 16384-bit key: %v", err)
	}
}
