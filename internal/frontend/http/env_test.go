package httpfront

import (
	"bytes"
	"context"
	"fmt"
	"github.com/hepcache/hepcache/internal/cachemetrics"
	"github.com/hepcache/hepcache/internal/realclient"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/metrics"
	"github.com/hepcache/hepcache/origin"
)

// env is a real cache behind a running front end on loopback.
type env struct {
	url   string
	srv   *Server
	cache *cache.Cache
	reg   *metrics.Registry
	mem   *origin.Mem
	// orig is the origin behind the cache (mem unless replaced).
	orig origin.Origin
}

type envOpts struct {
	origin  origin.Origin // default: a fresh origin.Mem
	backend func(backend.Backend) backend.Backend
	server  func(*Config)
	cache   func(*cache.Config)
	listen  func(net.Listener) net.Listener // wraps the listener (nil: as it is)
}

func newEnv(tb testing.TB, o envOpts) *env {
	tb.Helper()
	e := &env{mem: origin.NewMem("mem://origin")}
	e.orig = e.mem
	if o.origin != nil {
		e.orig = o.origin
	}
	quiet := slog.New(slog.DiscardHandler)
	var err error
	dir := tb.TempDir()
	if e.reg, err = metrics.New(&metrics.Config{CacheDir: dir, Logger: quiet}); err != nil {
		tb.Fatal(err)
	}
	cc := cache.DefaultConfig()
	cc.Dir = dir
	cc.Capacity = 1 << 30
	cc.Logger = quiet
	cc.VerifyChecksum = "none"
	cc.Origins = e.reg.WrapResolver(origin.ResolverFunc(func(ctx context.Context, u string) (origin.Origin, error) {
		if u != "" {
			return nil, fmt.Errorf("forwarding to %s is off in this test: %w", u, backend.ErrForbidden)
		}
		return e.orig, nil
	}))
	if o.cache != nil {
		o.cache(cc)
	}
	if e.cache, err = cache.New(cc); err != nil {
		tb.Fatal(err)
	}
	e.reg.SetCache(cachemetrics.Source(e.cache))
	var be backend.Backend = e.cache
	if o.backend != nil {
		be = o.backend(be)
	}
	cfg := &Config{Backend: be, Metrics: e.reg, Logger: quiet,
		Routes: map[string]http.Handler{"/metrics": e.reg.Handler(), "/health": e.reg.HealthHandler()}}
	if o.server != nil {
		o.server(cfg)
	}
	if e.srv, err = New(cfg); err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	scheme := "http"
	if cfg.TLSConfig != nil {
		scheme = "https"
	}
	e.url = scheme + "://" + ln.Addr().String()
	if o.listen != nil {
		ln = o.listen(ln)
	}
	served := make(chan error, 1)
	go func() { served <- e.srv.Serve(ln) }()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		e.srv.Shutdown(ctx)
		if err := <-served; err != http.ErrServerClosed {
			tb.Errorf("Serve returned %v", err)
		}
		e.cache.Close()
	})
	return e
}

// put stores a random file of n bytes at the origin and returns its bytes.
func (e *env) put(p string, n int, seed uint64) []byte {
	b := randomBytes(n, seed)
	e.mem.Put(p, b, time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC))
	return b
}

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed+1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// requireTool returns the path of a real client, failing the test in CI
// and skipping it elsewhere when it is missing.
func requireTool(tb testing.TB, name string) string {
	tb.Helper()
	return realclient.Require(tb, name)
}

// run runs a real client with a clean environment and a time limit.
func run(tb testing.TB, env []string, name string, args ...string) (string, error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + tb.TempDir(), "LANG=C.UTF-8"}, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// metric returns one series' value from /metrics.
func (e *env) metric(tb testing.TB, series string) string {
	tb.Helper()
	resp, err := http.Get(e.url + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	for _, l := range strings.Split(b.String(), "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			return v
		}
	}
	return ""
}
