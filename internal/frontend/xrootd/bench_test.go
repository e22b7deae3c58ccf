package xrootd

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/xrdtest"
)

// BenchmarkHotRead compares hot reads through this front end (over a Dir
// backend) with a real C++ xrootd serving the same files, in the same run:
// one xrdcp of a large file, and 16 xrdcp in parallel, with pgread (the
// xrdcp default) and with plain reads. Each iteration runs both servers,
// alternating which goes first, and the benchmark reports the ratio of
// their times (hep/cpp below 1 means hepcache is faster) and both rates.
//
//	go test -run XXX -bench HotRead -benchtime 5x ./internal/frontend/xrootd/
//
// HEPCACHE_BENCH_MB sets the large file's size (default 1024).
func BenchmarkHotRead(b *testing.B) {
	xrdcp := realclient.Require(b, "xrdcp")
	size := 1024
	if v, err := strconv.Atoi(os.Getenv("HEPCACHE_BENCH_MB")); err == nil && v > 0 {
		size = v
	}
	dir := b.TempDir()
	writeFast(b, filepath.Join(dir, "big"), size<<20)
	for i := 0; i < 16; i++ {
		writeFast(b, filepath.Join(dir, fmt.Sprintf("p%02d", i)), size<<20/16)
	}
	cpp := xrdtest.StartOrigin(b, dir)
	hep := startServer(b, dir, nil)
	servers := []struct{ name, url string }{{"cpp", cpp.URL}, {"hep", hep.url}}

	cases := []struct {
		name string
		env  []string
		par  bool
	}{
		{"single-pgread", nil, false},
		{"par16-pgread", nil, true},
		{"single-read", []string{"XRD_CPUSEPGWRTRD=0"}, false},
		{"par16-read", []string{"XRD_CPUSEPGWRTRD=0"}, true},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			env := realclient.Env(c.env...)
			copyAll := func(url string) {
				if !c.par {
					realclient.MustRun(b, env, xrdcp, "-f", "-s", url+"//big", "/dev/null")
					return
				}
				var wg sync.WaitGroup
				for i := 0; i < 16; i++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						realclient.MustRun(b, env, xrdcp, "-f", "-s", fmt.Sprintf("%s//p%02d", url, i), "/dev/null")
					}()
				}
				wg.Wait()
			}
			for _, s := range servers {
				copyAll(s.url) // warm the page cache and the clients
			}
			var took [2]time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for k := range servers {
					k = (k + i) % 2
					start := time.Now()
					copyAll(servers[k].url)
					took[k] += time.Since(start)
				}
			}
			mb := float64(size) * float64(b.N)
			b.ReportMetric(took[1].Seconds()/took[0].Seconds(), "hep/cpp")
			b.ReportMetric(mb/took[0].Seconds(), "cpp-MB/s")
			b.ReportMetric(mb/took[1].Seconds(), "hep-MB/s")
		})
	}
}

// writeFast writes n pseudo-random bytes (incompressible, quick to make).
func writeFast(tb testing.TB, p string, n int) {
	tb.Helper()
	f, err := os.Create(p)
	if err != nil {
		tb.Fatal(err)
	}
	r := rand.NewChaCha8([32]byte{1})
	buf := make([]byte, 1<<20)
	for n > 0 {
		k := min(n, len(buf))
		r.Read(buf[:k])
		if _, err := f.Write(buf[:k]); err != nil {
			tb.Fatal(err)
		}
		n -= k
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
}
