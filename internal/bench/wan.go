package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hepcache/hepcache/internal/procstat"
	"github.com/hepcache/hepcache/internal/wan"
	"github.com/hepcache/hepcache/internal/xrdproc"
)

// WANConfig configures `hepcache bench wan`: many clients at once reading
// cold and hot through a cache whose origin is a real C++ xrootd behind an
// emulated wide-area link (user-space delay line), against reading the
// origin directly over the same link.
type WANConfig struct {
	Dir         string
	HepcacheBin string
	// RTTs, Clients and Bandwidths (bytes/s, 0: unlimited) span the
	// matrix; Reads are "read" (plain kXR_read, as ROOT's TTreeCache and
	// uproot issue it: xrdcp with XRD_CPUSEPGWRTRD=0) and/or "pgread"
	// (xrdcp's default); Caches are "hepcache" and/or "xcache".
	RTTs       []time.Duration
	Clients    []int
	Bandwidths []int64
	Reads      []string
	Caches     []string
	// FileSize is what each client reads (one file per client).
	FileSize int64
	// CacheFlags are extra `hepcache serve` flags (defaults as shipped
	// when empty).
	CacheFlags []string
	// Origins are "xrootd" (a C++ xrootd, against which the Caches are
	// compared in the Reads) and/or "s3" (versitygw: the bucket read
	// directly with curl against hepcache read with curl and plain
	// xrdcp; left out when versitygw is not installed, except in CI).
	// Default both.
	Origins []string
	// LinkProcess runs the emulated link in a process of its own (`bench
	// link`) instead of in the benchmark's: its CPU then competes with the
	// cache's as a router's would not, but the benchmark's goroutines do
	// not share a runtime with it.
	LinkProcess bool
	// NoWarmup measures each cache process fresh. By default each first
	// reads other files of the same count and size (a warm-up pass, not
	// timed), so that the cold pass shows a cache that has been running:
	// a fresh process first touches the memory it holds blocks in, which
	// on a VM whose host takes freed pages back costs as much as a buffered
	// write (bench floor), once.
	NoWarmup bool
	// Smoke starts every server (origin, link, caches, S3) and reads one
	// small file through each, measuring nothing.
	Smoke    bool
	Out      io.Writer
	Progress io.Writer
}

// WANRow is one cell: a reader mode, clients, link and target.
type WANRow struct {
	Read      string  `json:"read"`
	Clients   int     `json:"clients"`
	RTTms     float64 `json:"rtt_ms"`
	Bandwidth int64   `json:"bandwidth"`
	Target    string  `json:"target"`
	Cold      float64 `json:"cold_s"`
	Hot       float64 `json:"hot_s,omitempty"`
	// ColdRatio and HotRatio are against the direct read in the same
	// mode; ColdVsFastest against the faster of the two direct modes.
	ColdRatio     float64 `json:"cold_ratio,omitempty"`
	HotRatio      float64 `json:"hot_ratio,omitempty"`
	ColdVsFastest float64 `json:"cold_vs_fastest_direct,omitempty"`
	// PeakRSS (bytes) and CPUPerGiB (seconds) of the cache process during
	// the cold pass; for a direct row, CPUPerGiB is the C++ origin's during
	// the direct read: what serving the bytes from the page cache alone
	// costs on this machine, the anchor for a cache's CPU (which also
	// receives every byte and writes it to disk).
	PeakRSS   int64   `json:"peak_rss_bytes,omitempty"`
	CPUPerGiB float64 `json:"cpu_s_per_gib,omitempty"`
	// OutsideRAM (hepcache) is the peak of RSS less the part of its RAM
	// arena (cache.ram) in use at the same moment: the process's memory
	// beyond the blocks it holds (in flight and cached); PerClientRSS is
	// that per client. RAMResident is the arena's part of the RSS at the end (mincore).
	OutsideRAM   int64 `json:"rss_outside_ram_bytes,omitempty"`
	PerClientRSS int64 `json:"rss_outside_ram_per_client_bytes,omitempty"`
	RAMResident  int64 `json:"ram_resident_bytes,omitempty"`
	// IdleRSS is the cache process's RSS before the cold pass, and
	// MarginalRSS the peak outside the arena above it, per client: what
	// one more concurrent client costs, without the process's fixed
	// footprint (binary, runtime).
	IdleRSS     int64 `json:"idle_rss_bytes,omitempty"`
	MarginalRSS int64 `json:"rss_outside_ram_per_client_above_idle_bytes,omitempty"`
	// FirstTouched (hepcache) is how much the RAM arena grew during the
	// cold pass: memory touched for the first time, which a cache that
	// has run long enough to fill its RAM reuses instead (its cost, on a
	// VM whose host takes freed pages back, is bench floor's first touch).
	FirstTouched int64 `json:"first_touched_bytes,omitempty"`
}

func (c *WANConfig) defaults() error {
	if c.Smoke {
		c.Clients, c.FileSize, c.NoWarmup = []int{1}, 1<<20, true
	}
	if len(c.RTTs) == 0 {
		c.RTTs = []time.Duration{0, 150 * time.Millisecond}
	}
	if len(c.Clients) == 0 {
		c.Clients = []int{1, 8}
	}
	if len(c.Bandwidths) == 0 {
		c.Bandwidths = []int64{0}
	}
	if len(c.Reads) == 0 {
		c.Reads = []string{"read", "pgread"}
	}
	if len(c.Caches) == 0 {
		c.Caches = []string{"hepcache", "xcache"}
	}
	if c.FileSize == 0 {
		c.FileSize = 64 << 20
	}
	if len(c.Origins) == 0 {
		c.Origins = []string{"xrootd", "s3"}
	}
	for _, o := range c.Origins {
		if o != "xrootd" && o != "s3" {
			return fmt.Errorf("origin %q: want xrootd or s3", o)
		}
	}
	if c.Out == nil {
		c.Out = os.Stdout
	}
	if c.Progress == nil {
		c.Progress = os.Stderr
	}
	if c.HepcacheBin == "" {
		bin, err := os.Executable()
		if err != nil {
			return err
		}
		c.HepcacheBin = bin
	}
	for _, r := range c.Reads {
		if r != "read" && r != "pgread" {
			return fmt.Errorf("read mode %q: want read or pgread", r)
		}
	}
	return nil
}

// WAN runs the matrix and prints a table per link.
func WAN(ctx context.Context, cfg WANConfig) (_ []WANRow, err error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	w := newWatch(ctx)
	ctx = w.ctx
	defer w.close()
	defer func() { err = w.result(err) }()
	progress := func(format string, args ...any) { fmt.Fprintf(cfg.Progress, "bench: "+format+"\n", args...) }
	maxN := 0
	for _, n := range cfg.Clients {
		maxN = max(maxN, n)
	}
	data := filepath.Join(cfg.Dir, "origin")
	files, err := writeLoadFiles(data, "wan", maxN, cfg.FileSize)
	if err != nil {
		return nil, err
	}
	var warm []string
	if !cfg.NoWarmup {
		if warm, err = writeLoadFiles(data, "wanwarm", maxN, cfg.FileSize); err != nil {
			return nil, err
		}
	}
	var origin *xrdproc.Server
	if slices.Contains(cfg.Origins, "xrootd") {
		if origin, err = xrdproc.StartOrigin(data); err != nil {
			return nil, err
		}
		defer origin.Remove()
		w.xrootd("origin", origin)
	}
	if cfg.Smoke {
		return nil, wanSmoke(smoke{ctx: ctx, progress: progress, file: files[0]}, w, &cfg, origin, data, files)
	}
	var s3o *s3Origin
	if slices.Contains(cfg.Origins, "s3") {
		if s3o, err = startS3Origin(cfg.Dir, data, files, progress); err != nil {
			return nil, err
		}
		if s3o != nil {
			defer s3o.stop()
		}
	}
	progress("measuring this machine's floor (bench floor)")
	floor, err := Floor(FloorConfig{Dir: filepath.Join(cfg.Dir, "floor"), Size: 512 << 20, Out: io.Discard})
	if err != nil {
		return nil, err
	}
	var rows []WANRow
	run := 0
	for _, rtt := range cfg.RTTs {
		for _, bw := range cfg.Bandwidths {
			if s3o != nil {
				for _, n := range cfg.Clients {
					r, err := wanS3(ctx, &cfg, s3o, rtt, bw, files[:n], &run, progress)
					if err != nil {
						return nil, err
					}
					rows = append(rows, r...)
				}
			}
			if origin == nil {
				continue
			}
			link, err := newLink(&cfg, origin.Addr, rtt, bw)
			if err != nil {
				return nil, err
			}
			for _, n := range cfg.Clients {
				direct := map[string]float64{}
				gib := float64(int64(n)*cfg.FileSize) / (1 << 30)
				for _, mode := range cfg.Reads {
					cpu0, _ := procstat.CPU(origin.PID())
					secs, err := xrdcpMode(ctx, mode, "root://"+link.Addr(), files[:n])
					if err != nil {
						link.Close()
						return nil, fmt.Errorf("direct %s: %w", mode, err)
					}
					cpu1, _ := procstat.CPU(origin.PID())
					direct[mode] = secs
					r := WANRow{Read: mode, Clients: n, RTTms: ms(rtt), Bandwidth: bw, Target: "direct", Cold: secs,
						CPUPerGiB: (cpu1 - cpu0).Seconds() / gib}
					rows = append(rows, r)
					progress("rtt %v bw %d %s x%d direct %.2fs, origin cpu %.2f s/GiB", rtt, bw, mode, n, secs, r.CPUPerGiB)
				}
				fastest := 0.0
				for _, v := range direct {
					if fastest == 0 || v < fastest {
						fastest = v
					}
				}
				for _, kind := range cfg.Caches {
					for _, mode := range cfg.Reads {
						run++
						flags, metricsURL := cfg.CacheFlags, ""
						if kind == "hepcache" {
							addr, err := freeAddr()
							if err != nil {
								link.Close()
								return nil, err
							}
							flags = append(append([]string(nil), flags...), "--metrics-listen", addr)
							metricsURL = "http://" + addr + "/metrics"
						}
						cp, err := startCacheProc(kind, cfg.HepcacheBin, filepath.Join(cfg.Dir, fmt.Sprintf("cache-%s-%d", kind, run)), link.Addr(), flags)
						if err != nil {
							link.Close()
							return nil, err
						}
						w.cache(cp)
						if warm != nil {
							if _, err := xrdcpMode(ctx, mode, cp.url(), warm[:n]); err != nil {
								cp.stop()
								link.Close()
								return nil, fmt.Errorf("%s %s x%d warm-up: %w", kind, mode, n, err)
							}
						}
						cpu0, _ := procstat.CPU(cp.pid)
						idle, _ := procstat.RSS(cp.pid)
						res0 := scrapeGauge(metricsURL, "hepcache_ram_resident_bytes")
						s := procstat.Start(cp.pid, 50*time.Millisecond)
						excl := sampleOutsideRAM(cp.pid, metricsURL)
						cold, err := xrdcpMode(ctx, mode, cp.url(), files[:n])
						peak, _, _ := s.Stop()
						peakExcl, touched := excl()
						cpu1, _ := procstat.CPU(cp.pid)
						var hot float64
						if err == nil {
							hot, err = xrdcpMode(ctx, mode, cp.url(), files[:n])
						}
						cp.stop()
						if err != nil {
							link.Close()
							return nil, fmt.Errorf("%s %s x%d: %w", kind, mode, n, err)
						}
						r := WANRow{Read: mode, Clients: n, RTTms: ms(rtt), Bandwidth: bw, Target: kind, Cold: cold, Hot: hot,
							ColdRatio: cold / direct[mode], HotRatio: hot / direct[mode], ColdVsFastest: cold / fastest,
							PeakRSS: peak, CPUPerGiB: (cpu1 - cpu0).Seconds() / gib}
						if metricsURL != "" {
							r.OutsideRAM, r.PerClientRSS, r.RAMResident = peakExcl, peakExcl/int64(n), touched
							r.IdleRSS, r.MarginalRSS = idle, max(peakExcl-idle, 0)/int64(n)
							r.FirstTouched = max(0, touched-res0)
						}
						rows = append(rows, r)
						progress("rtt %v bw %d %s x%d %s cold %.2fs (%.2fx) hot %.2fs (%.2fx) rss %.0f MB cpu %.2f s/GiB",
							rtt, bw, mode, n, kind, cold, r.ColdRatio, hot, r.HotRatio, float64(peak)/1e6, r.CPUPerGiB)
					}
				}
			}
			link.Close()
		}
	}
	printWAN(cfg.Out, rows, cfg, floor)
	if b, err := json.MarshalIndent(rows, "", "  "); err == nil {
		os.WriteFile(filepath.Join(cfg.Dir, "wan.json"), b, 0o644)
	}
	return rows, nil
}

// xrdcpMode copies every file from base with one real xrdcp each, all at
// once, to /dev/null: mode "read" makes xrdcp issue plain kXR_read (as
// ROOT and uproot do), "pgread" is its default. It returns the wall time.
func xrdcpMode(ctx context.Context, mode, base string, files []string) (float64, error) {
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []string
	for _, f := range files {
		wg.Add(1)
		go func(f string) {
			defer wg.Done()
			cmd := xrdcp(ctx, base+"/"+f, "/dev/null")
			if mode == "read" {
				cmd.Env = append(cmd.Env, "XRD_CPUSEPGWRTRD=0")
			}
			if out, err := cmd.CombinedOutput(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Sprintf("xrdcp %s/%s: %v: %s", base, f, err, out))
				mu.Unlock()
			}
		}(f)
	}
	wg.Wait()
	if len(errs) > 0 {
		return 0, fmt.Errorf("%d of %d copies failed, first: %s", len(errs), len(files), errs[0])
	}
	return time.Since(start).Seconds(), nil
}

func printWAN(w io.Writer, rows []WANRow, cfg WANConfig, floor *FloorResult) {
	fmt.Fprintf(w, "\nbench wan: each client reads its own %d MiB file with xrdcp; C++ xrootd origin behind a user-space delay line; ratios against the direct read in the same mode (and against the faster direct mode)\n",
		cfg.FileSize>>20)
	fmt.Fprintf(w, "S3 origin (versitygw behind the same link): s3-direct is one curl per client reading its object with SigV4; hepcache-s3 is read with curl over HTTP (http) or plain xrdcp (read); ratios against s3-direct\n\n")
	link := "in the benchmark's process"
	if cfg.LinkProcess {
		link = "in a process of its own"
	}
	warmup := "after a warm-up pass over other files (a cache that has been running)"
	if cfg.NoWarmup {
		warmup = "in a fresh process (its first touch of memory included)"
	}
	fmt.Fprintf(w, "Each cache is measured %s. ", warmup)
	fmt.Fprintf(w, "The emulated link runs %s. Memory: peak RSS; outside RAM: peak of RSS less the part of hepcache's RAM arena (cache.ram: blocks in flight and cached) in use; RAM resident: the arena's part of the RSS at the end. CPU: the cache's (direct: the origin's) per GiB; floor (bench floor, this machine): cold %.3f s/GiB.\n\n", link, floor.Cold)
	touchCost := floor.Step(StepFirstTouchHuge)
	fmt.Fprintf(w, "First touch: what the RAM arena grew by during the cold pass (memory a cache whose RAM is full reuses), priced at bench floor's first touch with huge pages, %.3f s/GiB here; CPU less first touch is the cold path's own.\n\n", touchCost)
	fmt.Fprintln(w, "| RTT | bandwidth | read | clients | target | cold [s] | cold/direct | cold/fastest direct | hot [s] | hot/direct | peak RSS [MB] | outside RAM [MB] | outside RAM per client [MB] | RAM resident [MB] | CPU [s/GiB] | CPU/floor | first touch [GiB] | CPU less first touch [s/GiB] |")
	fmt.Fprintln(w, "| ---: | ---: | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.RTTms != b.RTTms {
			return a.RTTms < b.RTTms
		}
		if a.Bandwidth != b.Bandwidth {
			return a.Bandwidth < b.Bandwidth
		}
		if a.Clients != b.Clients {
			return a.Clients < b.Clients
		}
		if as3, bs3 := strings.HasPrefix(a.Target, "s3-") || strings.HasSuffix(a.Target, "-s3"),
			strings.HasPrefix(b.Target, "s3-") || strings.HasSuffix(b.Target, "-s3"); as3 != bs3 {
			return bs3 // the S3 origin's rows after the xrootd origin's
		}
		return a.Read < b.Read
	})
	for _, r := range rows {
		bw := "unlimited"
		if r.Bandwidth > 0 {
			bw = fmt.Sprintf("%.0f Gbit/s", float64(r.Bandwidth)*8/1e9)
		}
		if r.Target == "direct" || r.Target == "s3-direct" {
			fmt.Fprintf(w, "| %.0f ms | %s | %s | %d | %s | %.2f | | | | | | | | | %.2f (origin) | | | |\n", r.RTTms, bw, r.Read, r.Clients, r.Target, r.Cold, r.CPUPerGiB)
			continue
		}
		outside, perClient, touched := "-", "-", "-"
		if r.OutsideRAM != 0 {
			outside = fmt.Sprintf("%.0f", float64(r.OutsideRAM)/1e6)
			perClient = fmt.Sprintf("%.1f", float64(r.PerClientRSS)/1e6)
			touched = fmt.Sprintf("%.0f", float64(r.RAMResident)/1e6)
		}
		first, less := "-", "-"
		if r.FirstTouched > 0 || r.OutsideRAM != 0 {
			gibServed := float64(r.Clients) * float64(cfg.FileSize) / (1 << 30)
			ft := float64(r.FirstTouched) / (1 << 30)
			first = fmt.Sprintf("%.2f", ft)
			less = fmt.Sprintf("%.2f", r.CPUPerGiB-ft*touchCost/gibServed)
		}
		fmt.Fprintf(w, "| %.0f ms | %s | %s | %d | %s | %.2f | %.2fx | %.2fx | %.2f | %.2fx | %.0f | %s | %s | %s | %.2f | %.2fx | %s | %s |\n",
			r.RTTms, bw, r.Read, r.Clients, r.Target, r.Cold, r.ColdRatio, r.ColdVsFastest, r.Hot, r.HotRatio, float64(r.PeakRSS)/1e6, outside, perClient, touched, r.CPUPerGiB, r.CPUPerGiB/floor.Cold, first, less)
	}
}

// freeAddr returns a free loopback address.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// sampleOutsideRAM samples, every 50 ms until the returned function is
// called, the process's RSS less the part of its RAM arena in use
// (hepcache_ram_resident_bytes), and returns the peak of that difference
// and the arena's resident part at the end (0 without a metrics URL). Both
// come from the same scrape (process_resident_memory_bytes is read while
// /metrics is written).
func sampleOutsideRAM(pid int, metricsURL string) func() (peak, touched int64) {
	if metricsURL == "" {
		return func() (int64, int64) { return 0, 0 }
	}
	stop := make(chan struct{})
	done := make(chan [2]int64, 1)
	client := &http.Client{Timeout: time.Second}
	go func() {
		var peak, touched int64
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				done <- [2]int64{peak, touched}
				return
			case <-t.C:
			}
			g, err := scrapeGauges(client, metricsURL, "hepcache_ram_resident_bytes", "hepcache_resident_outside_ram_bytes", "process_resident_memory_bytes")
			if err != nil {
				continue
			}
			if v, ok := g["hepcache_ram_resident_bytes"]; ok {
				touched = v
			}
			if outside, ok := g["hepcache_resident_outside_ram_bytes"]; ok {
				// Read with the arena's part (builds that export it).
				peak = max(peak, outside)
				continue
			}
			rss, ok := g["process_resident_memory_bytes"]
			if !ok {
				if rss, err = procstat.RSS(pid); err != nil {
					continue
				}
			}
			peak = max(peak, rss-touched)
		}
	}()
	return func() (int64, int64) {
		close(stop)
		r := <-done
		return r[0], r[1]
	}
}

// wanLink is the emulated link, in this process or in one of its own.
type wanLink interface {
	Addr() string
	Close()
}

type inlineLink struct{ p *wan.Proxy }

func (l inlineLink) Addr() string { return l.p.Addr().String() }
func (l inlineLink) Close()       { l.p.Close() }

func (l *linkProc) Addr() string { return l.addr }
func (l *linkProc) Close()       { l.close() }

// wanSmoke is bench wan's --smoke: the origin read directly, through the
// link (of the first RTT) and through each cache behind it; the S3 rows'
// servers likewise.
func wanSmoke(sm smoke, w *watch, cfg *WANConfig, origin *xrdproc.Server, data string, files []string) error {
	if origin != nil {
		if err := sm.read("origin", origin.URL); err != nil {
			return err
		}
		link, err := newLink(cfg, origin.Addr, cfg.RTTs[0], cfg.Bandwidths[0])
		if err != nil {
			return fmt.Errorf("--smoke: link: %w", err)
		}
		defer link.Close()
		if err := sm.read(fmt.Sprintf("the origin through the link (rtt %v)", cfg.RTTs[0]), "root://"+link.Addr()); err != nil {
			return err
		}
		if err := sm.caches(w, cfg.Caches, func(kind string) (*cacheProc, error) {
			return startCacheProc(kind, cfg.HepcacheBin, filepath.Join(cfg.Dir, "cache-"+kind+"-smoke"), link.Addr(), cfg.CacheFlags)
		}); err != nil {
			return err
		}
	}
	if slices.Contains(cfg.Origins, "s3") {
		return smokeS3(sm, cfg.Dir, data, files, cfg.HepcacheBin, cfg.CacheFlags)
	}
	return nil
}

func newLink(cfg *WANConfig, target string, rtt time.Duration, bw int64) (wanLink, error) {
	if cfg.LinkProcess {
		return startLinkProc(cfg.HepcacheBin, target, rtt, bw)
	}
	p, err := wan.New(&wan.Config{Target: target, RTT: rtt, Bandwidth: bw})
	if err != nil {
		return nil, err
	}
	return inlineLink{p}, nil
}

// scrapeGauge reads one unlabelled sample of name from a /metrics page
// (0 without a URL or on failure).
func scrapeGauge(metricsURL, name string) int64 {
	if metricsURL == "" {
		return 0
	}
	g, err := scrapeGauges(&http.Client{Timeout: time.Second}, metricsURL, name)
	if err != nil {
		return 0
	}
	return g[name]
}

// scrapeGauges reads the unlabelled samples of names from one scrape of a
// /metrics page, as integers; a name without a sample is not in the map.
func scrapeGauges(client *http.Client, metricsURL string, names ...string) (map[string]int64, error) {
	f, err := scrapeFloats(client, metricsURL, names...)
	g := make(map[string]int64, len(f))
	for k, v := range f {
		g[k] = int64(v)
	}
	return g, err
}

// scrapeFloats reads the unlabelled samples of names from one scrape of a
// /metrics page; a name without a sample is not in the map.
func scrapeFloats(client *http.Client, metricsURL string, names ...string) (map[string]float64, error) {
	resp, err := client.Get(metricsURL)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	g := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		for _, name := range names {
			if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
				g[name], _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
			}
		}
	}
	return g, nil
}
