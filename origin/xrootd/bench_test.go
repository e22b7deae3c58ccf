package xrootd

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/wan"
	"github.com/hepcache/hepcache/internal/xrdtest"
	"github.com/hepcache/hepcache/origin"
)

// BenchmarkColdRead reads one large file from a real C++ xrootd on loopback
// the way the cache fetches it (blocks of 1 MiB, several in flight) and, in
// the same run, times `xrdcp` of the same file, reporting both rates and
// their ratio. Size with HEPCACHE_BENCH_MB (default 256); vary connections
// and blocks in flight with HEPCACHE_BENCH_CONNS and HEPCACHE_BENCH_INFLIGHT
// (comma lists are swept).
//
//	HEPCACHE_BENCH_MB=1024 go test -run XXX -bench ColdRead ./origin/xrootd
func BenchmarkColdRead(b *testing.B) {
	xrdcp := xrdtest.RequireTool(b, "xrdcp")
	mb := envInts("HEPCACHE_BENCH_MB", "256")[0]
	dir := b.TempDir()
	name := filepath.Join(dir, "big.bin")
	f, err := os.Create(name)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.CopyN(f, rand.Reader, int64(mb)<<20); err != nil {
		b.Fatal(err)
	}
	f.Close()
	srv := xrdtest.StartOrigin(b, dir)
	size := int64(mb) << 20
	url := srv.URL
	if rtt := envInts("HEPCACHE_BENCH_RTT_MS", "0"); len(rtt) > 0 && rtt[0] > 0 {
		// Reads go through an emulated WAN link; xrdcp stays direct.
		p, err := wan.New(&wan.Config{Target: srv.Addr, RTT: time.Duration(rtt[0]) * time.Millisecond})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { p.Close() })
		url = "root://" + p.Addr().String()
	}

	var xrdcpCPU time.Duration
	xrdcpTime := func() time.Duration {
		t0 := time.Now()
		cmd := exec.Command(xrdcp, "-f", srv.URL+"//big.bin", "/dev/null")
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("xrdcp: %v\n%s", err, out)
		}
		xrdcpCPU += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		return time.Since(t0)
	}
	xrdcpTime() // warm the page cache and the server

	for _, conns := range envInts("HEPCACHE_BENCH_CONNS", "1,2,4") {
		for _, inflight := range envInts("HEPCACHE_BENCH_INFLIGHT", "4,16") {
			b.Run(fmt.Sprintf("conns=%d/inflight=%d", conns, inflight), func(b *testing.B) {
				var ours, theirs, ourCPU time.Duration
				xrdcpCPU = 0
				for i := 0; i < b.N; i++ {
					c0 := cpuTime()
					d, err := readAll(url, conns, inflight, size)
					if err != nil {
						b.Fatal(err)
					}
					ourCPU += cpuTime() - c0
					ours += d
					theirs += xrdcpTime()
				}
				gib := float64(size) * float64(b.N) / (1 << 30)
				b.ReportMetric(ourCPU.Seconds()/gib, "cpu-s/GiB")
				b.ReportMetric(xrdcpCPU.Seconds()/gib, "xrdcp-cpu-s/GiB")
				b.SetBytes(size)
				mbs := func(d time.Duration) float64 { return float64(size) * float64(b.N) / d.Seconds() / 1e6 }
				b.ReportMetric(mbs(ours), "MB/s")
				b.ReportMetric(mbs(theirs), "xrdcp-MB/s")
				b.ReportMetric(ours.Seconds()/theirs.Seconds(), "time/xrdcp")
			})
		}
	}
}

// readAll reads the file with a fresh Origin: inflight workers each take
// the next 1 MiB block.
func readAll(url string, conns, inflight int, size int64) (time.Duration, error) {
	o, err := New(&Config{URL: url, ConnsPerHost: conns})
	if err != nil {
		return 0, err
	}
	defer o.Close()
	ctx := context.Background()
	t0 := time.Now()
	f, err := o.Open(ctx, "/big.bin")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	const block = 1 << 20
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, inflight)
	for w := 0; w < inflight; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, block)
			for {
				off := next.Add(block) - block
				if off >= size {
					return
				}
				if _, err := f.ReadAt(ctx, buf, off); err != nil && err != io.EOF {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

// cpuTime returns the CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func envInts(key, def string) []int {
	v := os.Getenv(key)
	if v == "" {
		v = def
	}
	var out []int
	for _, s := range splitComma(v) {
		n, err := strconv.Atoi(s)
		if err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

var _ origin.Origin = (*Origin)(nil)
