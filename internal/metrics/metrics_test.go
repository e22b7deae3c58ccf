package metrics_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/hepcache/hepcache/internal/cachemetrics"
	. "github.com/hepcache/hepcache/internal/metrics"
	"github.com/hepcache/hepcache/internal/realclient"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/origin"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type env struct {
	reg   *Registry
	cache *cache.Cache
	mem   *origin.Mem
	clk   *clock
	dir   string
}

// newEnv builds a real cache over an instrumented in-memory origin.
func newEnv(tb testing.TB, mut func(*Config)) *env {
	tb.Helper()
	e := &env{mem: origin.NewMem("mem://o"), clk: &clock{t: time.Unix(1700000000, 0)}, dir: tb.TempDir()}
	var err error
	cfg := &Config{CacheDir: e.dir, Now: e.clk.now}
	if mut != nil {
		mut(cfg)
	}
	if e.reg, err = New(cfg); err != nil {
		tb.Fatal(err)
	}
	cc := cache.DefaultConfig()
	cc.Dir = e.dir
	cc.Capacity = 1 << 30
	cc.VerifyChecksum = "none"
	cc.Logger = slog.New(slog.DiscardHandler)
	cc.Origins = e.reg.WrapResolver(origin.ResolverFunc(func(context.Context, string) (origin.Origin, error) { return e.mem, nil }))
	if e.cache, err = cache.New(cc); err != nil {
		tb.Fatal(err)
	}
	e.reg.SetCache(cachemetrics.Source(e.cache))
	tb.Cleanup(func() { e.cache.Close() })
	return e
}

type lazySource struct{ c CacheSource }

func (l *lazySource) CacheFigures() CacheFigures { return l.c.CacheFigures() }

func (e *env) read(tb testing.TB, p string) {
	tb.Helper()
	ctx := context.Background()
	f, err := e.cache.Open(ctx, backend.Request{Path: p, Protocol: "http"})
	e.reg.ObserveRequest("http", "get", err)
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Stream(ctx, 0, f.Info().Size, func([]byte) error { return nil }); err != nil {
		tb.Fatal(err)
	}
}

func scrape(tb testing.TB, r *Registry) string {
	tb.Helper()
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain; version=0.0.4") {
		tb.Fatalf("/metrics: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	return rec.Body.String()
}

// value returns the value of the sample with exactly this name and labels.
func value(tb testing.TB, text, series string) string {
	tb.Helper()
	for _, l := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(l, series+" "); ok {
			return rest
		}
	}
	tb.Fatalf("no series %s in\n%s", series, text)
	return ""
}

func TestCacheCounters(t *testing.T) {
	gib := float64(1 << 30)
	e := newEnv(t, nil)
	e.mem.Put("/f", bytes.Repeat([]byte("x"), 3<<20), time.Unix(1, 0))
	e.read(t, "/f")
	e.read(t, "/f")
	e.read(t, "/nope")
	text := scrape(t, e.reg)
	for series, want := range map[string]string{
		`hepcache_opens_total{result="hit"}`:                                                "1",
		`hepcache_opens_total{result="miss"}`:                                               "1",
		`hepcache_open_errors_total`:                                                        "1",
		`hepcache_requests_total{protocol="http",operation="get",outcome="ok"}`:             "2",
		`hepcache_requests_total{protocol="http",operation="get",outcome="not_found"}`:      "1",
		`hepcache_cache_capacity_bytes`:                                                     fmt.Sprint(1 << 30),
		`hepcache_cache_high_watermark_bytes`:                                               fmt.Sprint(int64(0.95 * gib)),
		`hepcache_origin_request_duration_seconds_count{origin="mem://o",operation="open"}`: "2",
	} {
		if got := value(t, text, series); got != want {
			t.Errorf("%s = %s; want %s", series, got, want)
		}
	}
	// Prefetch may turn part of the first read into hits; the second read
	// is all hits.
	var hit, miss int64
	fmt.Sscan(value(t, text, `hepcache_served_bytes_total{source="hit"}`), &hit)
	fmt.Sscan(value(t, text, `hepcache_served_bytes_total{source="miss"}`), &miss)
	if hit+miss != 6<<20 || hit < 3<<20 {
		t.Errorf("served hit %d + miss %d; want 6 MiB in all, at least 3 MiB hits", hit, miss)
	}
	// The miss fetched at least the file from the origin.
	var fetched int64
	fmt.Sscan(value(t, text, "hepcache_origin_fetched_bytes_total"), &fetched)
	if fetched < 3<<20 {
		t.Errorf("origin fetched %d bytes; want at least %d", fetched, 3<<20)
	}
	// The origin's fetch window: at least its starting size, nothing in
	// flight once the reads are done, a delivery rate and an RTT measured.
	var win, inflight, rate, rtt float64
	fmt.Sscan(value(t, text, `hepcache_fetch_window_bytes{origin="mem://o"}`), &win)
	fmt.Sscan(value(t, text, `hepcache_fetch_window_inflight_bytes{origin="mem://o"}`), &inflight)
	fmt.Sscan(value(t, text, `hepcache_fetch_window_rate_bytes_per_second{origin="mem://o"}`), &rate)
	fmt.Sscan(value(t, text, `hepcache_fetch_window_min_rtt_seconds{origin="mem://o"}`), &rtt)
	if win < 1<<20 || inflight != 0 || rtt <= 0 || rate < 0 {
		t.Errorf("fetch window %g, in flight %g, rate %g B/s, min RTT %g s; want >= 1 MiB, 0, >= 0, > 0", win, inflight, rate, rtt)
	}
	// Not-found is an answer, not an origin error.
	if strings.Contains(text, "hepcache_origin_errors_total{") {
		t.Errorf("origin errors counted for a not-found:\n%s", text)
	}
}

// TestExpositionFormat checks the text with promtool, Prometheus's own
// linter (format, HELP/TYPE, naming conventions), and our own invariants.
func TestExpositionFormat(t *testing.T) {
	e := newEnv(t, nil)
	e.mem.Put("/f", bytes.Repeat([]byte("x"), 1<<20), time.Unix(1, 0))
	e.read(t, "/f")
	cl := e.reg.Clients().Add("root", "127.0.0.1:5555")
	defer e.reg.Clients().Remove(cl)
	e.reg.CounterFunc("hepcache_access_log_dropped_total", "Access records dropped.", func() int64 { return 3 })
	e.mem.Fail(fmt.Errorf("down: %w", origin.ErrUnavailable))
	e.read(t, "/g")
	text := scrape(t, e.reg)

	// Every sample belongs to a family declared before it; counters end in
	// _total; histogram buckets are cumulative.
	types := map[string]string{}
	var lastBucket int64 = -1
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		if f, ok := strings.CutPrefix(l, "# TYPE "); ok {
			name, typ, _ := strings.Cut(f, " ")
			types[name] = typ
			if typ == "counter" && !strings.HasSuffix(name, "_total") {
				t.Errorf("counter %s does not end in _total", name)
			}
			continue
		}
		if strings.HasPrefix(l, "#") {
			continue
		}
		name := l[:strings.IndexAny(l, "{ ")]
		base := name
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suf); ok && types[b] == "histogram" {
				base = b
			}
		}
		if types[base] == "" {
			t.Errorf("sample %q has no TYPE", l)
		}
		if strings.HasSuffix(name, "_bucket") {
			var v int64
			fmt.Sscan(l[strings.LastIndexByte(l, ' ')+1:], &v)
			if strings.Contains(l, `le="0.001"`) {
				lastBucket = -1
			}
			if v < lastBucket {
				t.Errorf("bucket not cumulative: %s", l)
			}
			lastBucket = v
		}
	}
	if got := value(t, text, `hepcache_clients{protocol="root"}`); got != "1" {
		t.Errorf("clients = %s; want 1", got)
	}
	if got := value(t, text, `hepcache_origin_errors_total{origin="mem://o",operation="open"}`); got != "1" {
		t.Errorf("origin open errors = %s; want 1", got)
	}
	if got := value(t, text, "hepcache_access_log_dropped_total"); got != "3" {
		t.Errorf("func counter = %s; want 3", got)
	}

	promtool := realclient.Require(t, "promtool") // Debian prometheus
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check metrics: %v\n%s\n--- exposition:\n%s", err, out, text)
	}
}

func TestHealth(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.HealthWindow = time.Minute })
	get := func() (int, HealthReport) {
		rec := httptest.NewRecorder()
		e.reg.HealthHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/health", nil))
		var rep HealthReport
		if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
			t.Fatalf("health body %q: %v", rec.Body.String(), err)
		}
		if rep.Reasons == nil {
			t.Fatalf("reasons is null in %q", rec.Body.String())
		}
		return rec.Code, rep
	}
	if code, rep := get(); code != 200 || rep.Status != Healthy || len(rep.Reasons) != 0 {
		t.Fatalf("fresh cache: %d %+v; want 200 healthy", code, rep)
	}

	// An origin failure makes the cache degraded for HealthWindow.
	e.mem.Fail(fmt.Errorf("connection refused: %w", origin.ErrUnavailable))
	e.read(t, "/x")
	e.mem.Fail(nil)
	code, rep := get()
	if code != 200 || rep.Status != Degraded || len(rep.Reasons) != 1 || !strings.Contains(rep.Reasons[0], "mem://o") || !strings.Contains(rep.Reasons[0], "connection refused") {
		t.Fatalf("after an origin error: %d %+v; want 200 degraded naming the origin and the error", code, rep)
	}
	e.clk.add(2 * time.Minute)
	if code, rep := get(); code != 200 || rep.Status != Healthy {
		t.Fatalf("after the window: %d %+v; want healthy", code, rep)
	}

	// A cache directory that cannot take a file is down.
	if err := os.RemoveAll(e.dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.dir, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.clk.add(time.Minute) // past the probe interval
	if code, rep := get(); code != 503 || rep.Status != Down || !strings.Contains(strings.Join(rep.Reasons, ";"), "not writable") {
		t.Fatalf("cache dir gone: %d %+v; want 503 down", code, rep)
	}
}

// fakeSource plays a cache over its high watermark with disk errors.
type fakeSource struct{ f CacheFigures }

func (f *fakeSource) CacheFigures() CacheFigures { return f.f }

func TestHealthDegradedDisk(t *testing.T) {
	clk := &clock{t: time.Unix(1700000000, 0)}
	src := &fakeSource{CacheFigures{Total: 100, Used: 50, High: 95, Low: 90}}
	r, err := New(&Config{Cache: src, HealthWindow: time.Minute, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	if rep := r.Health(); rep.Status != Healthy {
		t.Fatalf("%+v; want healthy", rep)
	}
	src.f.Used = 97
	if rep := r.Health(); rep.Status != Degraded || !strings.Contains(rep.Reasons[0], "high watermark") {
		t.Fatalf("above the watermark: %+v; want degraded", rep)
	}
	src.f.Used = 50
	src.f.WriteErrors += 2
	if rep := r.Health(); rep.Status != Degraded || !strings.Contains(rep.Reasons[0], "disk errors") {
		t.Fatalf("after disk errors: %+v; want degraded", rep)
	}
	clk.add(2 * time.Minute)
	if rep := r.Health(); rep.Status != Healthy {
		t.Fatalf("disk errors long ago: %+v; want healthy", rep)
	}
	// A data disk above its own high watermark (issue 34 item 7).
	disk := DiskFigure{Dir: "/data01", Up: true, Total: 1000, Used: 500, High: 320, Low: 300}
	r.SetDisks(func() []DiskFigure { return []DiskFigure{disk} })
	if rep := r.Health(); rep.Status != Degraded || !strings.Contains(rep.Reasons[0], "/data01") || !strings.Contains(rep.Reasons[0], "high watermark") {
		t.Fatalf("a data disk above its high watermark: %+v; want degraded", rep)
	}
	disk.Used = 300
	if rep := r.Health(); rep.Status != Healthy {
		t.Fatalf("a data disk within its watermarks: %+v; want healthy", rep)
	}
}

func TestOutcome(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{nil, "ok"},
		{fmt.Errorf("x: %w", origin.ErrNotFound), "not_found"},
		{fmt.Errorf("x: %w", backend.ErrForbidden), "forbidden"},
		{fmt.Errorf("x: %w", origin.ErrNotAuthorized), "forbidden"},
		{&backend.WaitError{Seconds: 3}, "busy"},
		{fmt.Errorf("x: %w", &backend.RedirectError{URL: "http://n2/x"}), "redirect"},
		{fmt.Errorf("x: %w", origin.ErrUnavailable), "origin_unavailable"},
		{fmt.Errorf("x: %w", backend.ErrInvalidPath), "invalid"},
		{context.Canceled, "canceled"},
		{fmt.Errorf("disk on fire"), "error"},
	}
	for _, c := range cases {
		if got := Outcome(c.err); got != c.want {
			t.Errorf("Outcome(%v) = %s; want %s", c.err, got, c.want)
		}
	}
}

// TestOriginFailuresLoggedPerInterval: a failing origin makes one line
// per OriginLogInterval, the next with the count left out; the first
// success after it one line; answers about files (not found) none.
func TestOriginFailuresLoggedPerInterval(t *testing.T) {
	clk := &clock{t: time.Unix(1700000000, 0)}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	r, err := New(&Config{Now: clk.now, Logger: log, OriginLogInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	m := origin.NewMem("mem://a")
	m.Put("/f", []byte("x"), time.Unix(1, 0))
	o := r.WrapOrigin(m)
	ctx := context.Background()
	lines := func() int { return strings.Count(buf.String(), "\n") }
	o.Stat(ctx, "/missing")
	if lines() != 0 {
		t.Fatalf("a not-found answer was logged:\n%s", &buf)
	}
	m.Fail(fmt.Errorf("connect: %w", origin.ErrUnavailable))
	for i := 0; i < 5; i++ {
		o.Stat(ctx, "/f")
	}
	if lines() != 1 || !strings.Contains(buf.String(), `msg="origin failing" origin=mem://a op=stat`) {
		t.Fatalf("5 failures in an interval:\n%s", &buf)
	}
	clk.add(time.Minute)
	o.Open(ctx, "/f")
	if lines() != 2 || !strings.Contains(buf.String(), "op=open") || !strings.Contains(buf.String(), "failures_not_logged=4") {
		t.Fatalf("a failure an interval later:\n%s", &buf)
	}
	m.Fail(nil)
	o.Stat(ctx, "/f")
	o.Stat(ctx, "/f")
	if lines() != 3 || !strings.Contains(buf.String(), `msg="origin answers again" origin=mem://a`) {
		t.Fatalf("recovery:\n%s", &buf)
	}
}

// TestIdleClientsHaveSamples: hepcache_clients has a 0 sample for each
// protocol a front end serves before any client comes and after the
// last one left (the Grafana panel over it had no data on an idle cache).
func TestIdleClientsHaveSamples(t *testing.T) {
	r, err := New(&Config{})
	if err != nil {
		t.Fatal(err)
	}
	r.Clients().Declare("root", "https")
	text := scrape(t, r)
	for _, p := range []string{"root", "https"} {
		if got := value(t, text, `hepcache_clients{protocol="`+p+`"}`); got != "0" {
			t.Errorf("idle %s clients = %q; want 0", p, got)
		}
	}
	c := r.Clients().Add("roots", "127.0.0.1:1")
	r.Clients().Remove(c)
	if got := value(t, scrape(t, r), `hepcache_clients{protocol="roots"}`); got != "0" {
		t.Errorf("roots clients after the last left = %q; want 0", got)
	}
}

// TestHealthNotesIndexLoading: while the index of cached files loads,
// /health says how far it is, and the status stays what it is.
func TestHealthNotesIndexLoading(t *testing.T) {
	src := &fakeSource{CacheFigures{Total: 100, Used: 50, High: 95, Low: 90,
		Index: IndexFigures{Loading: true, Loaded: 5, Total: 10}}}
	r, err := New(&Config{Cache: src})
	if err != nil {
		t.Fatal(err)
	}
	if rep := r.Health(); rep.Status != Healthy || len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "index loading 5 of 10") {
		t.Fatalf("%+v", rep)
	}
	src.f.Index = IndexFigures{Loading: true, Counting: true, Loaded: 5, Total: 7}
	if rep := r.Health(); len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "index loading 5 of 7 found so far") {
		t.Fatalf("%+v", rep)
	}
	src.f.Index = IndexFigures{Files: 10}
	if rep := r.Health(); rep.Notes != nil {
		t.Fatalf("notes once loaded: %+v", rep)
	}
	var b strings.Builder
	r.WriteTo(&b)
	for _, m := range []string{"hepcache_index_loading 0", "hepcache_index_files 10", "hepcache_index_bytes 0"} {
		if !strings.Contains(b.String(), m+"\n") {
			t.Errorf("no %q in the metrics", m)
		}
	}
}
