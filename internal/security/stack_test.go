package security

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/auth/authtest"
	"github.com/hepcache/hepcache/internal/auth/token"
	"github.com/hepcache/hepcache/internal/authz"
	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/cache"
	httpfront "github.com/hepcache/hepcache/internal/frontend/http"
	xrdfront "github.com/hepcache/hepcache/internal/frontend/xrootd"
	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/syncbuf"
	"github.com/hepcache/hepcache/internal/tlsconf"
	"github.com/hepcache/hepcache/origin"
)

const testAud = "https://hepcache.test"

// pki is the test's credentials, made at test time.
type pki struct {
	ca, rogue *authtest.CA
	issuer    *authtest.Issuer
	dir       string // temporary directory holding the files below
	caDir     string // X509_CERT_DIR with hashed names
	caFile    string
	certFile  string
	keyFile   string
	jwks      string
	vomsdir   string
	voms      *authtest.VOMSServer
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir()}
	p.ca = authtest.NewCA(t, "hepcache Test CA")
	p.rogue = authtest.NewCA(t, "Rogue CA")
	p.caDir = filepath.Join(p.dir, "certificates")
	authtest.RequireCADir(t, p.caDir, p.ca)
	p.caFile = filepath.Join(p.caDir, "caa.pem")
	p.certFile, p.keyFile = p.ca.Host(t, "localhost", "127.0.0.1").WriteFiles(t, p.dir, "hostcert")
	p.issuer = authtest.NewIssuer(t, "https://issuer.hepcache.test", 0)
	p.jwks = p.issuer.WriteJWKS(t, p.dir, "jwks.json")
	p.vomsdir = filepath.Join(p.dir, "vomsdir")
	p.voms = p.ca.VOMSServer(t, "cms", "voms.cms.test", 2)
	p.voms.WriteLSC(t, p.vomsdir)
	return p
}

// stack is hepcache's two front ends over one cache over an in-memory
// origin, with a security layer, on loopback.
type stack struct {
	pki      *pki
	sec      *Security
	mem      *origin.Mem
	cache    *cache.Cache
	rec      *recOrigin // the origin as the cache sees it: records paths
	cacheDir string
	root     string // root://127.0.0.1:port (roots:// on the same port)
	https    string // https://127.0.0.1:port
	log      *syncbuf.Buffer
	data     map[string][]byte
}

// defaultRules: nothing outside /public and /store; /public readable by
// all, downloads by authenticated clients only; /store for tokens with a
// read scope and CMS members, downloads for tokens and the CMS production
// role.
var defaultRules = []authz.Rule{
	{Path: "/", Read: []string{"none"}},
	{Path: "/public", Read: []string{"anonymous"}, Fetch: []string{"authenticated"}},
	{Path: "/store", Read: []string{"scope", "vo:cms"}, Fetch: []string{"scope", "fqan:/cms/Role=production"}},
}

// newStack options: a func(*xrdfront.Config, *httpfront.Config) adjusts
// the front ends (limits, timeouts), a func(*cache.Config) the cache.
func newStack(t *testing.T, p *pki, mut func(*Config), opts ...any) *stack {
	t.Helper()
	s := &stack{pki: p, mem: origin.NewMem("mem://origin"), log: &syncbuf.Buffer{}, data: map[string][]byte{}}
	s.rec = &recOrigin{Origin: s.mem}
	logger := slog.New(slog.NewTextHandler(s.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	for i, name := range []string{"/public/a.root", "/public/b.root", "/store/mc/f.root", "/store/mc/g.root", "/store/data/h.root"} {
		b := make([]byte, 300<<10+i*4097)
		r := rand.New(rand.NewPCG(uint64(i), 7))
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		s.mem.Put(name, b, time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
		s.data[name] = b
	}
	cfg := &Config{
		TLS:     &tlsconf.Config{CertFile: p.certFile, KeyFile: p.keyFile},
		Tokens:  &token.Config{Issuers: []token.Issuer{{Issuer: p.issuer.URL, JWKSFile: p.jwks}}, Audiences: []string{testAud}},
		CAPaths: []string{p.caDir},
		VOMSDir: p.vomsdir,
		Rules:   defaultRules,
		Logger:  logger,
	}
	if mut != nil {
		mut(cfg)
	}
	var err error
	if s.sec, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.sec.Close() })

	cc := cache.DefaultConfig()
	s.cacheDir = filepath.Join(t.TempDir(), "cache")
	cc.Dir = s.cacheDir
	cc.Logger = logger
	cc.VerifyChecksum = "none"
	cc.Prefetch = -1
	for _, o := range opts {
		if f, ok := o.(func(*cache.Config)); ok {
			f(cc)
		}
	}
	cc.Origins = origin.ResolverFunc(func(ctx context.Context, u string) (origin.Origin, error) {
		if u != "" {
			return nil, fmt.Errorf("forwarding to %s is not on the forward-allow list: %w", u, backend.ErrForbidden)
		}
		return s.rec, nil
	})
	if s.cache, err = cache.New(cc); err != nil {
		t.Fatal(err)
	}

	xc := &xrdfront.Config{
		Backend: s.cache, Logger: logger,
		Authenticator: s.sec.XRootDAuthenticator(), Authorizer: s.sec.XRootDAuthorizer(),
		TLS: s.sec.TLSConfig(), RequireTLS: s.sec.RequireTLS(),
		HandshakeTimeout: 10 * time.Second,
	}
	hc := &httpfront.Config{Backend: s.cache, Logger: logger, Authorizer: s.sec.HTTPAuthorizer(), TLSConfig: s.sec.TLSConfig()}
	for _, o := range opts {
		if f, ok := o.(func(*xrdfront.Config, *httpfront.Config)); ok {
			f(xc, hc)
		}
	}
	xs, err := xrdfront.New(xc)
	if err != nil {
		t.Fatal(err)
	}
	xl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.root = "root://" + xl.Addr().String()
	go xs.Serve(xl)

	hs, err := httpfront.New(hc)
	if err != nil {
		t.Fatal(err)
	}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.https = "https://" + hl.Addr().String()
	go hs.Serve(hl)
	t.Cleanup(func() {
		xs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
		s.cache.Close()
	})
	return s
}

// xrdEnv is the environment of a real XrdCl client trusting the test CA,
// with no token unless given ("BEARER_TOKEN=..."). XDG_RUNTIME_DIR points
// at an empty directory so that no token file of the machine is found.
func (s *stack) xrdEnv(t *testing.T, extra ...string) []string {
	env := realclient.Env(append([]string{"X509_CERT_DIR=" + s.pki.caDir, "XDG_RUNTIME_DIR=" + t.TempDir(), "XRD_REQUESTTIMEOUT=30"}, extra...)...)
	var out []string
	for _, kv := range env {
		if strings.HasPrefix(kv, "BEARER_TOKEN_FILE=") && !containsPrefix(extra, "BEARER_TOKEN_FILE=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func containsPrefix(list []string, p string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// xrdcp copies url to a file and returns its bytes and the run's result.
func (s *stack) xrdcp(t *testing.T, env []string, url string) ([]byte, realclient.Result) {
	t.Helper()
	realclient.Require(t, "xrdcp")
	realclient.RequireFile(t, "/usr/lib/x86_64-linux-gnu/libXrdSecztn-5.so")
	dst := filepath.Join(t.TempDir(), "out")
	r := realclient.Run(t, env, "xrdcp", "-f", "-N", url, dst)
	if r.Err != nil {
		return nil, r
	}
	b, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	return b, r
}

// curl runs curl against the HTTPS front end and returns the status code
// and body.
func (s *stack) curl(t *testing.T, path string, args ...string) (int, string) {
	t.Helper()
	realclient.Require(t, "curl")
	out := filepath.Join(t.TempDir(), "body")
	all := append([]string{"-sS", "--cacert", s.pki.caFile, "-o", out, "-w", "%{http_code}"}, args...)
	all = append(all, s.https+path)
	r := realclient.Run(t, realclient.Env(), "curl", all...)
	body, _ := os.ReadFile(out)
	var code int
	fmt.Sscan(string(r.Stdout), &code)
	if code == 0 {
		t.Fatalf("curl failed: %s", r)
	}
	return code, string(body)
}

func (s *stack) token(t *testing.T, scope string) string {
	return s.pki.issuer.Token(t, "alice", scope, testAud)
}

// getDirect reads a file through the HTTPS front end with Go's client and
// a token, to fill the cache.
func (s *stack) fill(t *testing.T, path string) {
	t.Helper()
	code, body := s.curl(t, path, "-H", "Authorization: Bearer "+s.token(t, "storage.read:/"))
	if code != http.StatusOK || body != string(s.data[path]) {
		t.Fatalf("fill %s: %d %.200s", path, code, body)
	}
}

// recOrigin records every path the cache asks the origin about.
type recOrigin struct {
	origin.Origin

	// mu protects paths.
	mu    sync.Mutex
	paths []string
}

func (r *recOrigin) note(p string) {
	r.mu.Lock()
	r.paths = append(r.paths, p)
	r.mu.Unlock()
}

// Paths returns the paths asked for so far.
func (r *recOrigin) Paths() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.paths...)
}

func (r *recOrigin) Stat(ctx context.Context, p string) (origin.FileInfo, error) {
	r.note(p)
	return r.Origin.Stat(ctx, p)
}

func (r *recOrigin) Open(ctx context.Context, p string) (origin.File, error) {
	r.note(p)
	return r.Origin.Open(ctx, p)
}

func (r *recOrigin) List(ctx context.Context, p string, withStat bool) ([]origin.FileInfo, error) {
	r.note(p)
	return r.Origin.List(ctx, p, withStat)
}

func (r *recOrigin) Checksum(ctx context.Context, p, algo string) (string, error) {
	r.note(p)
	return r.Origin.Checksum(ctx, p, algo)
}
