package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/hepcache/hepcache/internal/procstat"
	"github.com/hepcache/hepcache/internal/xrdproc"
	"github.com/hepcache/hepcache/origin/xrootd"
)

// What each file costs: many small files through a cache, cold and hot, as
// the physicists' jobs and the OSDF's small objects read them (the XRootD
// Python bindings: open, read the file, close, from several threads), with
// the anchors measured in the same run: the origin alone and XCache. Then
// what a node of many files pays beyond bytes: open descriptors, restart
// to the first hit, the index's memory per file, a purge of half the
// files, hits under a descriptor limit of 1024; and a projection of the
// slopes to 10 million files.

// FilesConfig configures `hepcache bench files`.
type FilesConfig struct {
	// Dir holds the origin's files and the caches. Default results/files.
	Dir string
	// Files is how many files (default 100 000) of Size bytes (default
	// 4 KiB), read by Threads threads (default 8).
	Files   int
	Size    int64
	Threads int
	// LimitFiles and LimitThreads: hits under `ulimit -n 1024` (LimitFD)
	// by LimitThreads threads (default 32) over LimitFiles of the cached
	// files (default 30 000, at most Files).
	LimitFiles, LimitThreads, LimitFD int
	// HepcacheBin is the hepcache binary; NoXCache skips XCache.
	HepcacheBin string
	NoXCache    bool
	// Python is the interpreter with the XRootD bindings (default
	// /usr/bin/python3, Debian's python3-xrootd).
	Python string
	// CacheFlags are extra `hepcache serve` flags.
	CacheFlags []string
	// Smoke starts the origin and each cache and reads one small file
	// through each, measuring nothing.
	Smoke bool
	// Out receives the report, Progress the progress lines.
	Out, Progress io.Writer
}

func (c *FilesConfig) defaults() error {
	if c.Dir == "" {
		c.Dir = "results/files"
	}
	if c.Smoke {
		c.Files = 10
	}
	abs, err := filepath.Abs(c.Dir)
	if err != nil {
		return err
	}
	c.Dir = abs
	if c.Files <= 0 {
		c.Files = 100_000
	}
	if c.Size <= 0 {
		c.Size = 4 << 10
	}
	if c.Threads <= 0 {
		c.Threads = 8
	}
	if c.LimitFD <= 0 {
		c.LimitFD = 1024
	}
	if c.LimitThreads <= 0 {
		c.LimitThreads = 32
	}
	if c.LimitFiles <= 0 {
		c.LimitFiles = 30_000
	}
	c.LimitFiles = min(c.LimitFiles, c.Files)
	if c.Python == "" {
		c.Python = "/usr/bin/python3"
	}
	if c.HepcacheBin, err = defaultBin(c.HepcacheBin); err != nil {
		return err
	}
	if c.Out == nil {
		c.Out = os.Stdout
	}
	if c.Progress == nil {
		c.Progress = os.Stderr
	}
	return nil
}

// FilesPass is one pass over the files by one target.
type FilesPass struct {
	Files     int     `json:"files"`
	Errors    int     `json:"errors"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"files_per_second"`
	// CPUPerFile is the server's CPU time per file (ms); PeakFDs its most
	// open descriptors during the pass.
	CPUPerFile float64 `json:"cpu_ms_per_file"`
	PeakFDs    int     `json:"peak_fds"`
	FirstError string  `json:"first_error,omitempty"`
}

// FilesResult holds every figure of a run.
type FilesResult struct {
	Config FilesConfig `json:"-"`
	Origin FilesPass   `json:"origin"`
	// Cold and Hot by target ("hepcache", "xcache").
	Cold map[string]FilesPass `json:"cold"`
	Hot  map[string]FilesPass `json:"hot"`
	// EmptyFirstAnswer is an empty cache's time from start to its first
	// served file; FirstHit a restarted full cache's to its first hit;
	// IndexLoaded to its whole index loaded (while serving).
	EmptyFirstAnswer time.Duration `json:"empty_first_answer_ns"`
	FirstHit         time.Duration `json:"first_hit_ns"`
	IndexLoaded      time.Duration `json:"index_loaded_ns"`
	// IndexBytesPerFile is what the catalogue counts per file;
	// MemoryPerFile the process's resident memory outside the RAM cache,
	// full against empty, per file.
	IndexBytesPerFile float64 `json:"index_bytes_per_file"`
	MemoryPerFile     float64 `json:"memory_bytes_per_file"`
	// Purge of half the files: how many, how long.
	PurgedFiles int           `json:"purged_files"`
	Purge       time.Duration `json:"purge_ns"`
	// Limited is the pass of hits under the descriptor limit.
	Limited FilesPass `json:"limited"`
}

// FilesPy reads every path of a list with the XRootD Python bindings from
// several threads (open, read the whole file, close) and prints what
// happened as JSON: ok, errors, seconds and the first error. Arguments:
// base URL, list file, threads, file size.
const FilesPy = `
import sys, json, time, threading
from XRootD import client
from XRootD.client.flags import OpenFlags
base, listfile, threads, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
paths = [l.strip() for l in open(listfile) if l.strip()]
lock = threading.Lock()
state = {"i": 0, "ok": 0, "errors": 0, "first": ""}
def worker():
    while True:
        with lock:
            i = state["i"]
            state["i"] += 1
        if i >= len(paths):
            return
        f = client.File()
        err = ""
        st, _ = f.open(base + "/" + paths[i], OpenFlags.READ)
        if not st.ok:
            err = "open: " + st.message
        else:
            st, data = f.read(0, size)
            if not st.ok:
                err = "read: " + st.message
            elif len(data) != size:
                err = "read: %d bytes" % len(data)
            f.close()
        with lock:
            if err:
                state["errors"] += 1
                if not state["first"]:
                    state["first"] = paths[i] + ": " + err
            else:
                state["ok"] += 1
t0 = time.time()
ts = [threading.Thread(target=worker) for _ in range(threads)]
for t in ts: t.start()
for t in ts: t.join()
print(json.dumps({"ok": state["ok"], "errors": state["errors"], "seconds": time.time() - t0, "first": state["first"]}))
`

// Files runs the benchmark.
func Files(ctx context.Context, cfg FilesConfig) (_ *FilesResult, err error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	w := newWatch(ctx)
	ctx = w.ctx
	defer w.close()
	defer func() { err = w.result(err) }()
	for _, tool := range []string{"xrootd", cfg.Python} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("bench files needs %s (Debian xrootd-server, python3-xrootd): %w", tool, err)
		}
	}
	progress := func(format string, args ...any) { fmt.Fprintf(cfg.Progress, "bench files: "+format+"\n", args...) }
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	data := filepath.Join(cfg.Dir, "origin")
	progress("writing %d files of %d bytes under %s", cfg.Files, cfg.Size, data)
	paths, err := writeSmallFiles(data, cfg.Files, cfg.Size)
	if err != nil {
		return nil, err
	}
	script := filepath.Join(cfg.Dir, "files.py")
	if err := os.WriteFile(script, []byte(FilesPy), 0o644); err != nil {
		return nil, err
	}
	list := filepath.Join(cfg.Dir, "paths.txt")
	if err := os.WriteFile(list, []byte(strings.Join(paths, "\n")+"\n"), 0o644); err != nil {
		return nil, err
	}
	limitList := filepath.Join(cfg.Dir, "paths-limit.txt")
	if err := os.WriteFile(limitList, []byte(strings.Join(paths[:cfg.LimitFiles], "\n")+"\n"), 0o644); err != nil {
		return nil, err
	}
	org, err := xrdproc.StartOrigin(data)
	if err != nil {
		return nil, err
	}
	defer org.Remove()
	w.xrootd("origin", org)
	progress("origin: C++ xrootd at %s", org.Addr)
	if cfg.Smoke {
		sm := smoke{ctx: ctx, progress: progress, file: paths[0]}
		return nil, sm.originThenCaches(w, org, withXCache(cfg.NoXCache), func(kind string) (*cacheProc, error) {
			fc, err := startFilesCache(kind, cfg.HepcacheBin, filepath.Join(cfg.Dir, "cache-"+kind+"-smoke"), org.Addr, cfg.CacheFlags)
			if err != nil {
				return nil, err
			}
			return fc.cacheProc, nil
		})
	}

	res := &FilesResult{Config: cfg, Cold: map[string]FilesPass{}, Hot: map[string]FilesPass{}}
	pass := func(base string, pid int, listFile string, threads int) (FilesPass, error) {
		fds := fdSampler(pid)
		c0, _ := procstat.CPU(pid)
		out, err := exec.CommandContext(ctx, cfg.Python, script, base, listFile, strconv.Itoa(threads), strconv.FormatInt(cfg.Size, 10)).Output()
		c1, _ := procstat.CPU(pid)
		peak := fds()
		if err != nil {
			return FilesPass{}, fmt.Errorf("client: %w", err)
		}
		var r struct {
			OK, Errors int
			Seconds    float64
			First      string
		}
		if err := json.Unmarshal(out, &r); err != nil {
			return FilesPass{}, fmt.Errorf("client said %q: %w", out, err)
		}
		n := r.OK + r.Errors
		p := FilesPass{Files: n, Errors: r.Errors, Seconds: r.Seconds, PeakFDs: peak, FirstError: r.First}
		if r.Seconds > 0 {
			p.PerSecond = float64(r.OK) / r.Seconds
		}
		if n > 0 {
			p.CPUPerFile = (c1 - c0).Seconds() * 1000 / float64(n)
		}
		return p, nil
	}
	if res.Origin, err = pass("root://"+org.Addr, org.PID(), list, cfg.Threads); err != nil {
		return nil, fmt.Errorf("origin alone: %w", err)
	}
	progress("origin alone: %.0f files/s", res.Origin.PerSecond)

	for _, target := range withXCache(cfg.NoXCache) {
		dir := filepath.Join(cfg.Dir, "cache-"+target)
		t0 := time.Now()
		cu, err := startFilesCache(target, cfg.HepcacheBin, dir, org.Addr, cfg.CacheFlags)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", target, err)
		}
		w.cache(cu.cacheProc)
		var emptyMem int64
		if target == "hepcache" {
			if res.EmptyFirstAnswer, err = firstRead(ctx, cu.url(), paths[0], t0); err != nil {
				cu.stop()
				return nil, fmt.Errorf("%s first answer: %w", target, err)
			}
			emptyMem, _ = outsideRAM(cu)
		}
		cold, err := pass(cu.url(), cu.pid, list, cfg.Threads)
		if err == nil {
			res.Cold[target] = cold
			progress("%s cold: %.0f files/s, %.2f ms CPU a file, %d errors, peak %d descriptors", target, cold.PerSecond, cold.CPUPerFile, cold.Errors, cold.PeakFDs)
			var hot FilesPass
			if hot, err = pass(cu.url(), cu.pid, list, cfg.Threads); err == nil {
				res.Hot[target] = hot
				progress("%s hot: %.0f files/s, %.2f ms CPU a file, %d errors, peak %d descriptors", target, hot.PerSecond, hot.CPUPerFile, hot.Errors, hot.PeakFDs)
			}
		}
		if err != nil || target != "hepcache" {
			cu.stop()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", target, err)
			}
			continue
		}
		// Restarts of the full hepcache cache.
		cu.halt()
		if err := res.restarts(ctx, cfg, cu, paths, emptyMem, pass, limitList, progress); err != nil {
			cu.stop()
			return nil, err
		}
		cu.stop()
	}
	printFiles(cfg.Out, res)
	return res, nil
}

// restarts measures the full cache restarted: first hit and index load,
// memory per file, hits under the descriptor limit, a purge of half the
// files.
func (res *FilesResult) restarts(ctx context.Context, cfg FilesConfig, cu *filesCache, paths []string, emptyMem int64,
	pass func(string, int, string, int) (FilesPass, error), limitList string, progress func(string, ...any)) error {
	t0 := time.Now()
	cu, err := cu.launch(nil, nil)
	if err != nil {
		return err
	}
	if res.FirstHit, err = firstRead(ctx, cu.url(), paths[len(paths)/2], t0); err != nil {
		cu.halt()
		return fmt.Errorf("first hit after restart: %w", err)
	}
	if res.IndexLoaded, err = waitIndexLoaded(cu, t0); err != nil {
		cu.halt()
		return err
	}
	if m, err := scrapeGauges(metricsClient, cu.metrics, "hepcache_index_bytes", "hepcache_index_files", "hepcache_resident_outside_ram_bytes"); err == nil {
		if n := m["hepcache_index_files"]; n > 0 {
			res.IndexBytesPerFile = float64(m["hepcache_index_bytes"]) / float64(n)
			if emptyMem > 0 {
				res.MemoryPerFile = float64(m["hepcache_resident_outside_ram_bytes"]-emptyMem) / float64(n)
			}
		}
	}
	progress("hepcache restarted with %d files: first hit %v after start (an empty cache's first answer: %v), index loaded %v, %.0f index bytes a file",
		len(paths), res.FirstHit.Round(time.Millisecond), res.EmptyFirstAnswer.Round(time.Millisecond), res.IndexLoaded.Round(time.Millisecond), res.IndexBytesPerFile)
	cu.halt()

	// Hits under the descriptor limit.
	lc, err := cu.launch([]string{"prlimit", "--nofile=" + strconv.Itoa(cfg.LimitFD) + ":" + strconv.Itoa(cfg.LimitFD), "--"}, nil)
	if err != nil {
		return fmt.Errorf("restart under ulimit -n %d: %w", cfg.LimitFD, err)
	}
	waitIndexLoaded(lc, time.Now())
	if res.Limited, err = pass(lc.url(), lc.pid, limitList, cfg.LimitThreads); err != nil {
		lc.halt()
		return err
	}
	progress("hepcache under ulimit -n %d, %d threads, %d cached files: %d errors, %.0f files/s, peak %d descriptors",
		cfg.LimitFD, cfg.LimitThreads, cfg.LimitFiles, res.Limited.Errors, res.Limited.PerSecond, res.Limited.PeakFDs)
	lc.halt()

	// A purge of half the files: a capacity that the cached files fill to
	// about 190 %, so that the purge evicts down to 90 % of it.
	capacity := int64(len(paths)) * cfg.Size / 2 * 100 / 90
	pu, err := cu.launch(nil, []string{"--capacity", strconv.FormatInt(capacity, 10)})
	if err != nil {
		return err
	}
	defer pu.halt()
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		m, err := scrapeFloats(metricsClient, pu.metrics, "hepcache_purge_last_files", "hepcache_purge_last_seconds")
		if err == nil && m["hepcache_purge_last_files"] > 0 {
			res.PurgedFiles = int(m["hepcache_purge_last_files"])
			res.Purge = time.Duration(m["hepcache_purge_last_seconds"] * float64(time.Second))
			progress("purge of half the files: %d evicted in %v", res.PurgedFiles, res.Purge.Round(time.Millisecond))
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("no purge within 10 minutes")
}

// filesCache is a cache process of the benchmark, with where its metrics
// are (hepcache) and how to start it again on the same directory with
// other flags or under a wrapper.
type filesCache struct {
	*cacheProc
	metrics string
	launch  func(wrap, extra []string) (*filesCache, error)
}

// startFilesCache starts target in front of the origin: hepcache with its
// metrics, XCache with pfc.ram 1g, as the issue measured it.
func startFilesCache(target, bin, dir, originAddr string, extra []string) (*filesCache, error) {
	if target == "xcache" {
		os.RemoveAll(dir)
		s, err := xrdproc.StartXCache(originAddr, dir, xrdproc.XCacheOptions{RAM: "1g"})
		if err != nil {
			return nil, fmt.Errorf("start XCache: %w", err)
		}
		return &filesCache{cacheProc: &cacheProc{kind: "xcache", addr: s.Addr, pid: s.PID(), stop: func() { s.Remove(); os.RemoveAll(dir) }, halt: s.Remove,
			died: s.Died(), log: s.Log}}, nil
	}
	os.RemoveAll(dir)
	var launch func(wrap, more []string) (*filesCache, error)
	launch = func(wrap, more []string) (*filesCache, error) {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		args := append(append([]string{"--metrics-listen", addr}, extra...), more...)
		cu, err := startHepcacheProcUnder(wrap, bin, dir, "root://"+originAddr, "127.0.0.1:0", args)
		if err != nil {
			return nil, err
		}
		return &filesCache{cacheProc: cu, metrics: "http://" + addr + "/metrics", launch: launch}, nil
	}
	return launch(nil, nil)
}

// firstRead reads path through the cache at base until it succeeds and
// returns the time since t0.
func firstRead(ctx context.Context, base, path string, t0 time.Time) (time.Duration, error) {
	deadline := time.Now().Add(5 * time.Minute)
	var last error
	for time.Now().Before(deadline) {
		o, err := xrootd.Dial(ctx, base)
		if err == nil {
			var f interface {
				ReadAt(context.Context, []byte, int64) (int, error)
				Close() error
			}
			of, oerr := o.Open(ctx, path)
			if err = oerr; err == nil {
				f = of
				buf := make([]byte, 1)
				_, err = f.ReadAt(ctx, buf, 0)
				f.Close()
			}
			if c, ok := o.(io.Closer); ok {
				c.Close()
			}
			if err == nil {
				return time.Since(t0), nil
			}
		}
		last = err
		time.Sleep(2 * time.Millisecond)
	}
	return 0, fmt.Errorf("no answer within 5 minutes: %w", last)
}

// waitIndexLoaded waits until the cache's index is loaded (its /health says
// so) and returns the time since t0.
func waitIndexLoaded(cu *filesCache, t0 time.Time) (time.Duration, error) {
	deadline := time.Now().Add(30 * time.Minute)
	for time.Now().Before(deadline) {
		m, err := scrapeGauges(metricsClient, cu.metrics, "hepcache_index_loading")
		if err == nil && m["hepcache_index_loading"] == 0 { // absent: loaded before serving
			return time.Since(t0), nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0, fmt.Errorf("index not loaded within 30 minutes")
}

// outsideRAM is the cache's resident memory outside its RAM cache.
func outsideRAM(cu *filesCache) (int64, error) {
	m, err := scrapeGauges(metricsClient, cu.metrics, "hepcache_resident_outside_ram_bytes")
	return m["hepcache_resident_outside_ram_bytes"], err
}

// fdSampler counts pid's open descriptors every 20 ms until the returned
// function is called, which gives the most seen.
func fdSampler(pid int) func() int {
	var mu sync.Mutex
	peak := 0
	stop := make(chan struct{})
	done := make(chan struct{})
	count := func() {
		if ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd"); err == nil {
			mu.Lock()
			peak = max(peak, len(ents))
			mu.Unlock()
		}
	}
	go func() {
		defer close(done)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			count()
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() int {
		close(stop)
		<-done
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

// writeSmallFiles writes n files of size bytes under dir, 1000 to a
// directory as a cache's namespace has them, and returns their paths.
func writeSmallFiles(dir string, n int, size int64) ([]string, error) {
	paths := make([]string, n)
	for i := range paths {
		paths[i] = fmt.Sprintf("/files/d%03d/f%06d.dat", i/1000, i)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			buf := make([]byte, size)
			for i := w; i < n; i += 4 {
				p := filepath.Join(dir, paths[i])
				if st, err := os.Stat(p); err == nil && st.Size() == size {
					continue
				}
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					errs <- err
					return
				}
				for j := range buf {
					buf[j] = byte(i*7 + j)
				}
				if err := os.WriteFile(p, buf, 0o644); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return paths, nil
}

// metricsClient scrapes the caches' /metrics.
var metricsClient = &http.Client{Timeout: 5 * time.Second}

func printFiles(w io.Writer, r *FilesResult) {
	cfg := r.Config
	fmt.Fprintf(w, "\nWhat each file costs: %d files of %d bytes, %d threads of the XRootD Python bindings (open, read, close)\n\n", cfg.Files, cfg.Size, cfg.Threads)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tfiles/s\tCPU ms/file\tpeak fds\terrors\tvs XCache\tvs origin\t")
	row := func(name string, p FilesPass, anchor FilesPass, haveAnchor bool) {
		vsX, vsO := "", ""
		if haveAnchor && anchor.PerSecond > 0 {
			vsX = fmt.Sprintf("%.2fx", p.PerSecond/anchor.PerSecond)
		}
		if r.Origin.PerSecond > 0 {
			vsO = fmt.Sprintf("%.2fx", p.PerSecond/r.Origin.PerSecond)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.3f\t%d\t%d\t%s\t%s\t\n", name, p.PerSecond, p.CPUPerFile, p.PeakFDs, p.Errors, vsX, vsO)
	}
	row("origin alone (C++ xrootd)", r.Origin, FilesPass{}, false)
	for _, kind := range []string{"cold", "hot"} {
		m := map[string]map[string]FilesPass{"cold": r.Cold, "hot": r.Hot}[kind]
		x, haveX := m["xcache"]
		if p, ok := m["hepcache"]; ok {
			row("hepcache "+kind, p, x, haveX)
		}
		if haveX {
			row("XCache "+kind, x, FilesPass{}, false)
		}
	}
	tw.Flush()
	if x, ok := r.Cold["xcache"]; ok {
		h := r.Cold["hepcache"]
		fmt.Fprintf(w, "\nCPU per miss: hepcache %.3f ms, XCache %.3f ms (%.2fx); per hit: hepcache %.3f ms, XCache %.3f ms (%.2fx)\n",
			h.CPUPerFile, x.CPUPerFile, h.CPUPerFile/x.CPUPerFile, r.Hot["hepcache"].CPUPerFile, r.Hot["xcache"].CPUPerFile,
			r.Hot["hepcache"].CPUPerFile/r.Hot["xcache"].CPUPerFile)
	}
	n := float64(cfg.Files)
	fmt.Fprintf(w, "\nA restart of hepcache with %d files cached: first hit %v after start (an empty cache's first answer %v: %+v more);\n",
		cfg.Files, r.FirstHit.Round(time.Millisecond), r.EmptyFirstAnswer.Round(time.Millisecond), (r.FirstHit - r.EmptyFirstAnswer).Round(time.Millisecond))
	fmt.Fprintf(w, "whole index loaded %v after start, while serving; index %.0f bytes a file, process memory outside the RAM cache %.0f bytes a file.\n",
		r.IndexLoaded.Round(time.Millisecond), r.IndexBytesPerFile, r.MemoryPerFile)
	fmt.Fprintf(w, "Purge of half the files: %d evicted in %v (%.1f µs a file).\n", r.PurgedFiles, r.Purge.Round(time.Millisecond),
		float64(r.Purge.Microseconds())/float64(max(r.PurgedFiles, 1)))
	fmt.Fprintf(w, "Hits under ulimit -n %d, %d threads over %d cached files: %d errors, %.0f files/s, peak %d descriptors.\n",
		cfg.LimitFD, cfg.LimitThreads, cfg.LimitFiles, r.Limited.Errors, r.Limited.PerSecond, r.Limited.PeakFDs)
	const big = 10_000_000
	scale := big / n
	fmt.Fprintf(w, "\nProjected to %d files (measured slopes x %.0f): index load %v while serving, index memory %.2f GiB,\n",
		big, scale, time.Duration(float64(r.IndexLoaded)*scale).Round(time.Second), r.IndexBytesPerFile*big/(1<<30))
	fmt.Fprintf(w, "process memory outside the RAM cache %.2f GiB, purge of half %v; first hit after a restart: %v (does not grow with the files).\n",
		r.MemoryPerFile*big/(1<<30), time.Duration(float64(r.Purge)*scale).Round(time.Second), r.FirstHit.Round(time.Millisecond))
}
