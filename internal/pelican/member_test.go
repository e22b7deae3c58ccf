package pelican

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/auth/authtest"
	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/internal/pelicantest"
	"github.com/hepcache/hepcache/internal/syncbuf"
)

// cacheWeb is the cache's https server for the director's calls: the
// member's routes and metrics, and the director's test objects (which
// the real server reads through the cache from the director).
func cacheWeb(t *testing.T, fed *pelicantest.Federation, m func() *Member) string {
	t.Helper()
	host := fed.CA.Host(t, "127.0.0.1", "localhost")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := m().Routes()[r.URL.Path]; h != nil {
			h.ServeHTTP(w, r)
			return
		}
		if r.URL.Path == MetricsPath {
			m().MetricsHandler(nil).ServeHTTP(w, r)
			return
		}
		if strings.HasPrefix(r.URL.Path, "/pelican/monitoring/") {
			io.WriteString(w, pelicantest.DirectorTestBody+"\n")
			return
		}
		http.NotFound(w, r)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{*host.TLS()}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL
}

type memberEnv struct {
	fed  *pelicantest.Federation
	m    *Member
	logs *syncbuf.Buffer
	dir  string
}

// newMember starts a member of fed (a double with opts), its web API
// served over https, with cfg mutated by mut.
func newMember(t *testing.T, opts pelicantest.Options, mut func(*Config)) *memberEnv {
	t.Helper()
	e := &memberEnv{fed: pelicantest.Start(t, opts), logs: &syncbuf.Buffer{}, dir: t.TempDir()}
	url := cacheWeb(t, e.fed, func() *Member { return e.m })
	cfg := &Config{
		Federation: e.fed.URL, Site: "hepcache-test", KeyFile: filepath.Join(e.dir, "key", "issuer.pem"),
		StateDir: filepath.Join(e.dir, "state"), DataURL: url, RootCAs: e.fed.Pool(),
		AdvertiseInterval: 200 * time.Millisecond, AdLifetime: time.Minute, RegisterRetry: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Load:   func() (int64, int64) { return 42, 1 },
	}
	if mut != nil {
		mut(cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.m = m
	t.Cleanup(func() { m.Close() })
	return e
}

func (e *memberEnv) waitState(t *testing.T, state string) {
	t.Helper()
	eventually.True(t, func() bool { return e.m.Status().State == state }, "state %q (now %+v)", state, e.m.Status())
}

// TestJoin: a cache registers (the key-sign challenge verifies), is
// approved at once, advertises with a token and an ad the double finds
// right in every field, gets a federation token, knows the namespaces and
// answers the director's test and scrape.
func TestJoin(t *testing.T) {
	e := newMember(t, pelicantest.Options{}, nil)
	e.m.Start()
	e.waitState(t, StateAdvertising)
	if errs := e.fed.Errors(); len(errs) > 0 {
		t.Fatalf("the double found differences from Pelican:\n%s", strings.Join(errs, "\n"))
	}
	reg := e.fed.Registration("/caches/hepcache-test")
	if reg == nil || reg.Site != "hepcache-test" || len(reg.ServerID) != 7 {
		t.Fatalf("registration %+v", reg)
	}
	ad := e.fed.Ads()[0]
	if ad.Body["registry-prefix"] != "/caches/hepcache-test" || ad.Body["name"] != "hepcache-test" || ad.Body["serverId"] != reg.ServerID || ad.TokenLifetime != time.Minute {
		t.Fatalf("ad %v, token lifetime %v", ad.Body, ad.TokenLifetime)
	}
	if ns, _ := ad.Body["namespaces"].([]any); len(ns) != 3 {
		t.Fatalf("ad namespaces %v; want the director's three", ad.Body["namespaces"])
	}
	eventually.True(t, func() bool { return e.fed.FedTokens() > 0 && !e.m.Status().FedTokenExpiry.IsZero() }, "a federation token")
	st := e.m.Status()
	if st.Namespaces != 3 || st.Director != e.fed.URL || st.KeyID != e.m.key.KID() {
		t.Fatalf("status %+v", st)
	}
	// The origin reads carry the federation token.
	req, _ := http.NewRequest("GET", e.m.OriginURL()+"/private/secret.txt", nil)
	e.m.Authorize(req)
	if !strings.HasPrefix(req.Header.Get("Authorization"), "Bearer ") || e.m.OriginURL() != e.fed.URL+"/api/v1.0/director/origin" {
		t.Fatalf("origin request %s with Authorization %t", req.URL, req.Header.Get("Authorization") != "")
	}
	// The director's test cycle and its eviction of the test object.
	ctx := context.Background()
	p, status, err := e.fed.DirectorTest(ctx)
	if err != nil || status != "ok" {
		t.Fatalf("director test: %s, %v", status, err)
	}
	if st := e.m.Status(); st.DirectorTest != "ok" || e.m.Stats().DirectorTestOK.Load() != 1 {
		t.Fatalf("director test recorded as %q", st.DirectorTest)
	}
	if err := e.fed.EvictTestFile(ctx, p); err != nil {
		t.Fatal(err)
	}
	if n, err := e.fed.Scrape(ctx); err != nil || n != 42 {
		t.Fatalf("scrape: %d, %v", n, err)
	}
	// A report without the federation's token, or with another issuer's,
	// is refused.
	web := strings.TrimRight(ad.Body["web-url"].(string), "/")
	cl := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: e.fed.Pool()}}}
	for _, tok := range []string{"", e.fed.Token("mallory", "pelican.director_test_report", web)} {
		req, _ := http.NewRequest("POST", web+DirectorTestPath, strings.NewReader(`{"status":"error","message":"forged"}`))
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || e.m.Status().DirectorTest != "ok" {
			t.Fatalf("a forged report: %d, recorded %q", resp.StatusCode, e.m.Status().DirectorTest)
		}
	}
	if errs := e.fed.Errors(); len(errs) > 0 {
		t.Fatalf("the double found differences from Pelican:\n%s", strings.Join(errs, "\n"))
	}
}

// TestPendingApproval: with RequireCacheApproval the cache registers,
// says clearly that it waits, sends no ad, and advertises once approved,
// without a restart and at once: the registry is asked again every
// RegisterRetry, not every advertisement interval (an hour here: the old
// code waited for it, and the test timed out).
func TestPendingApproval(t *testing.T) {
	e := newMember(t, pelicantest.Options{RequireCacheApproval: true}, func(c *Config) { c.AdvertiseInterval, c.AdLifetime = time.Hour, 3*time.Hour })
	e.m.Start()
	e.waitState(t, StatePending)
	if !strings.Contains(e.logs.String(), "waits for a federation administrator to approve it") {
		t.Fatalf("no clear log line:\n%s", e.logs)
	}
	if len(e.fed.Ads()) != 0 || e.m.Stats().Registrations.Load() != 1 {
		t.Fatalf("%d ads, %d registrations while pending", len(e.fed.Ads()), e.m.Stats().Registrations.Load())
	}
	e.fed.Approve("/caches/hepcache-test")
	e.waitState(t, StateAdvertising)
	if errs := e.fed.Errors(); len(errs) > 0 {
		t.Fatalf("%s", strings.Join(errs, "\n"))
	}
}

// TestDowntime (issue 33 item 5): a downtime kept in the state directory
// (what `hepcache pelican downtime add` writes) is advertised within
// seconds, not at the next interval (an hour here), in Pelican's form (the
// double checks every field), and the director takes the cache out of its
// redirects; removed, it is advertised away and the cache is back. The ad
// names hepcache's version after the Pelican version it implements, and
// the coordinates configured.
func TestDowntime(t *testing.T) {
	e := newMember(t, pelicantest.Options{}, func(c *Config) {
		c.AdvertiseInterval, c.AdLifetime = time.Hour, 3*time.Hour
		c.Coordinates = "46.2330, 6.0557"
	})
	e.m.Start()
	e.waitState(t, StateAdvertising)
	prefix := "/caches/hepcache-test"
	if e.fed.InDowntime(prefix) {
		t.Fatal("in downtime before any was set")
	}
	ad := e.fed.Ads()[0].Body
	coord, _ := ad["coordinate"].(map[string]any)
	if v, _ := ad["version"].(string); !strings.HasPrefix(v, "7.16.0+hepcache.") || coord["Lat"] != 46.233 || coord["Long"] != 6.0557 {
		t.Fatalf("ad version %q, coordinate %v; want 7.16.0+hepcache.<version> and the coordinates", v, coord)
	}
	d, err := AddDowntime(e.m.cfg.StateDir, Downtime{Class: ClassUnscheduled, Severity: SeverityOutage, Description: "disk swap", Start: time.Now()}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	eventually.True(t, func() bool { return e.fed.InDowntime(prefix) }, "the director to take the cache out")
	if n, err := RemoveDowntime(e.m.cfg.StateDir, d.ID[:8]); n != 1 || err != nil {
		t.Fatalf("remove: %d, %v", n, err)
	}
	eventually.True(t, func() bool { return !e.fed.InDowntime(prefix) }, "the director to take the cache back")
	// One that starts later is advertised when it starts.
	if _, err := AddDowntime(e.m.cfg.StateDir, Downtime{Class: ClassScheduled, Severity: SeverityOutage, Description: "later",
		Start: time.Now().Add(3 * time.Second), End: time.Now().Add(time.Hour)}, time.Now()); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, func() bool { return e.fed.InDowntime(prefix) }, "a scheduled downtime to be in force when it starts")
	if errs := e.fed.Errors(); len(errs) > 0 {
		t.Fatalf("the double found differences from Pelican:\n%s", strings.Join(errs, "\n"))
	}
}

// TestRetryAfter: a director that answers 503 or 429 with Retry-After is
// asked again after it, not a whole interval later (an hour here: the
// test would time out).
func TestRetryAfter(t *testing.T) {
	for _, code := range []int{503, 429} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			e := newMember(t, pelicantest.Options{}, func(c *Config) { c.AdvertiseInterval, c.AdLifetime = time.Hour, 3*time.Hour })
			e.fed.FailNext("/api/v1.0/director/registerCache", pelicantest.Failure{Status: code, RetryAfter: "1"})
			e.m.Start()
			e.waitState(t, StateAdvertising)
			if !strings.Contains(e.logs.String(), "retry_after=1s") {
				t.Fatalf("no retry after 1s logged:\n%s", e.logs)
			}
		})
	}
}

// TestRefusedOtherKey: a site registered under another key is refused,
// with the reason, and nothing is advertised.
func TestRefusedOtherKey(t *testing.T) {
	e := newMember(t, pelicantest.Options{}, nil)
	e.m.Start()
	e.waitState(t, StateAdvertising)
	e.m.Close()
	os.Rename(e.m.cfg.KeyFile, e.m.cfg.KeyFile+".old")
	cfg := e.m.cfg
	m2, err := New(&cfg) // a new key at the same path
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	m2.Start()
	eventually.True(t, func() bool { return m2.Status().State == StateRefused }, "refused")
	if r := m2.Status().Reason; !strings.Contains(r, "registered under another key") {
		t.Fatalf("reason %q", r)
	}
}

// TestDirectorGoneAndBack: while the federation is unreachable the member
// says so and keeps trying; when it is back the cache advertises again,
// without a restart.
func TestDirectorGoneAndBack(t *testing.T) {
	e := newMember(t, pelicantest.Options{}, nil)
	e.m.Start()
	e.waitState(t, StateAdvertising)
	e.fed.SetDown(true)
	e.waitState(t, StateUnreachable)
	n := len(e.fed.Ads())
	e.fed.SetDown(false)
	eventually.True(t, func() bool { return len(e.fed.Ads()) > n && e.m.Status().State == StateAdvertising }, "advertising again")
}

// TestFedTokenRenewal: the federation token is renewed at a third of its
// lifetime (3 s here), before it expires.
func TestFedTokenRenewal(t *testing.T) {
	e := newMember(t, pelicantest.Options{FedTokenLifetime: 3 * time.Second}, nil)
	e.m.Start()
	eventually.True(t, func() bool { return e.fed.FedTokens() >= 3 }, "three federation tokens")
	now := time.Unix(1000, 0)
	for _, c := range []struct {
		issued, expiry time.Time
		want           time.Duration
	}{
		{now, now.Add(15 * time.Minute), 5 * time.Minute},
		{now.Add(-4 * time.Minute), now.Add(11 * time.Minute), time.Minute},
		{now.Add(-time.Hour), now.Add(-time.Minute), time.Second},
	} {
		if got := renewIn(c.issued, c.expiry, now); got != c.want {
			t.Errorf("renewIn(%v, %v) = %v; want %v", c.issued.Sub(now), c.expiry.Sub(now), got, c.want)
		}
	}
}

// TestNamespacesSurviveRestart: the namespace list is saved; a member
// started while the director is away has it in force.
func TestNamespacesSurviveRestart(t *testing.T) {
	e := newMember(t, pelicantest.Options{}, nil)
	e.m.Start()
	e.waitState(t, StateAdvertising)
	e.m.Close()
	e.fed.SetDown(true)
	cfg := e.m.cfg
	m2, err := New(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if ns, ok := m2.Authorizer().Lookup("/public/hello.txt"); !ok || !ns.PublicRead {
		t.Fatalf("after a restart without the director: %+v, %v", ns, ok)
	}
	if _, ok := m2.Authorizer().Lookup("/private/secret.txt"); !ok {
		t.Fatal("the private namespace is forgotten")
	}
}

// TestNoSecretsShown: neither the key nor any token appears in the logs,
// the status or the errors of a whole membership, refusals included.
func TestNoSecretsShown(t *testing.T) {
	e := newMember(t, pelicantest.Options{FedTokenLifetime: 3 * time.Second}, nil)
	e.m.Start()
	e.waitState(t, StateAdvertising)
	eventually.True(t, func() bool { return e.fed.FedTokens() >= 2 }, "federation tokens")
	ctx := context.Background()
	e.fed.DirectorTest(ctx)
	e.fed.SetDown(true)
	e.waitState(t, StateUnreachable)
	e.fed.SetDown(false)
	e.m.Close()
	keyPEM, _ := os.ReadFile(e.m.cfg.KeyFile)
	d := e.m.key.priv.D.Bytes()
	secrets := append(e.fed.Tokens(), base64.RawURLEncoding.EncodeToString(d), base64.StdEncoding.EncodeToString(d),
		fmt.Sprintf("%x", d), strings.Split(string(keyPEM), "\n")[1])
	seen := e.logs.String() + fmt.Sprintf("%+v %v %#v", e.m.Status(), e.m.key, e.m.key)
	if len(secrets) < 5 {
		t.Fatalf("only %d secrets to look for", len(secrets))
	}
	for _, s := range secrets {
		for _, part := range strings.Split(s, ".") { // a JWT's header and claims are not secret; its signature is
			if len(part) >= 40 && strings.Contains(seen, part) && !strings.HasPrefix(part, "eyJ") {
				t.Fatalf("a secret (%.12s...) shows in logs or status", part)
			}
		}
	}
}

func TestKeyFile(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "sub", "k.pem")
	k, created, err := LoadOrCreateKey(f)
	if err != nil || !created {
		t.Fatalf("create: %v, %v", created, err)
	}
	if st, _ := os.Stat(f); st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v", st.Mode().Perm())
	}
	k2, created, err := LoadOrCreateKey(f)
	if err != nil || created || k2.KID() != k.KID() {
		t.Fatalf("load: %v %v, kid %s vs %s", created, err, k2.KID(), k.KID())
	}
	os.Chmod(f, 0o644)
	if _, _, err := LoadOrCreateKey(f); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a world-readable key: %v", err)
	}
	// A Pelican issuer key in PKCS#8 and a SEC 1 key are both read; an
	// RSA key is refused.
	os.Chmod(f, 0o600)
	os.WriteFile(f, authtest.KeyPEM(t, authtest.ECKey(t)), 0o600)
	if _, _, err := LoadOrCreateKey(f); err != nil {
		t.Fatalf("an EC key from another tool: %v", err)
	}
	os.WriteFile(f, authtest.KeyPEM(t, authtest.RSAKey(t, 0)), 0o600)
	if _, _, err := LoadOrCreateKey(f); err == nil || !strings.Contains(err.Error(), "P-256") {
		t.Fatalf("an RSA key: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	good := Config{Federation: "https://osg-htc.org", Site: "UCSD_cache", KeyFile: "/k", StateDir: "/s", DataURL: "https://c.example:8443"}
	for name, mut := range map[string]func(*Config){
		"http data URL":       func(c *Config) { c.DataURL = "http://c.example:8443" },
		"data URL with path":  func(c *Config) { c.DataURL = "https://c.example/x" },
		"site with a slash":   func(c *Config) { c.Site = "a/b" },
		"no federation":       func(c *Config) { c.Federation = "" },
		"interval > lifetime": func(c *Config) { c.AdvertiseInterval = 10 * time.Minute },
		"relative namespace":  func(c *Config) { c.Namespaces = []string{"ospool"} },
	} {
		c := good
		mut(&c)
		c.EnsureDefaults()
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	c := good
	c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.WebURL != c.DataURL || len(c.Audiences) != 3 {
		t.Fatalf("defaults: web %q audiences %q", c.WebURL, c.Audiences)
	}
}

// TestRegisterAndInspect: what `hepcache pelican register` and `status`
// do: register by hand (pending, then approved), then read the
// federation's view once the cache advertises.
func TestRegisterAndInspect(t *testing.T) {
	e := newMember(t, pelicantest.Options{RequireCacheApproval: true}, nil)
	ctx := context.Background()
	state, reason, err := e.m.Register(ctx)
	if err != nil || state != StatePending || !strings.Contains(reason, "awaits approval") {
		t.Fatalf("register: %s %q %v", state, reason, err)
	}
	r, err := e.m.Inspect(ctx)
	if err != nil || !r.Registered || !r.KeyMatch || r.Approved || r.Listed {
		t.Fatalf("inspect while pending: %+v %v", r, err)
	}
	e.fed.Approve("/caches/hepcache-test")
	if state, _, err := e.m.Register(ctx); err != nil || state != StateRegistered || e.m.Stats().Registrations.Load() != 1 {
		t.Fatalf("register again: %s %v (%d registrations)", state, err, e.m.Stats().Registrations.Load())
	}
	e.m.Start()
	e.waitState(t, StateAdvertising)
	if _, _, err := e.fed.DirectorTest(ctx); err != nil {
		t.Fatal(err)
	}
	r, err = e.m.Inspect(ctx)
	if err != nil || !r.Listed || r.HealthStatus != "OK" || r.ServerStatus != "ok" || len(r.Namespaces) != 3 {
		t.Fatalf("inspect: %+v %v", r, err)
	}
	if s := r.String(); !strings.Contains(s, "approved:     yes") || !strings.Contains(s, "director test: OK") {
		t.Fatalf("report:\n%s", s)
	}
}

// fakeStager stages instantly (or fails) and remembers what it got.
type fakeStager struct {
	mu   sync.Mutex
	reqs []backend.Request
	fail string
}

func (s *fakeStager) Stage(o backend.Owner, reqs []backend.Request) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, reqs...)
	return "job1", nil
}

func (s *fakeStager) StageStatus(o backend.Owner, id string) (backend.StageJob, error) {
	j := backend.StageJob{ID: id, Total: 1, Counts: map[string]int{backend.StageDone: 1}}
	if s.fail != "" {
		j.Counts = map[string]int{backend.StageFailed: 1}
		j.FirstError = s.fail
	}
	return j, nil
}

func (s *fakeStager) CancelStage(o backend.Owner, id string) error { return nil }

// TestPrestageAndEvictAPI: the Pelican client's prestage and evict calls
// (client/prestage_api.go, client/evict.go): 400 without a path (how the
// client learns the API exists), authorization as a read (prestage) or a
// modify (evict), progress lines the client parses.
func TestPrestageAndEvictAPI(t *testing.T) {
	st := &fakeStager{}
	var evicted []string
	e := newMember(t, pelicantest.Options{}, func(c *Config) {
		c.Stager = st
		c.Evict = func(p string) (int, error) { evicted = append(evicted, p); return 1, nil }
	})
	e.m.Start()
	e.waitState(t, StateAdvertising)
	web := strings.TrimRight(e.fed.Ads()[0].Body["web-url"].(string), "/")
	cl := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: e.fed.Pool()}}}
	call := func(method, u, tok string) (int, string) {
		req, _ := http.NewRequest(method, web+u, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := call("GET", PrestagePath, ""); code != http.StatusBadRequest {
		t.Fatalf("prestage without a path: %d, want 400", code)
	}
	if code, body := call("GET", PrestagePath+"?path=/public/hello.txt", ""); code != 200 || !strings.HasSuffix(body, "success: ok\n") {
		t.Fatalf("prestage of a public object: %d %q", code, body)
	}
	if code, _ := call("GET", PrestagePath+"?path=/private/secret.txt", ""); code != http.StatusForbidden {
		t.Fatalf("prestage of a private object without a token: %d", code)
	}
	read := e.fed.Token("alice", "storage.read:/", e.m.cfg.DataURL)
	if code, body := call("GET", PrestagePath+"?path=/private/secret.txt", read); code != 200 || !strings.Contains(body, "success: ok") {
		t.Fatalf("prestage of a private object with a token: %d %q", code, body)
	}
	if len(st.reqs) != 2 || st.reqs[0].OriginToken != "" || st.reqs[1].OriginToken != read || st.reqs[1].User != "alice@"+e.fed.IssuerURL() {
		t.Fatalf("staged %+v", st.reqs)
	}
	st.fail = "origin says no"
	if code, body := call("GET", PrestagePath+"?path=/public/hello.txt", ""); code != 200 || !strings.Contains(body, "failure: 500(Internal Server Error): origin says no") {
		t.Fatalf("a failed prestage: %d %q", code, body)
	}
	// Evict needs storage.modify, public namespace or not.
	if code, _ := call("GET", EvictPath+"?path=/public/hello.txt", ""); code != http.StatusForbidden {
		t.Fatalf("evict without a token: %d", code)
	}
	if code, _ := call("GET", EvictPath+"?path=/private/secret.txt", read); code != http.StatusForbidden {
		t.Fatalf("evict with a read token: %d", code)
	}
	mod := e.fed.Token("alice", "storage.modify:/", e.m.cfg.DataURL)
	if code, body := call("GET", EvictPath+"?path=/private/secret.txt&immediate=true", mod); code != 200 || !strings.Contains(body, "Evicted 1 objects under /private/secret.txt") {
		t.Fatalf("evict with a modify token: %d %q", code, body)
	}
	if code, _ := call("GET", EvictPath+"?path=/private/../etc/passwd", mod); code != http.StatusBadRequest {
		t.Fatalf("evict of a path with ..: %d", code)
	}
	if len(evicted) != 1 || evicted[0] != "/private/secret.txt" {
		t.Fatalf("evicted %q", evicted)
	}
}

// TestUnknownCANamed (issue 33 item 7): a federation whose CA the cache
// does not trust (any federation with its own CA, until
// security.origin_ca_paths names it) fails with an error that names the
// setting, not only "certificate signed by unknown authority".
func TestUnknownCANamed(t *testing.T) {
	e := newMember(t, pelicantest.Options{}, func(c *Config) { c.RootCAs = nil })
	err := e.m.Discover(context.Background())
	if err == nil || !strings.Contains(err.Error(), "unknown authority") || !strings.Contains(err.Error(), "security.origin_ca_paths") {
		t.Fatalf("discovery of a federation with its own CA: %v; want the setting named", err)
	}
}
