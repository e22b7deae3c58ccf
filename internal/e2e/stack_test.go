// Package e2e tests hepcache end to end: a real C++ xrootd origin, the
// hepcache server, and the real XRootD clients (xrdcp, xrdfs, the Python
// bindings, uproot, the XrdClProxyPlugin) on loopback.
package e2e

import (
	"context"
	"crypto/sha256"
	"fmt"
	"github.com/hepcache/hepcache/internal/eventually"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/server"
	"github.com/hepcache/hepcache/internal/wan"
	"github.com/hepcache/hepcache/internal/xrdtest"
)

// stack is an origin, a byte-counting link in front of it, and a cache.
type stack struct {
	tb      testing.TB
	dataDir string
	origin  *xrdtest.Server
	link    *wan.Proxy // counts the bytes the origin sends
	srv     *server.Server
	cfg     *config.Config
	// url is the cache's root:// URL ("root://127.0.0.1:port").
	url string
}

// startStack starts a C++ xrootd over dataDir, a zero-delay link that counts
// bytes, and a hepcache using it as default origin. mut adjusts the config.
func startStack(tb testing.TB, dataDir string, mut func(*config.Config)) *stack {
	tb.Helper()
	return startStackRTT(tb, dataDir, 0, mut)
}

// startStackRTT is startStack with a link that adds rtt (a user-space
// delay line: a far origin).
func startStackRTT(tb testing.TB, dataDir string, rtt time.Duration, mut func(*config.Config)) *stack {
	tb.Helper()
	return startStackLink(tb, dataDir, wan.Config{RTT: rtt}, mut)
}

// startStackLink is startStack with the link lc (its Target is set here).
func startStackLink(tb testing.TB, dataDir string, lc wan.Config, mut func(*config.Config)) *stack {
	tb.Helper()
	realclient.Require(tb, "xrdcp")
	o := xrdtest.StartOrigin(tb, dataDir)
	lc.Target = o.Addr
	link, err := wan.New(&lc)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { link.Close() })
	cfg := config.Default()
	cfg.Server.Listen = "127.0.0.1:0"
	cfg.Cache.Dir = tb.TempDir()
	cfg.Origin.Default = "root://" + link.Addr().String()
	if mut != nil {
		mut(cfg)
	}
	srv, err := server.New(cfg, slog.New(slog.NewTextHandler(testWriter{tb}, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return &stack{tb: tb, dataDir: dataDir, origin: o, link: link, srv: srv, cfg: cfg, url: "root://" + srv.RootAddr().String()}
}

// originBytes is how many bytes the origin has sent so far, once the cache
// has finished with every file (the close and checksum exchanges with the
// origin that follow a client's close are part of that file's cold read).
func (s *stack) originBytes() int64 {
	eventually.True(s.tb, func() bool { return s.srv.Cache().Stats().OpenFiles.Load() == 0 }, "the cache to close every file")
	// The origin's answers to the closes come just after.
	return s.link.Quiet(500 * time.Millisecond)
}

type testWriter struct{ tb testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.tb.Logf("%s", p)
	return len(p), nil
}

// writeFile writes size seeded random bytes to dir/name and returns their
// sha256.
func writeFile(tb testing.TB, dir, name string, size int, seed uint64) [32]byte {
	tb.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tb.Fatal(err)
	}
	b := make([]byte, size)
	r := rand.New(rand.NewPCG(seed, 99))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		tb.Fatal(err)
	}
	return sha256.Sum256(b)
}

// xrdcpSum copies url to stdout with the real xrdcp and returns the sha256.
func xrdcpSum(tb testing.TB, env []string, url string) [32]byte {
	tb.Helper()
	r := realclient.MustRun(tb, env, "xrdcp", "-s", "-f", url, "-")
	return sha256.Sum256(r.Stdout)
}

func hex(s [32]byte) string { return fmt.Sprintf("%x", s[:8]) }

// cacheInspect returns the origins that hold p in the cache directory.
func cacheInspect(dir, p string) ([]string, error) {
	infos, err := cache.Inspect(dir, "", p)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, in := range infos {
		out = append(out, in.Origin)
	}
	return out, nil
}
