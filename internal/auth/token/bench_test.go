package token

import (
	"context"
	"testing"

	"github.com/hepcache/hepcache/internal/auth/authtest"
)

// BenchmarkVerify measures one token verification (parse, signature,
// claims) with cached keys: the cost added to each HTTP request and to each
// root:// login.
func BenchmarkVerify(b *testing.B) {
	for _, alg := range []string{"RS256", "ES256"} {
		b.Run(alg, func(b *testing.B) {
			is := authtest.NewIssuer(b, "https://issuer.example", 0)
			v, err := New(&Config{Issuers: []Issuer{{Issuer: is.URL, JWKSFile: is.WriteJWKS(b, b.TempDir(), "k")}}, Audiences: []string{"a"}})
			if err != nil {
				b.Fatal(err)
			}
			defer v.Close()
			tok := is.Sign(b, alg, authtest.Claims{"sub": "s", "aud": "a", "scope": "storage.read:/store storage.stage:/store/mc", "wlcg.groups": []string{"/cms", "/cms/uscms"}})
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(ctx, tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
