package x509proxy

import (
	"testing"

	"github.com/hepcache/hepcache/internal/auth/authtest"
)

// BenchmarkVerifyProxy measures verifying a user certificate with one
// proxy (what an HTTPS request with a proxy costs when the result is not
// cached).
func BenchmarkVerifyProxy(b *testing.B) {
	ca := authtest.NewCA(b, "CA")
	p := ca.User(b, "u", 0).Proxy(b, authtest.ProxyOpts{})
	v, _ := New(&Config{Roots: authtest.Pool(ca)})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(p.Chain); err != nil {
			b.Fatal(err)
		}
	}
}
