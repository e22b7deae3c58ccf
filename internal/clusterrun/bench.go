package clusterrun

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hepcache/hepcache/internal/hrw"
	"github.com/hepcache/hepcache/internal/xrdproc"
)

// BenchConfig configures Bench.
type BenchConfig struct {
	// Bin is the hepcache binary. Default: the running executable (for
	// `hepcache bench cluster`).
	Bin string
	// Dir is a scratch directory. Default: a new temporary directory,
	// removed afterwards.
	Dir string
	// Nodes are the cluster sizes measured. Default 1, 2, 4.
	Nodes []int
	// Files and FileSize make the data set. Default 16 files of 32 MiB.
	Files    int
	FileSize int64
	// Clients is the number of parallel xrdcp clients of the hot phase.
	// Default 8.
	Clients int
	// Rounds is how often each client copies every file in the hot phase.
	// Default 2.
	Rounds int
	// Log receives progress lines. Default: discarded.
	Log io.Writer
	// Smoke starts the origin and a cluster of two nodes and reads one
	// small file through the origin and each node, measuring nothing
	// (Bench returns a nil report).
	Smoke bool
}

// BenchReport is what Bench measured. Throughputs are bytes per second;
// ratios are against the 1-node cluster of the same run.
type BenchReport struct {
	// Hot is the aggregate hot-read throughput per cluster size.
	Hot []HotResult
	// Moved is the fraction of files that changed owner when one node
	// joined a cluster of N (rendezvous hashing, 100000 seeded keys),
	// against the ideal 1/(N+1) and modulo hashing's fraction.
	Moved []MovedResult
	// MovedReal is the fraction of the data set's files the real cluster
	// located on another node after a node joined the largest cluster.
	MovedReal float64
	// Converge is the time until every survivor's view dropped a node
	// killed with SIGKILL (failure detection, lan profile); Leave the same
	// for a graceful stop (SIGTERM).
	Converge, Leave time.Duration
}

// HotResult is the hot throughput of one cluster size.
type HotResult struct {
	Nodes      int
	Throughput float64
	Ratio      float64
}

// MovedResult is one membership-change measurement.
type MovedResult struct {
	From               int
	Moved, Ideal, Mod  float64
	RatioToIdeal       float64
	ModuloRatioToIdeal float64
}

// Bench measures the cluster on this machine with real processes: a C++
// xrootd origin, hepcache nodes and xrdcp clients on loopback. It is the
// body of `hepcache bench cluster`.
func Bench(ctx context.Context, cfg BenchConfig) (_ *BenchReport, err error) {
	if cfg.Smoke {
		cfg.Nodes, cfg.Files, cfg.FileSize = []int{2}, 1, 1<<20
	}
	if cfg.Bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		cfg.Bin = exe
	}
	if len(cfg.Nodes) == 0 {
		cfg.Nodes = []int{1, 2, 4}
	}
	if cfg.Files == 0 {
		cfg.Files = 16
	}
	if cfg.FileSize == 0 {
		cfg.FileSize = 32 << 20
	}
	if cfg.Clients == 0 {
		cfg.Clients = 8
	}
	if cfg.Rounds == 0 {
		cfg.Rounds = 2
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Dir == "" {
		d, err := os.MkdirTemp("", "hepcache-bench-cluster-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		cfg.Dir = d
	}
	if _, err := exec.LookPath("xrdcp"); err != nil {
		return nil, fmt.Errorf("bench cluster needs xrdcp (xrootd-client): %w", err)
	}
	rep := &BenchReport{Moved: movedByHashing()}

	// The data set and the origin.
	data := filepath.Join(cfg.Dir, "origin")
	var files []string
	buf := make([]byte, 1<<20)
	for i := range cfg.Files {
		p := fmt.Sprintf("/store/bench/f%03d.root", i)
		files = append(files, p)
		if err := writeRandom(filepath.Join(data, p), cfg.FileSize, buf); err != nil {
			return nil, err
		}
	}
	org, err := xrdproc.StartOrigin(data)
	if err != nil {
		return nil, err
	}
	defer org.Stop()
	// An origin that dies ends the run at once, saying so, instead of
	// leaving xrdcp to wait out its connection window.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-org.Died():
			cancel(fmt.Errorf("%w: origin (xrootd at %s) exited while the benchmark ran: %s", errOriginDied, org.Addr, org.Log()))
		case <-ctx.Done():
		}
	}()
	defer func() {
		if cause := context.Cause(ctx); err != nil && errors.Is(cause, errOriginDied) {
			err = cause
		}
	}()
	if cfg.Smoke {
		n := cfg.Nodes[0]
		if out, err := exec.CommandContext(ctx, "xrdcp", "-f", "-s", org.URL+"/"+files[0], "/dev/null").CombinedOutput(); err != nil {
			return nil, fmt.Errorf("--smoke: origin: xrdcp: %w: %s", err, strings.TrimSpace(string(out)))
		}
		fmt.Fprintf(cfg.Log, "smoke: origin at %s started and served %s\n", org.URL, files[0])
		c, err := Start(Config{Bin: cfg.Bin, Origin: org.URL, Dir: filepath.Join(cfg.Dir, "smoke"), Extra: []string{}}, n, false)
		if err != nil {
			return nil, fmt.Errorf("--smoke: start %d nodes: %w", n, err)
		}
		defer c.Close()
		if _, err := copyAll(ctx, c, files, cfg.FileSize, n, 1); err != nil { // one client per node
			return nil, fmt.Errorf("--smoke: %w", err)
		}
		fmt.Fprintf(cfg.Log, "smoke: %d nodes started and each served %s\n", n, files[0])
		return nil, nil
	}

	for _, n := range cfg.Nodes {
		dir := filepath.Join(cfg.Dir, fmt.Sprintf("c%d", n))
		c, err := Start(Config{Bin: cfg.Bin, Origin: org.URL, Dir: dir, Extra: []string{}}, n, false)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(cfg.Log, "%d node(s): warming the cache\n", n)
		if _, err := copyAll(ctx, c, files, cfg.FileSize, 1, 1); err != nil {
			c.Close()
			return nil, err
		}
		fmt.Fprintf(cfg.Log, "%d node(s): %d clients x %d rounds of %d files\n", n, cfg.Clients, cfg.Rounds, len(files))
		start := time.Now()
		bytes, err := copyAll(ctx, c, files, cfg.FileSize, cfg.Clients, cfg.Rounds)
		el := time.Since(start)
		if err != nil {
			c.Close()
			return nil, err
		}
		hr := HotResult{Nodes: n, Throughput: float64(bytes) / el.Seconds()}
		rep.Hot = append(rep.Hot, hr)

		if n == cfg.Nodes[len(cfg.Nodes)-1] {
			if err := membershipChanges(ctx, c, files, rep, cfg.Log); err != nil {
				c.Close()
				return nil, err
			}
		}
		c.Close()
		os.RemoveAll(dir)
	}
	for i := range rep.Hot {
		rep.Hot[i].Ratio = rep.Hot[i].Throughput / rep.Hot[0].Throughput
	}
	return rep, nil
}

// errOriginDied marks a run ended by its origin's exit.
var errOriginDied = errors.New("clusterrun: origin died")

func writeRandom(p string, size int64, buf []byte) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	for left := size; left > 0; {
		n := min(int64(len(buf)), left)
		rand.Read(buf[:n])
		if _, err := f.Write(buf[:n]); err != nil {
			f.Close()
			return err
		}
		left -= n
	}
	return f.Close()
}

// copyAll runs clients parallel xrdcp loops, each copying every file
// rounds times, spreading entry nodes round-robin; it returns the bytes
// copied.
func copyAll(ctx context.Context, c *Cluster, files []string, size int64, clients, rounds int) (int64, error) {
	nodes := c.Alive()
	var total atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, clients)
	for k := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			i := k
			for range rounds {
				for j := range files {
					p := files[(j+k)%len(files)]
					entry := nodes[i%len(nodes)]
					i++
					cmd := exec.CommandContext(ctx, "xrdcp", "-f", "-s", "root://"+entry.Root+"/"+p, "/dev/null")
					if out, err := cmd.CombinedOutput(); err != nil {
						errc <- fmt.Errorf("xrdcp %s via %s: %w: %s", p, entry.Name, err, strings.TrimSpace(string(out)))
						return
					}
					total.Add(size)
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return 0, err
	}
	return total.Load(), nil
}

// membershipChanges adds a node (files moved), kills one (time to
// converge) and stops one gracefully (time to converge).
func membershipChanges(ctx context.Context, c *Cluster, files []string, rep *BenchReport, log io.Writer) error {
	entry := c.Nodes[0]
	where := func() (map[string]string, error) {
		out := map[string]string{}
		for _, p := range files {
			b, err := exec.CommandContext(ctx, "xrdfs", entry.Root, "locate", p).CombinedOutput()
			if err != nil {
				return nil, fmt.Errorf("xrdfs locate %s: %w: %s", p, err, b)
			}
			out[p] = strings.Fields(string(b) + " ?")[0]
		}
		return out, nil
	}
	before, err := where()
	if err != nil {
		return err
	}
	if _, err := c.Add(); err != nil {
		return err
	}
	if _, err := c.WaitConverged(time.Minute); err != nil {
		return err
	}
	after, err := where()
	if err != nil {
		return err
	}
	moved := 0
	for p := range before {
		if before[p] != after[p] {
			moved++
		}
	}
	rep.MovedReal = float64(moved) / float64(len(files))
	fmt.Fprintf(log, "node added: %d of %d files moved\n", moved, len(files))

	victim := c.Nodes[len(c.Nodes)-1]
	victim.Kill()
	if rep.Converge, err = c.WaitConverged(time.Minute); err != nil {
		return err
	}
	fmt.Fprintf(log, "node killed: converged in %v\n", rep.Converge)
	leaver := c.Nodes[len(c.Nodes)-2]
	start := time.Now()
	leaver.Stop()
	if _, err := c.WaitConverged(time.Minute); err != nil {
		return err
	}
	rep.Leave = time.Since(start)
	fmt.Fprintf(log, "node stopped: converged in %v\n", rep.Leave)
	return nil
}

// movedByHashing measures files moved when one node joins N nodes, with
// rendezvous hashing and with modulo hashing, over seeded keys.
func movedByHashing() []MovedResult {
	const nkeys = 100000
	keys := make([]string, nkeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("root://origin.example:1094//store/data/Run%d/file_%07d.root", i%17, i)
	}
	var out []MovedResult
	for _, n := range []int{2, 4, 8, 11, 16} {
		nodes := make([]hrw.Node, n+1)
		for i := range nodes {
			nodes[i] = hrw.Node{Name: fmt.Sprintf("cache-%02d", i)}
		}
		moved, mod := 0, 0
		for _, k := range keys {
			a, _ := hrw.Owner(nodes[:n], k)
			b, _ := hrw.Owner(nodes, k)
			if a.Name != b.Name {
				moved++
			}
			h := hrw.Hash64(k)
			if h%uint64(n) != h%uint64(n+1) {
				mod++
			}
		}
		r := MovedResult{From: n, Moved: float64(moved) / nkeys, Mod: float64(mod) / nkeys, Ideal: 1 / float64(n+1)}
		r.RatioToIdeal, r.ModuloRatioToIdeal = r.Moved/r.Ideal, r.Mod/r.Ideal
		out = append(out, r)
	}
	return out
}

// Print writes the report as a table of ratios.
func (r *BenchReport) Print(w io.Writer) {
	fmt.Fprintln(w, "hepcache cluster benchmark (real processes on this machine, loopback)")
	fmt.Fprintln(w, "\nhot reads, aggregate over all nodes (xrdcp clients, files cached at their owners):")
	fmt.Fprintf(w, "  %-6s %14s %10s\n", "nodes", "MB/s", "vs 1 node")
	for _, h := range r.Hot {
		fmt.Fprintf(w, "  %-6d %14.1f %9.2fx\n", h.Nodes, h.Throughput/1e6, h.Ratio)
	}
	fmt.Fprintln(w, "\nfiles moved when one node joins N (100000 keys):")
	fmt.Fprintf(w, "  %-4s %10s %10s %12s %14s\n", "N", "moved", "ideal", "vs ideal", "modulo vs ideal")
	for _, m := range r.Moved {
		fmt.Fprintf(w, "  %-4d %9.2f%% %9.2f%% %11.2fx %13.2fx\n", m.From, 100*m.Moved, 100*m.Ideal, m.RatioToIdeal, m.ModuloRatioToIdeal)
	}
	fmt.Fprintf(w, "  real cluster: %.0f%% of the data set moved to the joining node\n", 100*r.MovedReal)
	fmt.Fprintf(w, "\nview converged after a node loss (kill -9): %v; after a graceful stop: %v (lan profile)\n",
		r.Converge.Round(time.Millisecond), r.Leave.Round(time.Millisecond))
}
