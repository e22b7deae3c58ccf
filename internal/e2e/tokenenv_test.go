package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hepcache/hepcache/internal/auth/authtest"
	"github.com/hepcache/hepcache/internal/realclient"
)

// tokenEnv is what a test of bearer tokens needs: a CA directory clients
// trust, the server's certificate, a token issuer with its JWKS file, a
// data directory served by a file:// origin, and the environment XrdCl's
// ztn plugin reads the CA from.
type tokenEnv struct {
	dir, caDir, certFile, keyFile, jwks, data, httpAddr string
	ca                                                  *authtest.CA
	is                                                  *authtest.Issuer
	env                                                 []string
}

func newTokenEnv(t *testing.T, caName string) *tokenEnv {
	t.Helper()
	realclient.RequireFile(t, "/usr/lib/x86_64-linux-gnu/libXrdSecztn-5.so")
	te := &tokenEnv{dir: t.TempDir()}
	te.ca = authtest.NewCA(t, caName)
	te.caDir = filepath.Join(te.dir, "certificates")
	authtest.RequireCADir(t, te.caDir, te.ca)
	te.certFile, te.keyFile = te.ca.Host(t, "localhost", "127.0.0.1").WriteFiles(t, te.dir, "hostcert")
	te.is = authtest.NewIssuer(t, "https://issuer.e2e.test", 0)
	te.jwks = te.is.WriteJWKS(t, te.dir, "jwks.json")
	te.data = filepath.Join(te.dir, "data")
	os.MkdirAll(filepath.Join(te.data, "store"), 0o755)
	te.httpAddr = freeAddr(t)
	te.env = realclient.Env("X509_CERT_DIR="+te.caDir, "XDG_RUNTIME_DIR="+t.TempDir())
	return te
}

// config writes a hepcache.toml serving te.data over root:// and HTTP with
// TLS and te's issuer, plus extra security keys (before the rules) and
// sections, and returns its path.
func (te *tokenEnv) config(t *testing.T, security, rules, extra string) string {
	t.Helper()
	cfg := `
[server]
http_listen = "` + te.httpAddr + `"
[cache]
dir = "` + filepath.Join(te.dir, "cache") + `"
[origin]
default = "file://` + te.data + `"
[security]
tls_cert = "` + te.certFile + `"
tls_key = "` + te.keyFile + `"
audiences = ["https://cache.e2e.test"]
` + security + `
[[security.issuer]]
issuer = "` + te.is.URL + `"
jwks_file = "` + te.jwks + `"
` + rules + extra
	p := filepath.Join(te.dir, "hepcache.toml")
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
