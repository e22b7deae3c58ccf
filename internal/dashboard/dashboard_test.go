package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/hepcache/hepcache/internal/cachemetrics"
	"github.com/hepcache/hepcache/internal/realclient"
	"image/png"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/cache"
	httpfront "github.com/hepcache/hepcache/internal/frontend/http"
	"github.com/hepcache/hepcache/internal/metrics"
	"github.com/hepcache/hepcache/origin"
)

type env struct {
	url   string
	dash  *Dashboard
	cache *cache.Cache
	reg   *metrics.Registry
	mem   *origin.Mem
}

// newEnv runs a real cache behind the HTTP front end, with /metrics,
// /dashboard and /api/stats mounted on it.
func newEnv(tb testing.TB) *env { tb.Helper(); return newEnvCapacity(tb, 64<<20) }

// newEnvCapacity is newEnv with space.capacity (0: the file system's).
func newEnvCapacity(tb testing.TB, capacity int64) *env {
	tb.Helper()
	quiet := slog.New(slog.DiscardHandler)
	e := &env{mem: origin.NewMem("mem://origin")}
	dir := tb.TempDir()
	var err error
	if e.reg, err = metrics.New(&metrics.Config{CacheDir: dir, Logger: quiet}); err != nil {
		tb.Fatal(err)
	}
	if e.dash, err = New(&Config{Metrics: e.reg, Interval: time.Hour, Logger: quiet}); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.dash.Close() })
	cc := cache.DefaultConfig()
	cc.Dir = dir
	cc.Capacity = capacity
	cc.Logger = quiet
	cc.VerifyChecksum = "none"
	cc.OnAccess = e.dash.Record
	cc.Origins = e.reg.WrapResolver(origin.ResolverFunc(func(context.Context, string) (origin.Origin, error) { return e.mem, nil }))
	if e.cache, err = cache.New(cc); err != nil {
		tb.Fatal(err)
	}
	e.reg.SetCache(cachemetrics.Source(e.cache))
	routes := AdminRoutes(e.reg, e.dash)
	srv, err := httpfront.New(&httpfront.Config{Backend: e.cache, Metrics: e.reg, Routes: routes, Logger: quiet})
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	e.url = "http://" + ln.Addr().String()
	go srv.Serve(ln)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		e.cache.Close()
	})
	return e
}

func (e *env) get(tb testing.TB, p string, rng string) int {
	tb.Helper()
	req, _ := http.NewRequest("GET", e.url+p, nil)
	if rng != "" {
		req.Header.Set("Range", rng)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return int(n)
}

// traffic reads files through the front end (misses, then hits) and waits
// until every access has been closed and recorded.
func (e *env) traffic(tb testing.TB) {
	tb.Helper()
	r := rand.New(rand.NewPCG(7, 8))
	sizes := map[string]int{"/store/mc/a.root": 3 << 20, "/store/mc/b.root": 1 << 20, "/store/data/c.root": 5 << 19}
	for p, n := range sizes {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		e.mem.Put(p, b, time.Unix(1700000000, 0))
	}
	reads := 0
	for round := 0; round < 3; round++ {
		for p := range sizes {
			e.get(tb, p, "")
			reads++
		}
		e.get(tb, "/store/mc/a.root", "bytes=0-99999")
		reads++
		e.dash.sample()
	}
	// The handler closes its file after the client has the last byte:
	// wait for the access records (a condition, not a time).
	deadline := time.Now().Add(30 * time.Second)
	for {
		e.dash.mu.Lock()
		n := len(e.dash.recent)
		e.dash.mu.Unlock()
		if n == reads && e.cache.Stats().OpenFiles.Load() == 0 {
			break
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%d access records after %d reads", n, reads)
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.dash.sample()
}

// scrape returns /metrics as series -> value.
func (e *env) scrape(tb testing.TB) map[string]string {
	tb.Helper()
	resp, err := http.Get(e.url + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if l == "" || l[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		m[l[:i]] = l[i+1:]
	}
	return m
}

func num(tb testing.TB, s string) int64 {
	tb.Helper()
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		tb.Fatalf("not a number: %q", s)
	}
	return v
}

func TestStatsAPI(t *testing.T) {
	e := newEnv(t)
	e.traffic(t)
	resp, err := http.Get(e.url + "/api/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st Stats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	m := e.scrape(t)
	served := num(t, m[`hepcache_served_bytes_total{source="hit"}`]) + num(t, m[`hepcache_served_bytes_total{source="miss"}`]) + num(t, m[`hepcache_served_bytes_total{source="bypass"}`])
	if st.Now.BytesServed() != served || st.Now.Hits != num(t, m[`hepcache_opens_total{result="hit"}`]) {
		t.Errorf("api now %+v; metrics served %d hits %s", st.Now, served, m[`hepcache_opens_total{result="hit"}`])
	}
	if len(st.Samples) != 5 { // one at New, one per round, one after
		t.Errorf("%d samples; want 5", len(st.Samples))
	}
	if len(st.TopFiles) != 3 || st.TopFiles[0].Path != "/store/mc/a.root" || st.TopFiles[0].Accesses != 6 {
		t.Errorf("top files %+v; want a.root first with 6 accesses", st.TopFiles)
	}
	// ?since returns only newer samples.
	last := st.Samples[len(st.Samples)-1].Time
	resp2, err := http.Get(fmt.Sprintf("%s/api/stats?since=%d", e.url, last.UnixMilli()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	var st2 Stats
	json.NewDecoder(resp2.Body).Decode(&st2)
	if len(st2.Samples) != 0 {
		t.Errorf("since the last sample: %d samples; want none", len(st2.Samples))
	}
}

func TestRing(t *testing.T) {
	reg, _ := metrics.New(&metrics.Config{})
	d, err := New(&Config{Metrics: reg, Interval: time.Hour, Samples: 3, Recent: 2, TopFiles: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for i := 0; i < 5; i++ {
		d.sample()
	}
	for i, p := range []string{"/a", "/b", "/b", "/c"} {
		d.Record(cache.AccessRecord{Path: p, BytesRead: int64(i), Time: time.Unix(int64(i), 0)})
	}
	st := d.Stats(time.Time{})
	if len(st.Samples) != 3 {
		t.Errorf("%d samples; want the ring's 3", len(st.Samples))
	}
	for i := 1; i < len(st.Samples); i++ {
		if st.Samples[i].Time.Before(st.Samples[i-1].Time) {
			t.Errorf("samples out of order")
		}
	}
	// Only the last 2 records are kept: /b (2 bytes) and /c (3 bytes).
	if len(st.TopFiles) != 1 || st.TopFiles[0].Path != "/c" {
		t.Errorf("top files %+v; want /c only", st.TopFiles)
	}
}

// chromium returns the Debian chromium binary, failing in CI when missing.
func chromium(tb testing.TB) string {
	tb.Helper()
	return realclient.Require(tb, "chromium") // Debian chromium
}

// runChromium runs headless Chromium with a fresh profile.
func runChromium(tb testing.TB, bin string, args ...string) []byte {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
		"--user-data-dir=" + tb.TempDir(), "--window-size=1280,1100", "--hide-scrollbars",
		// Let the page's timers and its /api/stats request run.
		"--virtual-time-budget=4000"}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + tb.TempDir(), "LANG=en_US.UTF-8", "TZ=UTC"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		tb.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.Bytes()
}

// artifactDir is where the screenshot is kept: $HEPCACHE_ARTIFACTS, or a
// directory under the system temp dir that outlives the test.
func artifactDir(tb testing.TB) string {
	d := os.Getenv("HEPCACHE_ARTIFACTS")
	if d == "" {
		d = filepath.Join(os.TempDir(), "hepcache-artifacts")
	}
	if err := os.MkdirAll(d, 0o755); err != nil {
		tb.Fatal(err)
	}
	return d
}

// TestDashboardInChromium loads the page in a real headless Chromium and
// checks that it shows the figures /metrics exports, then takes a
// screenshot.
func TestDashboardInChromium(t *testing.T) {
	bin := chromium(t)
	// No capacity: space used is the file system's, far more than cached.
	e := newEnvCapacity(t, 0)
	e.traffic(t)
	m := e.scrape(t)
	dom := string(runChromium(t, bin, "--dump-dom", e.url+"/dashboard"))

	attr := func(id, name string) string {
		t.Helper()
		re := regexp.MustCompile(`<[^>]*\bid="` + regexp.QuoteMeta(id) + `"[^>]*>`)
		tag := re.FindString(dom)
		if tag == "" {
			t.Fatalf("no element #%s in the DOM:\n%s", id, dom)
		}
		v := regexp.MustCompile(`\b` + name + `="([^"]*)"`).FindStringSubmatch(tag)
		if v == nil {
			t.Fatalf("#%s has no %s: %s", id, name, tag)
		}
		return v[1]
	}
	served := num(t, m[`hepcache_served_bytes_total{source="hit"}`]) + num(t, m[`hepcache_served_bytes_total{source="miss"}`]) + num(t, m[`hepcache_served_bytes_total{source="bypass"}`])
	checks := []struct{ id, want string }{
		{"bytes-served-total", fmt.Sprint(served)},
		{"hits-total", m[`hepcache_opens_total{result="hit"}`]},
		{"misses-total", m[`hepcache_opens_total{result="miss"}`]},
		{"partial-total", m[`hepcache_opens_total{result="partial"}`]},
		{"bytes-fetched-total", m["hepcache_origin_fetched_bytes_total"]},
		{"files-total", m["hepcache_cache_files"]},
		{"used-bytes", m["hepcache_cache_file_bytes"]},
		{"line-high", m["hepcache_cache_high_watermark_bytes"]},
		{"line-low", m["hepcache_cache_low_watermark_bytes"]},
	}
	for _, c := range checks {
		if got := attr(c.id, "data-value"); got != c.want {
			t.Errorf("#%s shows %s; /metrics says %s", c.id, got, c.want)
		}
	}
	// Space used is the file system's here, which other processes change.
	if v := attr("space-used-bytes", "data-value"); v == "" || v == attr("used-bytes", "data-value") {
		t.Errorf("#space-used-bytes shows %q beside the cache's %s", v, attr("used-bytes", "data-value"))
	}
	if served == 0 || m[`hepcache_opens_total{result="hit"}`] == "0" {
		t.Fatalf("no traffic recorded: %v", m)
	}
	// The page replaced its inline figures with a fetch of /api/stats.
	if src := regexp.MustCompile(`<body[^>]*data-source="([^"]*)"`).FindStringSubmatch(dom); src == nil || src[1] != "api" {
		t.Errorf("body data-source = %v; want api (the page's /api/stats request failed)", src)
	}
	for _, series := range []string{"hit", "hit-since-start", "out", "in", "used", "cached"} {
		if !strings.Contains(dom, `data-series="`+series+`"`) {
			t.Errorf("chart series %q not drawn", series)
		}
	}
	// The hit-rate chart shows something: one interval with traffic was a
	// polyline of one repeated point, drawn with no length (the issue: the
	// chart empty while the figure says 92.5 %).
	if line := regexp.MustCompile(`<polyline[^>]*data-series="hit-since-start"[^>]*points="([^"]*)"`).FindStringSubmatch(dom); line == nil {
		t.Errorf("no hit rate since start drawn")
	} else if pts := strings.Fields(line[1]); len(pts) < 2 || pts[0] == pts[len(pts)-1] {
		t.Errorf("hit rate since start drawn with no length: %q", line[1])
	}
	if !regexp.MustCompile(`<(circle[^>]*data-series="hit"|polyline[^>]*data-series="hit"[^>]*points="[^" ]+ [^"]*")`).MatchString(dom) {
		t.Errorf("the per-interval hit rate is not visible")
	}
	for _, p := range []string{"/store/mc/a.root", "/store/mc/b.root", "/store/data/c.root"} {
		if !strings.Contains(dom, p) {
			t.Errorf("top files lack %s", p)
		}
	}
	if !strings.Contains(dom, `<span id="status" class="healthy">healthy</span>`) {
		t.Errorf("status badge not healthy")
	}

	shot := filepath.Join(artifactDir(t), "dashboard.png")
	os.Remove(shot)
	runChromium(t, bin, "--screenshot="+shot, e.url+"/dashboard")
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot %s: %v", shot, err)
	}
	colors := map[uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 4 {
		for x := b.Min.X; x < b.Max.X; x += 4 {
			r, g, bl, _ := img.At(x, y).RGBA()
			colors[(r>>8)<<16|(g>>8)<<8|bl>>8] = true
		}
	}
	if b.Dx() < 800 || len(colors) < 20 {
		t.Errorf("screenshot %s looks blank: %dx%d, %d colours", shot, b.Dx(), b.Dy(), len(colors))
	}
	t.Logf("dashboard screenshot: %s", shot)
}
