package security

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/auth/authtest"
	"github.com/hepcache/hepcache/internal/auth/credential"
	"github.com/hepcache/hepcache/internal/auth/token"
	"github.com/hepcache/hepcache/internal/authz"
	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/config"
	xrdfront "github.com/hepcache/hepcache/internal/frontend/xrootd"
	"github.com/hepcache/hepcache/internal/syncbuf"
	"github.com/hepcache/hepcache/internal/tlsconf"
	"github.com/hepcache/hepcache/origin"
	httporigin "github.com/hepcache/hepcache/origin/http"
	"github.com/hepcache/hepcache/origin/posix"
	xrdorigin "github.com/hepcache/hepcache/origin/xrootd"
)

// startTokenOrigin runs a root:// server (hepcache's front end over a
// directory: the C++ xrootd of Debian ships no token validation) that
// requires TLS and a ztn token with a read scope, as a site's storage does.
func startTokenOrigin(t *testing.T, p *pki, files map[string][]byte) (url string, log *syncbuf.Buffer) {
	t.Helper()
	dir := t.TempDir()
	for name, b := range files {
		fp := filepath.Join(dir, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(fp), 0o755)
		if err := os.WriteFile(fp, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o, err := posix.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	be := backend.FromOrigin(o)
	log = &syncbuf.Buffer{}
	logger := slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	sec, err := New(&Config{
		TLS:         &tlsconf.Config{CertFile: p.certFile, KeyFile: p.keyFile},
		RequireTLS:  true,
		RequireAuth: true,
		Tokens:      &token.Config{Issuers: []token.Issuer{{Issuer: p.issuer.URL, JWKSFile: p.jwks}}, Audiences: []string{"https://origin.test"}},
		Rules:       []authz.Rule{{Path: "/", Read: []string{"scope"}}},
		Logger:      logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := xrdfront.New(&xrdfront.Config{Backend: be, Logger: logger, TLS: sec.TLSConfig(), RequireTLS: true,
		Authenticator: sec.XRootDAuthenticator(), Authorizer: sec.XRootDAuthorizer()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close(); sec.Close() })
	return "roots://" + ln.Addr().String(), log
}

// TestCacheOwnTokenTowardsRootOrigin: the cache reads from a roots://
// origin that requires a token with its own token (ztn, file re-read), and
// never with its clients' tokens: the origin only ever sees the cache.
func TestCacheOwnTokenTowardsRootOrigin(t *testing.T) {
	p := newPKI(t)
	s := newStack(t, p, nil)
	originURL, originLog := startTokenOrigin(t, p, map[string][]byte{"/store/mc/f.root": s.data["/store/mc/f.root"]})
	ctx := context.Background()

	tokFile := filepath.Join(t.TempDir(), "robot.token")
	robot := p.issuer.Token(t, "hepcache-robot", "storage.read:/store", "https://origin.test")
	if err := os.WriteFile(tokFile, []byte(robot+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tf, err := credential.NewTokenFile(tokFile)
	if err != nil {
		t.Fatal(err)
	}
	newOrigin := func(tok func() (string, error)) *xrdorigin.Origin {
		o, err := xrdorigin.New(&xrdorigin.Config{URL: originURL, TLS: credential.TLSConfig(nil, poolOf(t, p)), Token: tok})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { o.Close() })
		return o
	}

	// Without a token the origin refuses the cache.
	if _, err := newOrigin(nil).Stat(ctx, "/store/mc/f.root"); !errors.Is(err, origin.ErrNotAuthorized) {
		t.Fatalf("no token: %v", err)
	}
	// A token for another audience is refused too.
	bad := p.issuer.Token(t, "hepcache-robot", "storage.read:/store", testAud)
	if _, err := newOrigin(func() (string, error) { return bad, nil }).Stat(ctx, "/store/mc/f.root"); !errors.Is(err, origin.ErrNotAuthorized) {
		t.Fatalf("token for another audience: %v", err)
	}

	// Through the cache: alice authenticates to the cache with her token;
	// the cache fetches with the robot's.
	s.rec.Origin = newOrigin(tf.Token)
	roots := strings.Replace(s.root, "root://", "roots://", 1)
	got, r := s.xrdcp(t, s.xrdEnv(t, "BEARER_TOKEN="+s.token(t, "storage.read:/store")), roots+"//store/mc/f.root")
	if r.Err != nil || !bytes.Equal(got, s.data["/store/mc/f.root"]) {
		t.Fatalf("xrdcp through the cache from a token origin: %s\norigin log:\n%s", r, originLog)
	}
	ol := originLog.String()
	if !strings.Contains(ol, "hepcache-robot@") {
		t.Fatalf("the origin did not see the cache's identity:\n%s", ol)
	}
	if strings.Contains(ol, "alice") {
		t.Fatalf("the user's identity reached the origin:\n%s", ol)
	}
}

func poolOf(t *testing.T, p *pki) *x509.CertPool {
	t.Helper()
	pool, _, err := tlsconf.LoadCAs(p.caDir)
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

// TestCacheOwnProxyTowardsHTTPSOrigin: the cache's HTTP origin client
// presents its own RFC 3820 proxy (re-read from its file) to an https
// origin that identifies clients by certificate: here hepcache's own
// HTTPS front end, which verifies proxies.
func TestCacheOwnProxyTowardsHTTPSOrigin(t *testing.T) {
	p := newPKI(t)
	robot := p.ca.User(t, "hepcache-robot", 1)
	s := newStack(t, p, func(c *Config) {
		c.Rules = []authz.Rule{{Path: "/", Read: []string{"dn:" + authtest.DN(robot.Cert)}}}
	})
	proxy := robot.Proxy(t, authtest.ProxyOpts{}).WriteProxyFile(t, t.TempDir(), "x509up_robot")
	cc, err := credential.NewClientCert(proxy, proxy)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	o, err := httporigin.New(&httporigin.Config{URL: s.https, TLSConfig: credential.TLSConfig(cc, poolOf(t, p))})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	f, err := o.Open(ctx, "/store/mc/f.root")
	if err != nil {
		t.Fatalf("open with the cache's proxy: %v\n%s", err, s.log)
	}
	b := make([]byte, 1000)
	if _, err := f.ReadAt(ctx, b, 0); err != nil || !bytes.Equal(b, s.data["/store/mc/f.root"][:1000]) {
		t.Fatalf("read with the cache's proxy: %v", err)
	}
	f.Close()
	anon, _ := httporigin.New(&httporigin.Config{URL: s.https, TLSConfig: credential.TLSConfig(nil, poolOf(t, p))})
	defer anon.Close()
	if _, err := anon.Stat(ctx, "/store/mc/f.root"); !errors.Is(err, origin.ErrNotAuthorized) {
		t.Fatalf("without the proxy: %v", err)
	}
}

func TestNewOriginCredentials(t *testing.T) {
	p := newPKI(t)
	dir := t.TempDir()
	tok := filepath.Join(dir, "tok")
	os.WriteFile(tok, []byte("abc\n"), 0o600)
	proxy := p.ca.User(t, "robot", 1).Proxy(t, authtest.ProxyOpts{}).WriteProxyFile(t, dir, "x509up")
	oc, err := NewOriginCredentials(&config.SecurityConfig{OriginTokenFile: tok, OriginCert: proxy, OriginKey: proxy, OriginCAPaths: []string{p.caDir}})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := oc.Token(); got != "abc" || oc.TLS.GetClientCertificate == nil || oc.TLS.RootCAs == nil {
		t.Fatalf("credentials %+v", oc)
	}
	if _, err := NewOriginCredentials(&config.SecurityConfig{OriginTokenFile: filepath.Join(dir, "missing")}); err == nil {
		t.Fatal("missing token file accepted")
	}
}
