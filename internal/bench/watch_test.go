package bench

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hepcache/hepcache/internal/xrdproc"
)

// TestDeadServerEndsRun (issue 34, first week 0): a server that exits
// while a benchmark runs (killed, not stopped) ends the run at once: the
// run's context is cancelled and its error names the server and quotes
// its log, where bench throughput's xrdcp waited out XrdCl's connection
// window against a dead origin and failed 8 minutes later with "[FATAL]
// Connection error". Servers the benchmark stops end nothing.
func TestDeadServerEndsRun(t *testing.T) {
	dir := smokeDir(t)
	files, err := writeLoadFiles(filepath.Join(dir, "origin"), "dead", 1, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"origin", "hepcache"} {
		t.Run(kind, func(t *testing.T) {
			origin, err := xrdproc.StartOrigin(filepath.Join(dir, "origin"))
			if err != nil {
				t.Fatal(err)
			}
			defer origin.Remove()
			w := newWatch(context.Background())
			defer w.close()
			w.xrootd("origin", origin)
			url, pid, name := origin.URL, origin.PID(), "origin (xrootd at "+origin.Addr+")"
			if kind == "hepcache" {
				c, err := startCacheProc("hepcache", hepcacheBin, filepath.Join(dir, "cache-dead"), origin.Addr, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer c.stop()
				w.cache(c)
				url, pid, name = c.url(), c.pid, "hepcache at "+c.addr
			}
			if _, err := xrdcpMode(w.ctx, "read", url, files); err != nil {
				t.Fatalf("read before the %s died: %v", kind, err)
			}
			syscall.Kill(pid, syscall.SIGKILL)
			<-w.ctx.Done() // the watch saw it: the run ends here, not after the clients' timeouts
			_, err = xrdcpMode(w.ctx, "read", url, files)
			err = w.result(err)
			if !errors.Is(err, errServerDied) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "the end of its log") {
				t.Fatalf("the run against a dead %s ended with %v; want it named, with its log", kind, err)
			}
		})
	}
	t.Run("stopped", func(t *testing.T) {
		origin, err := xrdproc.StartOrigin(filepath.Join(dir, "origin"))
		if err != nil {
			t.Fatal(err)
		}
		w := newWatch(context.Background())
		defer w.close()
		w.xrootd("origin", origin)
		c, err := startCacheProc("hepcache", hepcacheBin, filepath.Join(dir, "cache-stopped"), origin.Addr, nil)
		if err != nil {
			t.Fatal(err)
		}
		w.cache(c)
		c.stop()
		origin.Remove()
		select {
		case <-w.ctx.Done():
			t.Fatalf("servers stopped by the benchmark ended the run: %v", context.Cause(w.ctx))
		default:
		}
		if cause := w.result(errors.New("other")); cause.Error() != "other" {
			t.Fatalf("a run's own error replaced by %v", cause)
		}
	})
}
