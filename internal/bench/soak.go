package bench

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hepcache/hepcache/internal/procstat"
	"github.com/hepcache/hepcache/internal/xrdproc"
)

// SoakConfig configures `hepcache bench soak`: real clients of every kind
// read through a hepcache for a long time while faults come on a
// schedule, every byte is compared with the origin's, and the cache's
// resources are followed.
//
// The schedule repeats every Cycle: steady reads; a SIGHUP; kill -9 and a
// restart; the origin stopped (SIGSTOP) for an eighth of the cycle and
// resumed; the cache's disk (a tmpfs) filled to the last byte by another
// file, then freed. The cache's listening sockets are held by the soak as
// systemd holds them for hepcache.socket (LISTEN_FDS), so that a restart
// refuses no connection, and its readiness comes as systemd's does
// (NOTIFY_SOCKET). Its RAM is below its capacity, so that blocks are read
// back from disk too. The run fails on a wrong byte, on a client operation
// longer than MaxOp or still running after OpTimeout (stuck), on a
// resource that grows within one process's life, on no block read back
// from disk, and on `hepcache verify` finding a bad block at the end.
type SoakConfig struct {
	// Dir holds the origin's data, the cache, logs and soak.json.
	Dir         string
	HepcacheBin string
	// Smoke sets up as the run does (the origin, the tmpfs, the cache on
	// its held sockets) and reads one small file through the origin and
	// the cache, measuring nothing.
	Smoke bool
	// Python is an interpreter with the XRootD bindings (default
	// /usr/bin/python3, Debian's python3-xrootd).
	Python string
	// Duration of the whole run (default 30m) and of one fault cycle
	// (default 10m, at most Duration).
	Duration, Cycle time.Duration
	// Workers run client operations back to back (default 10).
	Workers int
	// Files of MinSize to MaxSize bytes make the origin's data (default
	// 120 of 4 to 36 MB: 2.4 GB); the cache's capacity is CapacityShare
	// of it (default 0.25), so that purge runs all the time.
	Files            int
	MinSize, MaxSize int64
	CapacityShare    float64
	// RAM is the cache's cache.ram (default a quarter of the capacity, at
	// least 16 MiB): below the capacity, so that blocks are also read back
	// from disk, as on a site's node whose cache is larger than its memory.
	RAM int64
	// CancelShare of the operations are killed mid-way (default 0.1).
	CancelShare float64
	// MaxOp: an operation (not cancelled) that takes longer fails the run
	// (default 60s): a client waiting out XrdCl's reconnection window is a
	// failure even when its bytes are right.
	MaxOp time.Duration
	// OpTimeout: an operation not over by then is stuck and killed
	// (default MaxOp + 30s).
	OpTimeout time.Duration
	// OriginTimeout is the cache's origin.timeout (default 15s): how long
	// reads wait for a stopped origin before they fail.
	OriginTimeout time.Duration
	// NoTmpfs keeps the cache on Dir's file system and skips the full
	// disk phase (mounting a tmpfs needs root).
	NoTmpfs bool
	// CacheFlags are extra `hepcache serve` flags.
	CacheFlags []string
	Seed       uint64
	Out        io.Writer
	Progress   io.Writer
}

func (c *SoakConfig) defaults() error {
	if c.Dir == "" {
		return errors.New("soak: no work directory")
	}
	if c.Smoke {
		c.Files, c.MinSize, c.MaxSize = 8, 4<<20, 4<<20
	}
	if c.HepcacheBin == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		c.HepcacheBin = exe
	}
	if c.Python == "" {
		c.Python = "/usr/bin/python3"
	}
	if c.Duration <= 0 {
		c.Duration = 30 * time.Minute
	}
	if c.Cycle <= 0 {
		c.Cycle = 10 * time.Minute
	}
	c.Cycle = min(c.Cycle, c.Duration)
	if c.Workers <= 0 {
		c.Workers = 10
	}
	if c.Files <= 0 {
		c.Files = 120
	}
	if c.MinSize <= 0 {
		c.MinSize = 4 << 20
	}
	if c.MaxSize < c.MinSize {
		c.MaxSize = max(36<<20, c.MinSize)
	}
	if c.CapacityShare <= 0 || c.CapacityShare > 1 {
		c.CapacityShare = 0.25
	}
	if c.CancelShare < 0 || c.CancelShare >= 1 {
		return fmt.Errorf("soak: cancel share %v: want 0 to below 1", c.CancelShare)
	}
	if c.MaxOp <= 0 {
		c.MaxOp = time.Minute
	}
	if c.OpTimeout <= c.MaxOp {
		c.OpTimeout = c.MaxOp + 30*time.Second
	}
	if c.OriginTimeout <= 0 {
		c.OriginTimeout = 15 * time.Second
	}
	if c.Out == nil {
		c.Out = os.Stdout
	}
	if c.Progress == nil {
		c.Progress = os.Stderr
	}
	var missing []string
	for _, t := range []string{"xrdcp", "curl", c.Python} {
		if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("soak: clients missing: %s (Debian: xrootd-client, curl, python3-xrootd)", strings.Join(missing, ", "))
	}
	if out, err := exec.Command(c.Python, "-c", "import XRootD.client").CombinedOutput(); err != nil {
		return fmt.Errorf("soak: %s has no XRootD bindings: %w: %s", c.Python, err, out)
	}
	return nil
}

// The phases of a fault cycle, each starting at a fraction of it.
var soakSchedule = []struct {
	at    float64
	phase string
}{
	{0, "steady"},
	{0.15, "sighup"},
	{0.30, "kill-9"},
	{0.45, "origin-stopped"},
	{0.58, "origin-back"},
	{0.68, "full-disk"},
	{0.85, "disk-freed"},
}

// SoakCount counts operations by outcome.
type SoakCount struct {
	Ops       int64 `json:"ops"`
	OK        int64 `json:"ok"`
	Errors    int64 `json:"errors"`
	Cancelled int64 `json:"cancelled"`
	Stuck     int64 `json:"stuck"`
	Wrong     int64 `json:"wrong"`
	Bytes     int64 `json:"bytes_verified"`
}

func (c *SoakCount) add(r soakResult) {
	c.Ops++
	c.Bytes += r.bytes
	switch r.outcome {
	case outOK:
		c.OK++
	case outError:
		c.Errors++
	case outCancelled:
		c.Cancelled++
	case outStuck:
		c.Stuck++
	case outWrong:
		c.Wrong++
	}
}

// SoakDurations are the durations of one client kind's operations that
// were not cancelled, in seconds.
type SoakDurations struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_s"`
	P99 float64 `json:"p99_s"`
	Max float64 `json:"max_s"`
}

func durationsOf(ds []time.Duration) *SoakDurations {
	if len(ds) == 0 {
		return &SoakDurations{}
	}
	v := append([]time.Duration(nil), ds...)
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	q := func(f float64) float64 { return v[min(len(v)-1, int(f*float64(len(v))))].Seconds() }
	return &SoakDurations{N: len(v), P50: q(0.50), P99: q(0.99), Max: v[len(v)-1].Seconds()}
}

// SoakSample is the cache process's resources at one moment.
type SoakSample struct {
	At          float64 `json:"t_s"`
	Phase       string  `json:"phase"`
	Incarnation int     `json:"incarnation"`
	RSS         int64   `json:"rss_bytes"`
	// RAM is the resident part of the cache's RAM arena (cache.ram,
	// hepcache_ram_resident_bytes): it fills up to ram as blocks are cached
	// and is not a leak; the trend check looks at RSS less it.
	RAM        int64 `json:"ram_resident_bytes"`
	FDs        int   `json:"fds"`
	Goroutines int   `json:"goroutines"`
	// DiskReads is the process's count of blocks read back from disk.
	DiskReads int64 `json:"disk_read_blocks"`
}

// SoakResult is the run's outcome (soak.json).
type SoakResult struct {
	Seconds  float64               `json:"seconds"`
	ByClient map[string]*SoakCount `json:"by_client"`
	// ByPhase files each operation under the phase it ended in: the
	// fault that ended it.
	ByPhase map[string]*SoakCount `json:"by_phase"`
	// PhaseOrder lists the phases in the order they came.
	PhaseOrder []string `json:"phase_order"`
	// Errors are the most frequent error texts per phase (that ended them).
	Errors map[string]map[string]int `json:"errors"`
	// Durations are per client kind.
	Durations map[string]*SoakDurations `json:"durations"`
	// DiskReadBlocks is how many blocks the cache read back from disk
	// (all its processes together).
	DiskReadBlocks int64        `json:"disk_read_blocks"`
	Samples        []SoakSample `json:"samples"`
	Restarts       []float64    `json:"restart_s"`
	// Failures say why the run failed; none: it passed.
	Failures []string `json:"failures"`
}

// soakRun is the state of a running soak.
type soakRun struct {
	cfg     SoakConfig
	start   time.Time
	files   []soakFile
	origin  *xrdproc.Server
	cache   *soakCache
	diskDir string // the tmpfs holding the cache ("" without)
	ep      soakEndpoints
	metrics string // http://host:port

	phase atomic.Pointer[string]
	mu    sync.Mutex // protects res and durs
	res   SoakResult
	durs  map[string][]time.Duration
}

// Soak runs the soak and reports it; the error lists its failures.
func Soak(ctx context.Context, cfg SoakConfig) (*SoakResult, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	s := &soakRun{cfg: cfg, res: SoakResult{ByClient: map[string]*SoakCount{}, ByPhase: map[string]*SoakCount{}, Errors: map[string]map[string]int{},
		Durations: map[string]*SoakDurations{}}, durs: map[string][]time.Duration{}}
	if err := s.setUp(); err != nil {
		s.tearDown()
		return nil, err
	}
	if cfg.Smoke {
		defer s.tearDown()
		sm := smoke{ctx: ctx, progress: func(f string, a ...any) { fmt.Fprintf(cfg.Progress, "soak: "+f+"\n", a...) }, file: s.files[0].path}
		if err := sm.read("origin", s.origin.URL); err != nil {
			return nil, err
		}
		return nil, sm.read("hepcache", s.ep.root)
	}
	s.start = time.Now()
	s.setPhase("steady")
	ctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	var wg sync.WaitGroup
	for w := range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.worker(ctx, rand.New(rand.NewPCG(cfg.Seed, uint64(w))))
		}()
	}
	wg.Add(2)
	go func() { defer wg.Done(); s.sample(ctx) }()
	go func() { defer wg.Done(); s.faults(ctx) }()
	wg.Wait()
	s.res.Seconds = time.Since(s.start).Seconds()
	s.finish()
	s.report()
	if b, err := json.MarshalIndent(&s.res, "", "  "); err == nil {
		os.WriteFile(filepath.Join(cfg.Dir, "soak.json"), b, 0o644)
	}
	if len(s.res.Failures) > 0 {
		return &s.res, fmt.Errorf("soak failed: %s", strings.Join(s.res.Failures, "; "))
	}
	return &s.res, nil
}

func (s *soakRun) progress(format string, args ...any) {
	fmt.Fprintf(s.cfg.Progress, "soak %6.1fs: "+format+"\n", append([]any{time.Since(s.start).Seconds()}, args...)...)
}

func (s *soakRun) setPhase(p string) {
	if cur := s.phase.Load(); cur != nil && *cur == p {
		return
	}
	s.phase.Store(&p)
	s.mu.Lock()
	if _, ok := s.res.ByPhase[p]; !ok {
		s.res.ByPhase[p] = &SoakCount{}
		s.res.PhaseOrder = append(s.res.PhaseOrder, p)
	}
	s.mu.Unlock()
	if !s.start.IsZero() {
		s.progress("phase %s", p)
	}
}

func (s *soakRun) fail(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.res.Failures = append(s.res.Failures, fmt.Sprintf(format, args...))
}

// setUp writes the origin's data, starts the origin, mounts the cache's
// tmpfs and starts the cache.
func (s *soakRun) setUp() error {
	cfg := s.cfg
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return err
	}
	data := filepath.Join(cfg.Dir, "origin")
	var total int64
	r := rand.New(rand.NewPCG(cfg.Seed, 0x50a4))
	for i := range cfg.Files {
		size := cfg.MinSize + r.Int64N(cfg.MaxSize-cfg.MinSize+1)
		p := fmt.Sprintf("soak/f%04d.dat", i)
		if err := writeSeeded(filepath.Join(data, p), size); err != nil {
			return err
		}
		s.files = append(s.files, soakFile{path: "/" + p, local: filepath.Join(data, p), size: size})
		total += size
	}
	capacity := int64(float64(total) * cfg.CapacityShare)
	if s.cfg.RAM <= 0 {
		s.cfg.RAM = max(16<<20, capacity/4)
	}
	if s.cfg.RAM >= capacity {
		fmt.Fprintf(cfg.Progress, "soak: warning: ram %d bytes is not below the cache's capacity %d: blocks are rarely read back from disk\n", s.cfg.RAM, capacity)
	}
	var err error
	if s.origin, err = xrdproc.StartOrigin(data); err != nil {
		return err
	}
	cacheRoot := filepath.Join(cfg.Dir, "cache-disk")
	os.MkdirAll(cacheRoot, 0o755)
	if !cfg.NoTmpfs {
		// Room for the capacity and the metadata, which a full disk then
		// fills too: the cache must live through that.
		size := 2*capacity + 16<<20
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d,mode=0755", size), "tmpfs", cacheRoot).CombinedOutput(); err != nil {
			return fmt.Errorf("soak: mount a tmpfs for the cache (needs root; --no-tmpfs skips the full disk phase): %w: %s", err, out)
		}
		s.diskDir = cacheRoot
	}
	// The listening sockets, held here across the cache's restarts as
	// systemd holds those of hepcache.socket.
	addrs := make([]string, 3)
	var sockets []*os.File
	for i := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		f, err := ln.(*net.TCPListener).File()
		ln.Close() // f holds the socket
		if err != nil {
			return err
		}
		addrs[i] = ln.Addr().String()
		sockets = append(sockets, f)
	}
	s.ep = soakEndpoints{root: "root://" + addrs[0], http: "http://" + addrs[1], python: cfg.Python,
		script: filepath.Join(cfg.Dir, "soak.py")}
	s.metrics = "http://" + addrs[2]
	if err := os.WriteFile(s.ep.script, []byte(soakPy), 0o644); err != nil {
		return err
	}
	conf := fmt.Sprintf(`[server]
listen = %q
http_listen = %q
metrics_listen = %q
shutdown_timeout = "5s"
debug_pprof = true
[cache]
dir = %q
ram = "%d"
[origin]
default = "root://%s"
timeout = %q
[space]
capacity = "%d"
`, addrs[0], addrs[1], addrs[2], filepath.Join(cacheRoot, "cache"), s.cfg.RAM, s.origin.Addr, cfg.OriginTimeout.String(), capacity)
	confPath := filepath.Join(cfg.Dir, "hepcache.toml")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return err
	}
	s.cache = &soakCache{bin: cfg.HepcacheBin, args: append([]string{"serve", "--config", confPath}, cfg.CacheFlags...),
		sockets: sockets, logPath: filepath.Join(cfg.Dir, "hepcache.log"), notifyPath: filepath.Join(cfg.Dir, "notify.sock")}
	if _, err := s.cache.start(); err != nil {
		return err
	}
	fmt.Fprintf(cfg.Progress, "soak: %d files, %.0f MB at the origin, cache capacity %.0f MB%s, ram %.0f MB, %d workers, %v (fault cycle %v)\n",
		len(s.files), float64(total)/1e6, float64(capacity)/1e6, map[bool]string{true: " on a tmpfs", false: ""}[s.diskDir != ""],
		float64(s.cfg.RAM)/1e6, cfg.Workers, cfg.Duration, cfg.Cycle)
	return nil
}

// writeSeeded writes size bytes derived from p's name (rewritten only if
// the size differs).
func writeSeeded(p string, size int64) error {
	if st, err := os.Stat(p); err == nil && st.Size() == size {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	seed := sha256.Sum256([]byte(p))
	r := rand.NewChaCha8(seed)
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for left := size; left > 0; {
		k := min(int64(len(buf)), left)
		r.Read(buf[:k])
		if _, err := f.Write(buf[:k]); err != nil {
			f.Close()
			return err
		}
		left -= k
	}
	return f.Close()
}

// worker runs operations until ctx ends.
func (s *soakRun) worker(ctx context.Context, r *rand.Rand) {
	for ctx.Err() == nil {
		op := planOp(r, s.files, s.cfg.CancelShare)
		started := *s.phase.Load()
		res := runOp(ctx, s.ep, op, s.cfg.OpTimeout)
		if ctx.Err() != nil && res.outcome != outOK && res.outcome != outWrong {
			return // ended by the soak's end, not by the cache
		}
		// Filed under the phase it ended in: the fault that ended it.
		phase := *s.phase.Load()
		if phase != started && res.detail != "" {
			res.detail += " (started in " + started + ")"
		}
		s.mu.Lock()
		if res.outcome != outCancelled {
			s.durs[op.kind] = append(s.durs[op.kind], res.dur)
		}
		if s.res.ByClient[op.kind] == nil {
			s.res.ByClient[op.kind] = &SoakCount{}
		}
		s.res.ByClient[op.kind].add(res)
		s.res.ByPhase[phase].add(res)
		if res.outcome == outError {
			if s.res.Errors[phase] == nil {
				s.res.Errors[phase] = map[string]int{}
			}
			if len(s.res.Errors[phase]) < 50 {
				s.res.Errors[phase][res.detail]++
			}
		}
		s.mu.Unlock()
		if res.outcome != outCancelled && res.outcome != outStuck && res.dur > s.cfg.MaxOp {
			s.fail("%s took %.1f s (more than %v), ended in phase %s, started in %s: %s", op.kind, res.dur.Seconds(), s.cfg.MaxOp, phase, started, res.outcome)
			s.progress("SLOW: %s took %.1f s", op.kind, res.dur.Seconds())
		}
		switch res.outcome {
		case outWrong:
			s.fail("wrong bytes in phase %s: %s", phase, res.detail)
			s.progress("WRONG BYTES: %s", res.detail)
		case outStuck:
			s.fail("stuck read in phase %s: %s", phase, res.detail)
			s.progress("STUCK: %s", res.detail)
			s.dumpGoroutines()
		}
	}
}

// dumpGoroutines saves the cache's goroutines (server.debug_pprof).
func (s *soakRun) dumpGoroutines() {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(s.metrics + "/debug/pprof/goroutine?debug=2")
	if err != nil {
		return
	}
	defer resp.Body.Close()
	f, err := os.Create(filepath.Join(s.cfg.Dir, fmt.Sprintf("goroutines-%d.txt", time.Now().Unix())))
	if err != nil {
		return
	}
	io.Copy(f, resp.Body)
	f.Close()
}

// faults runs the schedule: each cycle's phases at their fractions.
func (s *soakRun) faults(ctx context.Context) {
	var ballast string
	for cycle := 0; ; cycle++ {
		base := time.Duration(cycle) * s.cfg.Cycle
		for _, ev := range soakSchedule {
			at := base + time.Duration(ev.at*float64(s.cfg.Cycle))
			if at >= s.cfg.Duration {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(s.start.Add(at))):
			}
			s.setPhase(ev.phase)
			switch ev.phase {
			case "steady", "disk-freed":
				if ballast != "" {
					os.Remove(ballast)
					ballast = ""
				}
			case "sighup":
				if err := s.cache.signal(syscall.SIGHUP); err != nil {
					s.fail("SIGHUP: %v", err)
				}
			case "kill-9":
				d, err := s.cache.restart(syscall.SIGKILL)
				if err != nil {
					s.fail("restart after kill -9: %v", err)
					return
				}
				s.mu.Lock()
				s.res.Restarts = append(s.res.Restarts, d.Seconds())
				s.mu.Unlock()
				s.progress("restarted in %v", d.Round(time.Millisecond))
			case "origin-stopped":
				syscall.Kill(s.origin.PID(), syscall.SIGSTOP)
			case "origin-back":
				syscall.Kill(s.origin.PID(), syscall.SIGCONT)
			case "full-disk":
				if s.diskDir != "" {
					ballast = filepath.Join(s.diskDir, "ballast")
					if n, err := fillDisk(ballast); err != nil {
						s.progress("full disk phase: %v", err)
					} else {
						s.progress("the cache's disk filled by a ballast of %.0f MB", float64(n)/1e6)
					}
				}
			}
		}
	}
}

// fillDisk allocates the file system's free space to p and returns how
// much it took.
func fillDisk(p string) (int64, error) {
	f, err := os.Create(p)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	// In pieces until none fits: blocks purge frees meanwhile are taken
	// too, up to the end of the phase's start.
	var off int64
	for ; ; off += 1 << 20 {
		if err := syscall.Fallocate(int(f.Fd()), 0, off, 1<<20); err != nil {
			if off == 0 {
				return 0, fmt.Errorf("fallocate %s: %w", p, err)
			}
			return off, nil
		}
	}
}

// sample records the cache's RSS, open files and goroutines every 2 s.
func (s *soakRun) sample(ctx context.Context) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	client := &http.Client{Timeout: 5 * time.Second}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pid, inc := s.cache.current()
		if pid == 0 {
			continue
		}
		sm := SoakSample{At: time.Since(s.start).Seconds(), Phase: *s.phase.Load(), Incarnation: inc}
		sm.RSS, _ = procstat.RSS(pid)
		if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
			sm.FDs = len(ents)
		}
		if resp, err := client.Get(s.metrics + "/metrics"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, l := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(l, "go_goroutines "); ok {
					f, _ := strconv.ParseFloat(v, 64)
					sm.Goroutines = int(f)
				}
				if v, ok := strings.CutPrefix(l, "hepcache_ram_resident_bytes "); ok {
					f, _ := strconv.ParseFloat(v, 64)
					sm.RAM = int64(f)
				}
				if v, ok := strings.CutPrefix(l, "hepcache_disk_read_blocks_total "); ok {
					f, _ := strconv.ParseFloat(v, 64)
					sm.DiskReads = int64(f)
				}
			}
		}
		if sm.RSS == 0 || sm.Goroutines == 0 {
			continue // between a kill and a restart
		}
		s.mu.Lock()
		s.res.Samples = append(s.res.Samples, sm)
		s.mu.Unlock()
	}
}

// finish resumes the origin, frees the disk, stops the cache, checks every
// cached block with `hepcache verify` and the resource trends.
func (s *soakRun) finish() {
	syscall.Kill(s.origin.PID(), syscall.SIGCONT)
	if s.diskDir != "" {
		os.Remove(filepath.Join(s.diskDir, "ballast"))
	}
	if err := s.cache.stop(); err != nil {
		s.fail("stop: %v", err)
	}
	out, err := exec.Command(s.cfg.HepcacheBin, "verify", "--cache-dir", filepath.Join(s.cacheRoot(), "cache")).CombinedOutput()
	if err != nil {
		s.fail("hepcache verify after the soak: %v: %s", err, strings.TrimSpace(string(out)))
	}
	s.checkTrends()
	s.mu.Lock()
	for k, ds := range s.durs {
		s.res.Durations[k] = durationsOf(ds)
	}
	perInc := map[int]int64{}
	for _, sm := range s.res.Samples {
		perInc[sm.Incarnation] = max(perInc[sm.Incarnation], sm.DiskReads)
	}
	for _, n := range perInc {
		s.res.DiskReadBlocks += n
	}
	s.mu.Unlock()
	if s.res.DiskReadBlocks == 0 {
		s.fail("no block was read back from disk (ram %d bytes): the disk path was not exercised", s.cfg.RAM)
	}
	s.tearDown()
}

func (s *soakRun) cacheRoot() string { return filepath.Join(s.cfg.Dir, "cache-disk") }

func (s *soakRun) tearDown() {
	if s.cache != nil {
		s.cache.kill()
		s.cache.close()
	}
	if s.origin != nil {
		syscall.Kill(s.origin.PID(), syscall.SIGCONT)
		s.origin.Remove()
	}
	if s.diskDir != "" {
		exec.Command("umount", "-l", s.diskDir).Run()
		s.diskDir = ""
	}
}

// Growth bounds: within one process's life, the last phase's median may
// not exceed the first phase's maximum by more than half plus a slack.
const (
	growRSSSlack       = 64 << 20
	growFDSlack        = 64
	growGoroutineSlack = 100
)

// checkTrends fails the run if a resource grew within one process's life
// (between the first and the last phase it lived through).
func (s *soakRun) checkTrends() {
	byInc := map[int][]SoakSample{}
	for _, sm := range s.res.Samples {
		byInc[sm.Incarnation] = append(byInc[sm.Incarnation], sm)
	}
	for inc, ss := range byInc {
		first, last := ss[0].Phase, ss[len(ss)-1].Phase
		if first == last {
			continue
		}
		var a, b []SoakSample
		for _, sm := range ss {
			switch sm.Phase {
			case first:
				a = append(a, sm)
			case last:
				b = append(b, sm)
			}
		}
		for _, m := range []struct {
			name  string
			get   func(SoakSample) int64
			slack int64
		}{
			{"RSS outside the RAM arena", func(x SoakSample) int64 { return x.RSS - x.RAM }, growRSSSlack},
			{"open files", func(x SoakSample) int64 { return int64(x.FDs) }, growFDSlack},
			{"goroutines", func(x SoakSample) int64 { return int64(x.Goroutines) }, growGoroutineSlack},
		} {
			hi, med := sampleMax(a, m.get), sampleMedian(b, m.get)
			if med > hi+hi/2+m.slack {
				s.fail("%s grew in process %d: median %d in phase %s, at most %d in phase %s", m.name, inc, med, last, hi, first)
			}
		}
	}
}

func sampleMax(ss []SoakSample, get func(SoakSample) int64) int64 {
	var m int64
	for _, x := range ss {
		m = max(m, get(x))
	}
	return m
}

func sampleMedian(ss []SoakSample, get func(SoakSample) int64) int64 {
	v := make([]int64, len(ss))
	for i, x := range ss {
		v[i] = get(x)
	}
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	if len(v) == 0 {
		return 0
	}
	return v[len(v)/2]
}

// report prints the tables.
func (s *soakRun) report() {
	w, r := s.cfg.Out, &s.res
	fmt.Fprintf(w, "\n## hepcache bench soak: %.0f s, %d workers\n\n", r.Seconds, s.cfg.Workers)
	fmt.Fprintf(w, "| client | ops | ok | errors | cancelled | stuck | wrong | MB verified |\n|---|---|---|---|---|---|---|---|\n")
	var all SoakCount
	for _, k := range soakKinds {
		c := r.ByClient[k]
		if c == nil {
			continue
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %d | %.0f |\n", k, c.Ops, c.OK, c.Errors, c.Cancelled, c.Stuck, c.Wrong, float64(c.Bytes)/1e6)
		all.Ops, all.OK, all.Errors, all.Cancelled = all.Ops+c.Ops, all.OK+c.OK, all.Errors+c.Errors, all.Cancelled+c.Cancelled
		all.Stuck, all.Wrong, all.Bytes = all.Stuck+c.Stuck, all.Wrong+c.Wrong, all.Bytes+c.Bytes
	}
	fmt.Fprintf(w, "| all | %d | %d | %d | %d | %d | %d | %.0f |\n\n", all.Ops, all.OK, all.Errors, all.Cancelled, all.Stuck, all.Wrong, float64(all.Bytes)/1e6)
	fmt.Fprintf(w, "| phase | ops | ok | errors | cancelled | stuck | wrong | RSS MB | of which RAM arena MB | open files | goroutines | most frequent error |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range r.PhaseOrder {
		c := r.ByPhase[p]
		var ss []SoakSample
		for _, sm := range r.Samples {
			if sm.Phase == p {
				ss = append(ss, sm)
			}
		}
		rng := func(get func(SoakSample) int64, div float64) string {
			if len(ss) == 0 {
				return "-"
			}
			lo := get(ss[0])
			for _, x := range ss {
				lo = min(lo, get(x))
			}
			return fmt.Sprintf("%.0f-%.0f", float64(lo)/div, float64(sampleMax(ss, get))/div)
		}
		top, n := "", 0
		for e, k := range r.Errors[p] {
			if k > n || k == n && e < top {
				top, n = e, k
			}
		}
		if top != "" {
			top = fmt.Sprintf("%dx %s", n, strings.ReplaceAll(top, "|", "/"))
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %d | %s | %s | %s | %s | %s |\n", p, c.Ops, c.OK, c.Errors, c.Cancelled, c.Stuck, c.Wrong,
			rng(func(x SoakSample) int64 { return x.RSS }, 1e6), rng(func(x SoakSample) int64 { return x.RAM }, 1e6), rng(func(x SoakSample) int64 { return int64(x.FDs) }, 1),
			rng(func(x SoakSample) int64 { return int64(x.Goroutines) }, 1), top)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "| client | operations (not cancelled) | p50 s | p99 s | max s |\n|---|---|---|---|---|\n")
	var maxAll float64
	for _, k := range soakKinds {
		if d := r.Durations[k]; d != nil {
			fmt.Fprintf(w, "| %s | %d | %.2f | %.2f | %.2f |\n", k, d.N, d.P50, d.P99, d.Max)
			maxAll = max(maxAll, d.Max)
		}
	}
	fmt.Fprintln(w)
	for _, d := range r.Restarts {
		fmt.Fprintf(w, "restart after kill -9: serving again in %.2f s\n", d)
	}
	fmt.Fprintf(w, "blocks read back from disk: %d (ram %.0f MB)\n", r.DiskReadBlocks, float64(s.cfg.RAM)/1e6)
	if len(r.Failures) == 0 {
		fmt.Fprintf(w, "PASS: %.0f MB verified byte for byte, longest operation %.1f s (at most %v), no resource grew, hepcache verify clean\n",
			float64(all.Bytes)/1e6, maxAll, s.cfg.MaxOp)
	}
	for _, f := range r.Failures {
		fmt.Fprintf(w, "FAIL: %s\n", f)
	}
}

// soakCache is the hepcache process under test, restarted by the faults.
// As systemd does for a socket-activated Type=notify service, it holds the
// listening sockets (passed with LISTEN_FDS to each process) and learns
// that a process serves from its READY=1 (NOTIFY_SOCKET).
type soakCache struct {
	bin        string
	args       []string
	sockets    []*os.File // root, http, metrics
	logPath    string
	notifyPath string

	notifyOnce sync.Once
	notify     *net.UnixConn
	ready      chan int // pids that sent READY=1

	mu          sync.Mutex // protects the fields below
	cmd         *exec.Cmd
	done        chan struct{}
	incarnation int
}

// listenNotify opens the NOTIFY_SOCKET the processes report to.
func (c *soakCache) listenNotify() error {
	var err error
	c.notifyOnce.Do(func() {
		os.Remove(c.notifyPath)
		c.notify, err = net.ListenUnixgram("unixgram", &net.UnixAddr{Name: c.notifyPath, Net: "unixgram"})
		if err != nil {
			return
		}
		c.ready = make(chan int, 16)
		go func() {
			buf := make([]byte, 4096)
			for {
				n, _, err := c.notify.ReadFromUnix(buf)
				if err != nil {
					return
				}
				for _, l := range strings.Split(string(buf[:n]), "\n") {
					if l == "READY=1" {
						select {
						case c.ready <- 0:
						default:
						}
					}
				}
			}
		}()
	})
	return err
}

// start runs the server with the sockets and waits until it says it is
// ready (connections made before wait in the sockets' backlog).
func (c *soakCache) start() (time.Duration, error) {
	if err := c.listenNotify(); err != nil {
		return 0, fmt.Errorf("notify socket: %w", err)
	}
	for len(c.ready) > 0 { // a READY=1 of an earlier process
		<-c.ready
	}
	t0 := time.Now()
	logf, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	// LISTEN_PID must be the service's own pid: the shell's, which exec
	// keeps.
	cmd := exec.Command("sh", append([]string{"-c", `LISTEN_PID=$$ exec "$0" "$@"`, c.bin}, c.args...)...)
	cmd.ExtraFiles = c.sockets
	cmd.Env = append(os.Environ(), "LISTEN_FDS="+strconv.Itoa(len(c.sockets)), "LISTEN_FDNAMES=root:http:metrics",
		"NOTIFY_SOCKET="+c.notifyPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return 0, fmt.Errorf("start %s: %w", c.bin, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(done) }()
	c.mu.Lock()
	c.cmd, c.done = cmd, done
	c.incarnation++
	c.mu.Unlock()
	select {
	case <-c.ready:
		return time.Since(t0), nil
	case <-done:
		return 0, fmt.Errorf("hepcache exited at start (log: %s)", c.logPath)
	case <-time.After(60 * time.Second):
		return 0, fmt.Errorf("hepcache not ready within 60 s (log: %s)", c.logPath)
	}
}

// close releases the sockets and the notify socket.
func (c *soakCache) close() {
	for _, f := range c.sockets {
		f.Close()
	}
	if c.notify != nil {
		c.notify.Close()
		os.Remove(c.notifyPath)
	}
}

// current is the running process's pid (0: none) and incarnation.
func (c *soakCache) current() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return 0, c.incarnation
	}
	select {
	case <-c.done:
		return 0, c.incarnation
	default:
	}
	return c.cmd.Process.Pid, c.incarnation
}

func (c *soakCache) signal(sig syscall.Signal) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return errors.New("not running")
	}
	return c.cmd.Process.Signal(sig)
}

// restart ends the process with sig and starts it again; it returns how
// long the new one took to serve.
func (c *soakCache) restart(sig syscall.Signal) (time.Duration, error) {
	c.mu.Lock()
	cmd, done := c.cmd, c.done
	c.mu.Unlock()
	cmd.Process.Signal(sig)
	<-done
	return c.start()
}

// stop ends the process with SIGTERM (its shutdown_timeout is 5 s).
func (c *soakCache) stop() error {
	c.mu.Lock()
	cmd, done := c.cmd, c.done
	c.mu.Unlock()
	if cmd == nil {
		return nil
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		if st := cmd.ProcessState; st != nil && !st.Success() {
			return fmt.Errorf("hepcache exited with %v after SIGTERM (log: %s)", st, c.logPath)
		}
		return nil
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("hepcache still running 60 s after SIGTERM (log: %s)", c.logPath)
	}
}

func (c *soakCache) kill() {
	c.mu.Lock()
	cmd, done := c.cmd, c.done
	c.mu.Unlock()
	if cmd != nil {
		cmd.Process.Kill()
		<-done
	}
}
