package x509proxy

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/auth/authtest"
	"github.com/hepcache/hepcache/internal/realclient"
)

// TestAgreesWithOpenSSL compares verdicts with an independent proxy
// verifier, `openssl verify -allow_proxy_certs`, on good and bad chains.
func TestAgreesWithOpenSSL(t *testing.T) {
	bin := realclient.Require(t, "openssl")
	ca := authtest.NewCA(t, "Test CA")
	user := ca.User(t, "alice", 0)
	v, _ := New(&Config{Roots: authtest.Pool(ca)})
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	os.WriteFile(caFile, authtest.CertPEM(ca.Cert), 0o644)
	p1 := user.Proxy(t, authtest.ProxyOpts{})
	for _, tc := range []struct {
		name  string
		chain []*x509.Certificate
		ok    bool
	}{
		{"proxy", p1.Chain, true},
		{"proxy of proxy", p1.Proxy(t, authtest.ProxyOpts{}).Chain, true},
		{"limited", user.Proxy(t, authtest.ProxyOpts{Limited: true}).Chain, true},
		{"wrong subject", user.Proxy(t, authtest.ProxyOpts{Mutate: func(c *x509.Certificate) {
			c.RawSubject, c.Subject = nil, pkix.Name{CommonName: "mallory"}
		}}).Chain, false},
		{"path length exceeded", p1.Proxy(t, authtest.ProxyOpts{PathLen: authtest.Int(0)}).Proxy(t, authtest.ProxyOpts{}).Chain, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leaf := filepath.Join(dir, "leaf.pem")
			untrusted := filepath.Join(dir, "untrusted.pem")
			os.WriteFile(leaf, authtest.CertPEM(tc.chain[0]), 0o644)
			os.WriteFile(untrusted, authtest.CertPEM(tc.chain[1:]...), 0o644)
			r := realclient.Run(t, realclient.Env(), bin, "verify", "-allow_proxy_certs", "-CAfile", caFile, "-untrusted", untrusted, leaf)
			sslOK := r.Err == nil && strings.Contains(string(r.Stdout), ": OK")
			_, err := v.Verify(tc.chain)
			if sslOK != tc.ok || (err == nil) != tc.ok {
				t.Fatalf("want ok=%v; openssl: %v (%s); hepcache: %v", tc.ok, sslOK, strings.TrimSpace(string(r.Stdout)+string(r.Stderr)), err)
			}
		})
	}
}
