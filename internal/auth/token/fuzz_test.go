package token

import (
	"context"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/auth/authtest"
)

// FuzzVerify: arbitrary strings as tokens are parsed and refused (or, for
// the valid seeds, accepted) without panicking or fetching anything: the
// issuer's keys come from a file.
func FuzzVerify(f *testing.F) {
	is := authtest.NewIssuer(f, "https://issuer.example", 0)
	jwks := is.WriteJWKS(f, f.TempDir(), "jwks.json")
	v, err := New(&Config{Issuers: []Issuer{{Issuer: is.URL, JWKSFile: jwks}}, Audiences: []string{"a"}})
	if err != nil {
		f.Fatal(err)
	}
	defer v.Close()
	f.Add(is.Sign(f, "RS256", authtest.Claims{"sub": "x", "aud": "a", "scope": "storage.read:/ read:/x"}))
	f.Add(is.Sign(f, "ES256", authtest.Claims{"sub": "x", "aud": []string{"a", "b"}, "wlcg.groups": []string{"/cms"}}))
	f.Add("eyJhbGciOiJub25lIn0.e30.")
	f.Add("a.b.c")
	f.Fuzz(func(t *testing.T, raw string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		c, err := v.Verify(ctx, raw)
		if err == nil && (c.Issuer != is.URL || c.Expiry.IsZero()) {
			t.Fatalf("accepted %q with claims %+v", raw, c)
		}
		Parse(raw, 1<<16)
	})
}
