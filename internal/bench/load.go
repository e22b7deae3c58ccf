package bench

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hepcache/hepcache/internal/procstat"
	"github.com/hepcache/hepcache/internal/xrdproc"
	"github.com/hepcache/hepcache/internal/xrootd/client"
)

// pacedRead is one client of the load benchmarks (resources, scale): it
// opens path at addr with a client of its own (its own connections, like a
// separate job) and reads it sequentially in chunks, at most rate bytes/s
// (0: as fast as it can), wrapping to the start at the end of the file,
// until it has read total bytes or dur has passed (whichever is set).
type pacedRead struct {
	addr, path string
	chunk      int
	rate       float64
	total      int64
	dur        time.Duration
	// off0 is where the first read starts (spreads clients sharing a file).
	off0 int64
}

// pacedResult is what one client achieved.
type pacedResult struct {
	Bytes   int64
	Seconds float64
	Err     error
}

func (p pacedRead) run(ctx context.Context) pacedResult {
	c, err := client.New(&client.Config{ConnsPerHost: 1})
	if err != nil {
		return pacedResult{Err: err}
	}
	defer c.Close()
	start := time.Now()
	f, err := c.Open(ctx, p.addr, p.path)
	if err != nil {
		return pacedResult{Err: err, Seconds: time.Since(start).Seconds()}
	}
	defer f.Close(context.WithoutCancel(ctx))
	size := f.Info().Size
	if size <= 0 {
		return pacedResult{Err: fmt.Errorf("%s is empty", p.path)}
	}
	buf := make([]byte, p.chunk)
	var got int64
	off := p.off0 % max(size, 1)
	for {
		if p.total > 0 && got >= p.total {
			break
		}
		if p.dur > 0 && time.Since(start) >= p.dur {
			break
		}
		n := int64(len(buf))
		if p.total > 0 {
			n = min(n, p.total-got)
		}
		if p.rate > 0 {
			// A run of fixed duration asks for a chunk at the start of
			// each period (UCSD's jobs: read, then sleep); a run of fixed
			// size reads each chunk once the rate allows its bytes.
			due := start.Add(time.Duration(float64(got+n) / p.rate * float64(time.Second)))
			if p.dur > 0 {
				due = start.Add(time.Duration(float64(got) / p.rate * float64(time.Second)))
			}
			if d := time.Until(due); d > 0 {
				if p.dur > 0 && time.Until(start.Add(p.dur)) < d {
					time.Sleep(time.Until(start.Add(p.dur)))
					break
				}
				select {
				case <-time.After(d):
				case <-ctx.Done():
					return pacedResult{Bytes: got, Seconds: time.Since(start).Seconds(), Err: ctx.Err()}
				}
			}
		}
		// One request of n bytes, wrapping at the end of the file.
		for n > 0 {
			k, err := f.ReadAt(ctx, buf[:min(n, size-off)], off)
			got += int64(k)
			if err != nil {
				return pacedResult{Bytes: got, Seconds: time.Since(start).Seconds(), Err: fmt.Errorf("read %s at %d: %w", p.path, off, err)}
			}
			n -= int64(k)
			if off += int64(k); off >= size {
				off = 0
			}
		}
	}
	return pacedResult{Bytes: got, Seconds: time.Since(start).Seconds()}
}

// runPaced runs every client at once and returns their results.
func runPaced(ctx context.Context, reads []pacedRead) []pacedResult {
	out := make([]pacedResult, len(reads))
	var wg sync.WaitGroup
	for i, r := range reads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = r.run(ctx)
		}()
	}
	wg.Wait()
	return out
}

// writeLoadFiles writes n files of size under dir/name with distinct
// pseudo-random contents (kept when already there) and returns their paths
// as the origin serves them.
func writeLoadFiles(dir, name string, n int, size int64) ([]string, error) {
	sub := filepath.Join(dir, name)
	if err := os.MkdirAll(sub, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	buf := make([]byte, 1<<20)
	for i := 0; i < n; i++ {
		fn := fmt.Sprintf("f%04d.dat", i)
		p := filepath.Join(sub, fn)
		paths = append(paths, "/"+name+"/"+fn)
		if st, err := os.Stat(p); err == nil && st.Size() == size {
			continue
		}
		seed := sha256.Sum256([]byte(p))
		r := rand.NewChaCha8(seed)
		f, err := os.Create(p)
		if err != nil {
			return nil, err
		}
		for left := size; left > 0; {
			k := min(int64(len(buf)), left)
			r.Read(buf[:k])
			if _, err := f.Write(buf[:k]); err != nil {
				f.Close()
				return nil, err
			}
			left -= k
		}
		if err := f.Close(); err != nil {
			return nil, err
		}
	}
	return paths, xrdproc.GiveToServerUser(dir)
}

// usage is a process's resource use sampled over a run.
type usage struct {
	// RSS and CPU (in cores) per sample.
	RSS []float64
	CPU []float64
}

// sampleUsage samples pid's resident memory and CPU load every interval
// until stop is closed.
func sampleUsage(pid int, interval time.Duration, stop <-chan struct{}) *usage {
	u := &usage{}
	t := time.NewTicker(interval)
	defer t.Stop()
	last, _ := procstat.CPU(pid)
	lastT := time.Now()
	for {
		select {
		case <-stop:
			return u
		case <-t.C:
		}
		now := time.Now()
		cpu, err1 := procstat.CPU(pid)
		rss, err2 := procstat.RSS(pid)
		if err1 != nil || err2 != nil {
			continue
		}
		u.CPU = append(u.CPU, (cpu-last).Seconds()/now.Sub(lastT).Seconds())
		u.RSS = append(u.RSS, float64(rss))
		last, lastT = cpu, now
	}
}

// above returns the values of v at least thr: the paper's way of dropping
// idle samples.
func above(v []float64, thr float64) []float64 {
	var out []float64
	for _, x := range v {
		if x >= thr {
			out = append(out, x)
		}
	}
	return out
}

// fitLine fits y = a + b x by least squares.
func fitLine(x, y []float64) (a, b float64) {
	n := float64(len(x))
	if n < 2 {
		if n == 1 {
			return y[0], 0
		}
		return 0, 0
	}
	var sx, sy, sxx, sxy float64
	for i := range x {
		sx += x[i]
		sy += y[i]
		sxx += x[i] * x[i]
		sxy += x[i] * y[i]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return sy / n, 0
	}
	b = (n*sxy - sx*sy) / d
	a = (sy - b*sx) / n
	return a, b
}
