package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/procstat"
	"github.com/hepcache/hepcache/internal/xrdproc"
)

// ThroughputConfig configures the throughput benchmark: a C++ xrootd origin,
// XCache 5.5.3 and hepcache on loopback, read with the real xrdcp.
type ThroughputConfig struct {
	// Dir holds the datasets and cache directories. Required.
	Dir string
	// BigSize is the single-stream file. Default 1 GiB.
	BigSize int64
	// ParFiles files of ParSize are read in parallel. Default 16 x 64 MiB.
	ParFiles int
	ParSize  int64
	// WorkFiles files of WorkSize, read all at once, are the working set:
	// larger than the old default cache.ram (an eighth of memory, at most
	// 4 GiB), smaller than memory. Default 5 x 1 GiB.
	WorkFiles int
	WorkSize  int64
	// Sets are the datasets timed: single, parallel, working-set. Default
	// all three.
	Sets []string
	// MemClients are the numbers of concurrent cold clients, each on its
	// own file of MemSize, at which memory is sampled. Default 16 and 128,
	// 16 MiB each.
	MemClients []int
	MemSize    int64
	// Reads are the read modes timed: "pgread" (xrdcp's default) and
	// "read" (plain kXR_read, as ROOT's TTreeCache and uproot read: xrdcp
	// with XRD_CPUSEPGWRTRD=0). Default both.
	Reads []string
	// Repeat is how often each timing is taken (median reported).
	// Default 3.
	Repeat int
	// HepcacheBin is the binary run as the cache. Default: this executable.
	HepcacheBin string
	// NoXCache skips the XCache anchor.
	NoXCache bool
	// NoS3 skips the S3 origin rows (versitygw; left out anyway when it
	// is not installed, except in CI).
	NoS3 bool
	// CacheFlags are extra `hepcache serve` flags.
	CacheFlags []string
	// Smoke starts every server (origin, caches, S3) and reads one small
	// file through each, measuring nothing.
	Smoke bool
	// Out receives the report, Progress the progress lines.
	Out, Progress io.Writer
}

func (c *ThroughputConfig) defaults() error {
	if c.Dir == "" {
		return fmt.Errorf("bench: a results/work directory is required")
	}
	if c.Smoke {
		c.BigSize, c.ParFiles, c.ParSize, c.WorkFiles, c.WorkSize, c.MemClients, c.MemSize = 1<<20, 1, 1<<20, 1, 1<<20, []int{1}, 1<<20
	}
	if c.BigSize == 0 {
		c.BigSize = 1 << 30
	}
	if c.ParFiles == 0 {
		c.ParFiles = 16
	}
	if c.ParSize == 0 {
		c.ParSize = 64 << 20
	}
	if c.WorkFiles == 0 {
		c.WorkFiles = 5
	}
	if c.WorkSize == 0 {
		c.WorkSize = 1 << 30
	}
	if len(c.Sets) == 0 {
		c.Sets = []string{"single", "parallel", "working-set"}
	}
	for _, set := range c.Sets {
		if set != "single" && set != "parallel" && set != "working-set" {
			return fmt.Errorf("set %q: want single, parallel or working-set", set)
		}
	}
	if len(c.MemClients) == 0 {
		c.MemClients = []int{16, 128}
	}
	if c.MemSize == 0 {
		c.MemSize = 16 << 20
	}
	if c.Repeat == 0 {
		c.Repeat = 3
	}
	if len(c.Reads) == 0 {
		c.Reads = []string{"pgread", "read"}
	}
	for _, r := range c.Reads {
		if r != "read" && r != "pgread" {
			return fmt.Errorf("read mode %q: want read or pgread", r)
		}
	}
	if c.HepcacheBin == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		c.HepcacheBin = exe
	}
	if c.Out == nil {
		c.Out = os.Stdout
	}
	if c.Progress == nil {
		c.Progress = os.Stderr
	}
	return nil
}

// ThroughputResult holds every figure of one run.
type ThroughputResult struct {
	// Seconds[target][case] is the median wall time; targets are "direct",
	// "hepcache", "xcache"; cases "MODE:SET-PASS" for each read mode, SET
	// single or parallel, PASS cold (first read), hot (second), hot-ram
	// (third: for hepcache, a file read again is in its RAM cache's main
	// part) and hot-disk (the cache restarted on its directory, the page
	// cache dropped: read back from disk). Direct has "MODE:SET".
	Seconds map[string]map[string]float64 `json:"seconds"`
	// CPU[target][case] is the cache process's CPU per GiB (median) in
	// that pass; for direct, the C++ origin's.
	CPU map[string]map[string]float64 `json:"cpu_s_per_gib"`
	// Floor is what this machine's data path steps cost (bench floor).
	Floor *FloorResult `json:"floor,omitempty"`
	// HotFloor[target][MODE:SET] is the hot floor (HotFloor) measured
	// right after each hot-ram pass of that target (median): what its hot
	// and hot-ram CPU are compared with, as the send cost of this VM
	// drifts between the floor at the start and a pass minutes later.
	HotFloor map[string]map[string]float64 `json:"hot_floor_s_per_gib"`
	// DiskFloor[MODE:SET] is the disk's O_DIRECT read rate at DiskDepth
	// measured right after each of hepcache's hot-disk passes (median
	// wall s/GiB): what its read back is compared with.
	DiskFloor map[string]float64 `json:"disk_floor_s_per_gib"`
	// DroppedCaches says the page cache was dropped before the hot-disk
	// pass (needs root).
	DroppedCaches bool `json:"dropped_caches"`
	// DiskDepth is the read depth hepcache uses on the benchmark's disk
	// (cache.disk_read_depth sized to the device), DiskRate its O_DIRECT
	// read rate at that depth as bench floor measured it (s/GiB).
	DiskDepth int     `json:"disk_depth"`
	DiskRate  float64 `json:"disk_s_per_gib"`
	// Ratios[target][case] is the time relative to the direct read in the
	// same mode.
	Ratios map[string]map[string]float64 `json:"ratios"`
	// MemoryGrowth[target][N] is the peak resident memory above the idle
	// process with N concurrent cold clients, in bytes.
	MemoryGrowth map[string]map[int]int64 `json:"memory_growth_bytes"`
	// PerClient[target] is the growth per added client between the
	// smallest and largest N, in bytes.
	PerClient map[string]float64 `json:"memory_per_client_bytes"`
	Config    ThroughputConfig   `json:"-"`
}

// Throughput runs the benchmark and prints its report.
func Throughput(ctx context.Context, cfg ThroughputConfig) (_ *ThroughputResult, err error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	w := newWatch(ctx)
	ctx = w.ctx
	defer w.close()
	defer func() { err = w.result(err) }()
	for _, tool := range []string{"xrootd", "xrdcp"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("bench throughput needs %s (Debian xrootd-server, xrootd-client): %w", tool, err)
		}
	}
	progress := func(format string, args ...any) { fmt.Fprintf(cfg.Progress, "bench: "+format+"\n", args...) }
	data := filepath.Join(cfg.Dir, "origin")
	progress("writing datasets under %s", data)
	big, err := writeLoadFiles(data, "big", 1, cfg.BigSize)
	if err != nil {
		return nil, err
	}
	par, err := writeLoadFiles(data, "par", cfg.ParFiles, cfg.ParSize)
	if err != nil {
		return nil, err
	}
	var work []string
	if slices.Contains(cfg.Sets, "working-set") {
		if work, err = writeLoadFiles(data, "work", cfg.WorkFiles, cfg.WorkSize); err != nil {
			return nil, err
		}
	}
	maxN := 0
	for _, n := range cfg.MemClients {
		maxN = max(maxN, n)
	}
	mem, err := writeLoadFiles(data, "mem", maxN+1, cfg.MemSize) // +1 for the warm-up
	if err != nil {
		return nil, err
	}
	origin, err := xrdproc.StartOrigin(data)
	if err != nil {
		return nil, err
	}
	defer origin.Remove()
	w.xrootd("origin", origin)
	progress("origin: C++ xrootd at %s", origin.Addr)
	if cfg.Smoke {
		sm := smoke{ctx: ctx, progress: progress, file: big[0]}
		if err := sm.originThenCaches(w, origin, withXCache(cfg.NoXCache), func(kind string) (*cacheProc, error) {
			return startCacheProc(kind, cfg.HepcacheBin, filepath.Join(cfg.Dir, "cache-"+kind+"-smoke"), origin.Addr, cfg.CacheFlags)
		}); err != nil {
			return nil, err
		}
		if !cfg.NoS3 {
			return nil, smokeS3(sm, cfg.Dir, data, big, cfg.HepcacheBin, cfg.CacheFlags)
		}
		return nil, nil
	}

	progress("measuring this machine's floor (bench floor)")
	floor, err := Floor(FloorConfig{Dir: filepath.Join(cfg.Dir, "floor"), Size: min(cfg.BigSize, 512<<20), Out: io.Discard})
	if err != nil {
		return nil, err
	}
	res := &ThroughputResult{
		Floor:        floor,
		HotFloor:     map[string]map[string]float64{},
		DiskFloor:    map[string]float64{},
		DiskDepth:    diskDepthFor(cfg.Dir),
		CPU:          map[string]map[string]float64{"direct": {}},
		Seconds:      map[string]map[string]float64{"direct": {}},
		Ratios:       map[string]map[string]float64{},
		MemoryGrowth: map[string]map[int]int64{},
		PerClient:    map[string]float64{},
		Config:       cfg,
	}
	direct := "root://" + origin.Addr
	res.DiskRate = floor.DiskReadWall(res.DiskDepth)
	var sets []struct {
		name  string
		files []string
	}
	for _, set := range cfg.Sets {
		files := map[string][]string{"single": big, "parallel": par, "working-set": work}[set]
		sets = append(sets, struct {
			name  string
			files []string
		}{set, files})
	}
	gibOf := func(files []string) float64 { return float64(int64(len(files))*sizeOf(data, files[0])) / (1 << 30) }
	for _, mode := range cfg.Reads {
		for _, c := range sets {
			k := mode + ":" + c.name
			var cpus []float64
			if res.Seconds["direct"][k], err = median(cfg.Repeat, func() (float64, error) {
				c0, _ := procstat.CPU(origin.PID())
				secs, err := xrdcpMode(ctx, mode, direct, c.files)
				c1, _ := procstat.CPU(origin.PID())
				cpus = append(cpus, (c1-c0).Seconds()/gibOf(c.files))
				return secs, err
			}); err != nil {
				return nil, fmt.Errorf("direct %s: %w", k, err)
			}
			res.CPU["direct"][k] = medianOf(cpus)
		}
		for _, c := range sets {
			progress("direct %s %s: %.2fs", mode, c.name, res.Seconds["direct"][mode+":"+c.name])
		}
	}

	targets := withXCache(cfg.NoXCache)
	run := 0
	start := func(target string, extra ...string) (*cacheProc, error) {
		run++
		c, err := startCacheProc(target, cfg.HepcacheBin, filepath.Join(cfg.Dir, fmt.Sprintf("cache-%s-%d", target, run)), origin.Addr, append(append([]string(nil), cfg.CacheFlags...), extra...))
		return w.cache(c), err
	}
	for _, target := range targets {
		res.Seconds[target] = map[string]float64{}
		res.CPU[target] = map[string]float64{}
		res.HotFloor[target] = map[string]float64{}
		for _, mode := range cfg.Reads {
			for _, c := range sets {
				secs, cpus := map[string][]float64{}, map[string][]float64{}
				var hotFloors, diskFloors []float64
				for i := 0; i < cfg.Repeat; i++ {
					cu, err := start(target)
					if err != nil {
						return nil, fmt.Errorf("%s: %w", target, err)
					}
					pass := func(name string) error {
						c0, _ := procstat.CPU(cu.pid)
						t, err := xrdcpMode(ctx, mode, cu.url(), c.files)
						c1, _ := procstat.CPU(cu.pid)
						secs[name] = append(secs[name], t)
						cpus[name] = append(cpus[name], (c1-c0).Seconds()/gibOf(c.files))
						return err
					}
					err = pass("cold")
					if err == nil {
						err = pass("hot")
					}
					if err == nil {
						err = pass("hot-ram")
					}
					if err == nil {
						var hf float64
						hf, err = HotFloor(min(cfg.BigSize, 512<<20))
						hotFloors = append(hotFloors, hf)
					}
					if err == nil {
						cu.halt()
						res.DroppedCaches = dropPageCache() == nil
						if cu, err = cu.restart(); err == nil {
							w.cache(cu)
							err = pass("hot-disk")
						}
						if err == nil && target == "hepcache" {
							var df float64
							df, err = DiskFloor(filepath.Join(cfg.Dir, "floor"), min(cfg.BigSize, 512<<20), res.DiskDepth)
							diskFloors = append(diskFloors, df)
						}
					}
					if cu != nil {
						cu.stop()
					}
					if err != nil {
						return nil, fmt.Errorf("%s %s %s: %w", target, mode, c.name, err)
					}
				}
				k := mode + ":" + c.name
				res.HotFloor[target][k] = medianOf(hotFloors)
				if target == "hepcache" {
					res.DiskFloor[k] = medianOf(diskFloors)
				}
				for name := range secs {
					res.Seconds[target][k+"-"+name] = medianOf(secs[name])
					res.CPU[target][k+"-"+name] = medianOf(cpus[name])
				}
				progress("%s %s %s: cold %.2fs %.2f cpu-s/GiB, hot %.2fs %.2f, hot-ram %.2fs %.2f, hot-disk %.2fs %.2f", target, mode, c.name,
					res.Seconds[target][k+"-cold"], res.CPU[target][k+"-cold"], res.Seconds[target][k+"-hot"], res.CPU[target][k+"-hot"],
					res.Seconds[target][k+"-hot-ram"], res.CPU[target][k+"-hot-ram"], res.Seconds[target][k+"-hot-disk"], res.CPU[target][k+"-hot-disk"])
			}
		}
		res.MemoryGrowth[target] = map[int]int64{}
		for _, n := range cfg.MemClients {
			var flags []string
			metricsURL := ""
			if target == "hepcache" {
				addr, err := freeAddr()
				if err != nil {
					return nil, err
				}
				flags, metricsURL = []string{"--metrics-listen", addr}, "http://"+addr+"/metrics"
			}
			cu, err := start(target, flags...)
			if err != nil {
				return nil, err
			}
			// One small warm-up read so that lazily started pools count in
			// the idle baseline, not in the per-client growth.
			if _, err := xrdcpAll(ctx, cu.url(), mem[:1]); err != nil {
				cu.stop()
				return nil, fmt.Errorf("%s warm-up: %w", target, err)
			}
			time.Sleep(300 * time.Millisecond)
			idle, _ := procstat.RSS(cu.pid)
			if metricsURL != "" {
				// Idle outside the RAM arena, as the peak is measured.
				quiet := sampleOutsideRAM(cu.pid, metricsURL)
				time.Sleep(120 * time.Millisecond)
				idle, _ = quiet()
			}
			s := procstat.Start(cu.pid, 20*time.Millisecond)
			outside := sampleOutsideRAM(cu.pid, metricsURL)
			_, err = xrdcpAll(ctx, cu.url(), mem[1:min(n+1, len(mem))])
			peak, _, _ := s.Stop()
			peakOutside, _ := outside()
			cu.stop()
			if err != nil {
				return nil, fmt.Errorf("%s memory with %d clients: %w", target, n, err)
			}
			if metricsURL != "" {
				// The RAM arena (cache.ram) is the configured block memory,
				// as XCache's pfc.ram: what grows with clients is the rest.
				peak = peakOutside
			}
			res.MemoryGrowth[target][n] = peak - idle
			progress("%s memory: %d cold clients: idle %.1f MB, peak %.1f MB", target, n, float64(idle)/1e6, float64(peak)/1e6)
		}
		lo, hi := cfg.MemClients[0], cfg.MemClients[len(cfg.MemClients)-1]
		if hi > lo {
			res.PerClient[target] = float64(res.MemoryGrowth[target][hi]-res.MemoryGrowth[target][lo]) / float64(hi-lo)
		}
		res.Ratios[target] = map[string]float64{}
		for k, v := range res.Seconds[target] {
			res.Ratios[target][k] = v / res.Seconds["direct"][directCase(k)]
		}
	}
	if !cfg.NoS3 {
		if err := throughputS3(ctx, &cfg, res, data, map[string][]string{"single": big, "parallel": par}, progress); err != nil {
			return nil, fmt.Errorf("s3 origin: %w", err)
		}
	}
	printThroughput(cfg.Out, res, targets)
	printThroughputS3(cfg.Out, res)
	if b, err := json.MarshalIndent(res, "", "  "); err == nil {
		os.WriteFile(filepath.Join(cfg.Dir, "throughput.json"), b, 0o644)
	}
	return res, nil
}

// directCase is the direct read a cache case is compared with:
// "read:single-hot-ram" -> "read:single".
func directCase(k string) string {
	for _, pass := range []string{"-hot-ram", "-hot-disk", "-cold", "-hot"} {
		if c, ok := strings.CutSuffix(k, pass); ok {
			return c
		}
	}
	return k
}

// sizeOf is the size of file f under dir.
func sizeOf(dir, f string) int64 {
	st, err := os.Stat(filepath.Join(dir, f))
	if err != nil {
		return 0
	}
	return st.Size()
}

// dropPageCache writes back and drops the kernel's page cache (root only),
// so that a read that follows comes from disk.
func dropPageCache() error {
	syscall.Sync()
	return os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0o200)
}

func printThroughput(w io.Writer, r *ThroughputResult, targets []string) {
	cfg := r.Config
	fmt.Fprintf(w, "\nThroughput on loopback, real xrdcp (read: plain kXR_read, XRD_CPUSEPGWRTRD=0, as ROOT and uproot read; pgread: xrdcp's default), C++ xrootd origin; median of %d runs.\n", cfg.Repeat)
	fmt.Fprintf(w, "single: one file of %d MiB; parallel: %d files of %d MiB at once; working-set: %d files of %d MiB at once; ratios against the direct read in the same mode.\n\n", cfg.BigSize>>20, cfg.ParFiles, cfg.ParSize>>20, cfg.WorkFiles, cfg.WorkSize>>20)
	fmt.Fprintln(w, "Passes: cold (first read), hot (second), hot-ram (third: a file read again is in hepcache's RAM cache), hot-disk (the cache restarted on its directory and the page cache dropped: read back from disk).")
	fmt.Fprintf(w, "CPU: the process's user+system seconds per GiB served (direct: the C++ origin's); floor: what this machine's data path steps cost (bench floor): cold %.3f, hot from RAM %.3f, hot from disk %.3f s/GiB.\n\n", r.Floor.Cold, r.Floor.HotRAM, r.Floor.HotDisk)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "read\tcase\tdirect [s]\tdirect cpu\t"+strings.Join(mapStrings(targets, func(t string) string { return t + " [s]\t" + t + "/direct\t" + t + " cpu\t" + t + " cpu/floor" }), "\t")+"\t")
	floorOf := func(t, mode, c string) float64 {
		switch {
		case strings.HasSuffix(c, "-cold"):
			return r.Floor.Cold
		case strings.HasSuffix(c, "-hot-disk"):
			return r.Floor.HotDisk
		}
		if hf := r.HotFloor[t][mode+":"+strings.TrimSuffix(strings.TrimSuffix(c, "-ram"), "-hot")]; hf > 0 {
			return hf
		}
		return r.Floor.HotRAM
	}
	for _, mode := range cfg.Reads {
		for _, set := range cfg.Sets {
			for _, pass := range []string{"cold", "hot", "hot-ram", "hot-disk"} {
				c := set + "-" + pass
				k := mode + ":" + c
				fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t", mode, c, r.Seconds["direct"][directCase(k)], r.CPU["direct"][directCase(k)])
				for _, t := range targets {
					fmt.Fprintf(tw, "%.2f\t%.2fx\t%.2f\t%.2fx\t", r.Seconds[t][k], r.Ratios[t][k], r.CPU[t][k], r.CPU[t][k]/floorOf(t, mode, c))
				}
				fmt.Fprintln(tw)
			}
		}
	}
	tw.Flush()
	fmt.Fprint(w, "Hot floor (write() from memory) measured right after each target's hot-ram passes, which its hot and hot-ram CPU are compared with (median, s/GiB):")
	for _, mode := range cfg.Reads {
		for _, set := range cfg.Sets {
			for _, t := range targets {
				fmt.Fprintf(w, " %s %s %s %.3f;", t, mode, set, r.HotFloor[t][mode+":"+set])
			}
		}
	}
	fmt.Fprintln(w)
	if !r.DroppedCaches {
		fmt.Fprintln(w, "(the page cache could not be dropped before hot-disk: not root; XCache's hot-disk reads may have come from it)")
	}
	fmt.Fprintf(w, "\nMemory: peak resident memory above the idle cache with N concurrent cold clients (own file of %d MiB each); for hepcache, outside its RAM arena (cache.ram: the blocks in flight and cached, a configured amount as XCache's pfc.ram).\n\n", cfg.MemSize>>20)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "N\t")
	for _, t := range targets {
		fmt.Fprintf(tw, "%s [MB]\t", t)
	}
	fmt.Fprintln(tw)
	for _, n := range cfg.MemClients {
		fmt.Fprintf(tw, "%d\t", n)
		for _, t := range targets {
			fmt.Fprintf(tw, "%.1f\t", float64(r.MemoryGrowth[t][n])/1e6)
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprint(tw, "per added client\t")
	for _, t := range targets {
		fmt.Fprintf(tw, "%.2f\t", r.PerClient[t]/1e6)
	}
	fmt.Fprintln(tw)
	tw.Flush()
	fmt.Fprintf(w, "\nRead back from disk (hot-disk): the disk read %.3f s/GiB with O_DIRECT (bench floor at the start, the depth nearest hepcache's %d it measures); at depth %d right after each of hepcache's hot-disk passes (median):", r.DiskRate, r.DiskDepth, r.DiskDepth)
	for _, mode := range cfg.Reads {
		for _, set := range cfg.Sets {
			fmt.Fprintf(w, " %s %s %.3f;", mode, set, r.DiskFloor[mode+":"+set])
		}
	}
	fmt.Fprint(w, "\nhepcache's read back against the rate measured next to it:")
	for _, mode := range cfg.Reads {
		for _, set := range cfg.Sets {
			k := mode + ":" + set + "-hot-disk"
			gib := float64(cfg.BigSize) / (1 << 30)
			switch set {
			case "parallel":
				gib = float64(int64(cfg.ParFiles)*cfg.ParSize) / (1 << 30)
			case "working-set":
				gib = float64(int64(cfg.WorkFiles)*cfg.WorkSize) / (1 << 30)
			}
			if secs, rate := r.Seconds["hepcache"][k], r.DiskFloor[mode+":"+set]; secs > 0 && rate > 0 {
				fmt.Fprintf(w, " %s %s %.0f %%;", mode, set, 100*rate*gib/secs)
			}
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "\nhepcache targets: cold <= 1.3x direct, hot and hot-ram <= 1.1x direct and <= XCache's, <= 1.5 MB per added cold client; CPU <= 1.25x the floor (cold, hot-ram, hot-disk); hot-disk >= 90 % of the disk's O_DIRECT rate at the depth used.")
}

// diskDepthFor is the read depth hepcache sizes for the disk holding dir
// (cache.disk_read_depth's default).
func diskDepthFor(dir string) int {
	os.MkdirAll(dir, 0o755)
	return cache.DiskReadDepthOf(dir)
}

func mapStrings(in []string, f func(string) string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = f(s)
	}
	return out
}

// xrdcpAll copies every file from base with one xrdcp process each, all at
// once, to /dev/null (xrdcp's default pgread), and returns the wall time in
// seconds.
func xrdcpAll(ctx context.Context, base string, files []string) (float64, error) {
	return xrdcpMode(ctx, "pgread", base, files)
}

func median(n int, f func() (float64, error)) (float64, error) {
	v := make([]float64, n)
	for i := range v {
		var err error
		if v[i], err = f(); err != nil {
			return 0, err
		}
	}
	return medianOf(v), nil
}

func medianOf(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}
