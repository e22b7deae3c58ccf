package token

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/auth/authtest"
	"github.com/hepcache/hepcache/internal/realclient"
)

// TestPyJWTInterop checks the token format against an independent
// implementation, PyJWT (Debian python3-jwt): tokens PyJWT signs (RS256,
// ES256) verify here, and tokens the test issuer signs verify in PyJWT.
func TestPyJWTInterop(t *testing.T) {
	py := realclient.Python(t, realclient.DebianPython, "jwt", "cryptography")
	is := authtest.NewIssuer(t, "https://issuer.example", 0)
	dir := t.TempDir()
	rsaKey := filepath.Join(dir, "rsa.pem")
	ecKey := filepath.Join(dir, "ec.pem")
	os.WriteFile(rsaKey, authtest.KeyPEM(t, is.RSA), 0o600)
	os.WriteFile(ecKey, authtest.KeyPEM(t, is.EC), 0o600)
	v, err := New(&Config{Issuers: []Issuer{{Issuer: is.URL, JWKSFile: is.WriteJWKS(t, dir, "jwks.json")}}, Audiences: []string{"https://cache.example"}})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()

	script := `
import jwt, sys, time
alg, keyfile, kid, iss = sys.argv[1:5]
now = int(time.time())
claims = {"iss": iss, "sub": "pyjwt-user", "aud": "https://cache.example", "iat": now, "nbf": now,
          "exp": now + 600, "scope": "storage.read:/store/mc", "wlcg.ver": "1.0", "wlcg.groups": ["/cms"]}
print(jwt.encode(claims, open(keyfile).read(), algorithm=alg, headers={"kid": kid}))
`
	for _, tc := range []struct{ alg, key, kid string }{{"RS256", rsaKey, is.RSAKid}, {"ES256", ecKey, is.ECKid}} {
		r := realclient.Run(t, realclient.Env(), py, "-c", script, tc.alg, tc.key, tc.kid, is.URL)
		if r.Err != nil {
			t.Fatalf("PyJWT: %s", r)
		}
		c, err := v.Verify(context.Background(), strings.TrimSpace(string(r.Stdout)))
		if err != nil {
			t.Fatalf("%s token from PyJWT: %v", tc.alg, err)
		}
		if c.Subject != "pyjwt-user" || !c.Allows("read", "/store/mc/x") || len(c.Groups) != 1 {
			t.Fatalf("%s claims %+v", tc.alg, c)
		}
	}

	check := `
import jwt, sys
from cryptography.hazmat.primitives.serialization import load_pem_private_key
tok, alg, keyfile = sys.argv[1:4]
pub = load_pem_private_key(open(keyfile, "rb").read(), None).public_key()
c = jwt.decode(tok, pub, algorithms=[alg], audience="https://cache.example")
print(c["sub"], c["scope"])
`
	for _, tc := range []struct{ alg, key string }{{"RS256", rsaKey}, {"ES256", ecKey}} {
		tok := is.Sign(t, tc.alg, authtest.Claims{"sub": "go-user", "aud": "https://cache.example", "scope": "storage.read:/", "exp": time.Now().Add(time.Hour).Unix()})
		r := realclient.Run(t, realclient.Env(), py, "-c", check, tok, tc.alg, tc.key)
		if r.Err != nil || strings.TrimSpace(string(r.Stdout)) != "go-user storage.read:/" {
			t.Fatalf("PyJWT on a %s test token: %s", tc.alg, r)
		}
	}
}
