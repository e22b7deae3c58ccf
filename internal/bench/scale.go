package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/hepcache/hepcache/internal/procstat"
	"github.com/hepcache/hepcache/internal/sim/report"
	"github.com/hepcache/hepcache/internal/xrdproc"
)

// ScaleConfig configures the scale tests of seed 004 (section 4): clients
// reading from a hot cache at a set rate each, first at fixed concurrency
// with the rate varied, then at a fixed total rate with more clients at
// lower rates; reported is the rate delivered against the rate requested.
//
// # Scaling to two cores
//
// UCSD drove an 11-node cache cluster with 1 000 clients (fixed
// concurrency) and 1 000 to 5 000 clients sharing 5 GB/s (fixed total).
// Here one machine with two cores runs the cache, the origin and every
// client, and a hot cache serves from the page cache, not from disks: it
// moves 1 to 1.5 GB/s on loopback. So the client counts and the total rate
// are divided by Scale (default 5): 200 clients at 1 to 8 MB/s each (up to
// 1.6 GB/s, past what the machine moves), and 200 to 1 000 clients sharing
// 1 GB/s; per-client rates stay UCSD's (1 to 5 MB/s; CMS jobs read 1
// MB/s). With Scale 25 (40 clients, 200 MB/s) nothing is stressed and
// every client gets 100 %. Time is compressed too: clients read every
// Interval (default 1 s) instead of every 10 s.
type ScaleConfig struct {
	// Dir is the work and results directory. Required.
	Dir string
	// Scale divides UCSD's client counts and total rate. Default 5.
	Scale float64
	// Clients is the fixed concurrency (default 1000/Scale) and Rates the
	// per-client rates in bytes/s tried with it (default 1, 2, 4, 8 MB/s).
	Clients int
	Rates   []float64
	// TotalRate is the fixed total in bytes/s (default 5 GB/s / Scale) and
	// TotalClients the client counts sharing it (default UCSD's 1000,
	// 2000, 3000, 5000 divided by Scale).
	TotalRate    float64
	TotalClients []int
	// Duration is how long each point runs. Default 8 s.
	Duration time.Duration
	// Interval is the time between one client's reads. Default 1 s.
	Interval time.Duration
	// Files files of FileSize are read (hot in the cache); client i reads
	// file i mod Files. Default 16 files of 32 MiB.
	Files    int
	FileSize int64
	// Caches are the caches measured. Default hepcache and xcache.
	Caches      []string
	HepcacheBin string
	CacheFlags  []string
	// Smoke starts every server and reads one small file through each,
	// measuring nothing.
	Smoke    bool
	Out      io.Writer
	Progress io.Writer
}

func (c *ScaleConfig) ensureDefaults() error {
	if c.Dir == "" {
		return fmt.Errorf("bench scale: a results directory is required")
	}
	if c.Smoke {
		c.Files, c.FileSize = 1, 1<<20
	}
	if c.Scale == 0 {
		c.Scale = 5
	}
	if c.Clients == 0 {
		c.Clients = max(1, int(1000/c.Scale))
	}
	if len(c.Rates) == 0 {
		c.Rates = []float64{1e6, 2e6, 4e6, 8e6}
	}
	if c.TotalRate == 0 {
		c.TotalRate = 5e9 / c.Scale
	}
	if len(c.TotalClients) == 0 {
		for _, n := range []float64{1000, 2000, 3000, 5000} {
			c.TotalClients = append(c.TotalClients, max(1, int(n/c.Scale)))
		}
	}
	if c.Duration == 0 {
		c.Duration = 8 * time.Second
	}
	if c.Interval == 0 {
		c.Interval = time.Second
	}
	if c.Files == 0 {
		c.Files = 16
	}
	if c.FileSize == 0 {
		c.FileSize = 32 << 20
	}
	if c.Caches == nil {
		c.Caches = slices.Clone(cacheKinds)
	}
	if c.Out == nil {
		c.Out = os.Stdout
	}
	var err error
	c.HepcacheBin, err = defaultBin(c.HepcacheBin)
	return err
}

// ScalePoint is one cache at one (clients, rate) setting.
type ScalePoint struct {
	Test    string `json:"test"` // "fixed-concurrency" or "fixed-total"
	Clients int    `json:"clients"`
	// RequestedMBps is each client's requested rate; DeliveredMBps the
	// mean delivered; Fraction their ratio (mean over clients of
	// delivered/requested); MinFraction the slowest client's.
	RequestedMBps float64 `json:"requested_mbps"`
	DeliveredMBps float64 `json:"delivered_mbps"`
	Fraction      float64 `json:"fraction"`
	MinFraction   float64 `json:"min_fraction"`
	TotalMBps     float64 `json:"total_mbps"`
	CPUCores      float64 `json:"cache_cpu_cores"`
	PeakRSSMB     float64 `json:"cache_peak_rss_mb"`
	Failed        int     `json:"failed_clients"`
	FirstError    string  `json:"first_error,omitempty"`
}

// ScaleResult holds every point.
type ScaleResult struct {
	Scale     float64                 `json:"scale"`
	Interval  float64                 `json:"interval_s"`
	Duration  float64                 `json:"duration_s"`
	TotalMBps float64                 `json:"fixed_total_mbps"`
	Caches    []string                `json:"caches"`
	Points    map[string][]ScalePoint `json:"points"`
}

// Scale runs the scale tests and writes scale.json, scale.md and the
// figures into cfg.Dir.
func Scale(ctx context.Context, cfg ScaleConfig) (_ *ScaleResult, err error) {
	if err := cfg.ensureDefaults(); err != nil {
		return nil, err
	}
	w := newWatch(ctx)
	ctx = w.ctx
	defer w.close()
	defer func() { err = w.result(err) }()
	if err := needTools("scale", "xrootd"); err != nil {
		return nil, err
	}
	progress := progressFunc(cfg.Progress, "scale")
	data := filepath.Join(cfg.Dir, "origin")
	files, err := writeLoadFiles(data, "scale", cfg.Files, cfg.FileSize)
	if err != nil {
		return nil, err
	}
	origin, err := xrdproc.StartOrigin(data)
	if err != nil {
		return nil, err
	}
	defer origin.Remove()
	w.xrootd("origin", origin)
	if cfg.Smoke {
		sm := smoke{ctx: ctx, progress: progress, file: files[0]}
		return nil, sm.originThenCaches(w, origin, cfg.Caches, func(kind string) (*cacheProc, error) {
			return startCacheProc(kind, cfg.HepcacheBin, filepath.Join(cfg.Dir, "cache-"+kind+"-smoke"), origin.Addr, cfg.CacheFlags)
		})
	}
	res := &ScaleResult{Scale: cfg.Scale, Interval: cfg.Interval.Seconds(), Duration: cfg.Duration.Seconds(), TotalMBps: cfg.TotalRate / 1e6,
		Caches: cfg.Caches, Points: map[string][]ScalePoint{}}
	for _, kind := range cfg.Caches {
		dir := filepath.Join(cfg.Dir, "cache-"+kind)
		c, err := startCacheProc(kind, cfg.HepcacheBin, dir, origin.Addr, cfg.CacheFlags)
		if err != nil {
			return nil, err
		}
		w.cache(c)
		// Hot cache, as at UCSD: read every file once first.
		var warm []pacedRead
		for _, f := range files {
			warm = append(warm, pacedRead{addr: c.addr, path: f, chunk: 1 << 20, total: cfg.FileSize})
		}
		for _, r := range runPaced(ctx, warm) {
			if r.Err != nil {
				c.stop()
				return nil, fmt.Errorf("warm %s: %w", kind, r.Err)
			}
		}
		time.Sleep(500 * time.Millisecond)
		progress("%s: %d files of %d MiB hot", kind, len(files), cfg.FileSize>>20)
		point := func(test string, n int, rate float64) error {
			p := scalePoint(ctx, cfg, c, files, test, n, rate)
			res.Points[kind] = append(res.Points[kind], p)
			progress("%-8s %-17s %4d clients at %5.2f MB/s: delivered %5.2f MB/s (%3.0f %%, slowest %3.0f %%), total %6.1f MB/s, cache CPU %.2f cores, %d failed",
				kind, test, n, rate/1e6, p.DeliveredMBps, 100*p.Fraction, 100*p.MinFraction, p.TotalMBps, p.CPUCores, p.Failed)
			return nil
		}
		for _, rate := range cfg.Rates {
			point("fixed-concurrency", cfg.Clients, rate)
		}
		for _, n := range cfg.TotalClients {
			point("fixed-total", n, cfg.TotalRate/float64(n))
		}
		c.stop()
	}
	md := res.markdown(cfg)
	if err := writeResults(cfg.Dir, "scale", res, md, res.charts()); err != nil {
		return nil, err
	}
	cfg.Out.Write(md)
	progress("results in %s", cfg.Dir)
	return res, nil
}

func scalePoint(ctx context.Context, cfg ScaleConfig, c *cacheProc, files []string, test string, n int, rate float64) ScalePoint {
	p := ScalePoint{Test: test, Clients: n, RequestedMBps: rate / 1e6}
	// Each read is what the client asks for once per Interval, as UCSD's
	// jobs asked for X MB every 10 s.
	chunk := max(4096, int(rate*cfg.Interval.Seconds()))
	reads := make([]pacedRead, n)
	for i := range reads {
		reads[i] = pacedRead{addr: c.addr, path: files[i%len(files)], chunk: chunk, rate: rate, dur: cfg.Duration,
			off0: int64(i/len(files)) * int64(chunk)}
	}
	// Bytes asked for during the run: one chunk at the start of every
	// period that begins before the end.
	periods := math.Ceil(cfg.Duration.Seconds() * rate / float64(chunk))
	want := periods * float64(chunk)
	s := procstat.Start(c.pid, 100*time.Millisecond)
	start := time.Now()
	results := runPaced(ctx, reads)
	wall := time.Since(start)
	peak, cpu, _ := s.Stop()
	p.CPUCores = cpu.Seconds() / wall.Seconds()
	p.PeakRSSMB = float64(peak) / 1e6
	var fr, del []float64
	var total float64
	p.MinFraction = 1
	for _, r := range results {
		if r.Err != nil {
			p.Failed++
			if p.FirstError == "" {
				p.FirstError = r.Err.Error()
			}
		}
		f := 1.0
		if want > 0 {
			f = min(1, float64(r.Bytes)/want)
		}
		fr = append(fr, f)
		del = append(del, f*rate/1e6)
		total += float64(r.Bytes)
		p.MinFraction = min(p.MinFraction, f)
	}
	p.Fraction = meanSD(fr).Mean
	p.DeliveredMBps = meanSD(del).Mean
	p.TotalMBps = total / cfg.Duration.Seconds() / 1e6
	return p
}

func (r *ScaleResult) markdown(cfg ScaleConfig) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "## Scale tests (seed 004 section 4)\n\n")
	fmt.Fprintf(&b, "Hot cache, origin a C++ xrootd on loopback; each client (own connection) asks for rate × %.0f s of data every %.0f s for %.0f s. "+
		"Scaled to two cores: client counts and the fixed total rate divided by %.0f against UCSD's (1 000 clients; 5 GB/s shared by 1 000 to 5 000 clients), "+
		"per-client rates kept at UCSD's 1 to 5 MB/s scale (2 cores move 1 to 1.5 GB/s on loopback; the fixed-concurrency test goes past that), reads every %.0f s instead of every 10 s. "+
		"Delivered = bytes received / bytes due by the end of the run, per client.\n\n", r.Interval, r.Interval, r.Duration, r.Scale, r.Interval)
	for _, test := range []string{"fixed-concurrency", "fixed-total"} {
		if test == "fixed-concurrency" {
			fmt.Fprintf(&b, "### Fixed concurrency (like seed 004 Figure 1)\n\n")
		} else {
			fmt.Fprintf(&b, "### Fixed total rate %.0f MB/s (like seed 004 Figure 2; UCSD: 5 GB/s, 60 %% delivered at 5 000 clients)\n\n", r.TotalMBps)
		}
		head := []string{"clients", "UCSD equivalent", "requested [MB/s/client]"}
		for _, k := range r.Caches {
			head = append(head, k+" delivered", k+" slowest", k+" CPU [cores]")
		}
		var rows [][]string
		if len(r.Caches) > 0 {
			for i, p := range r.Points[r.Caches[0]] {
				if p.Test != test {
					continue
				}
				row := []string{strconv.Itoa(p.Clients), strconv.Itoa(int(float64(p.Clients) * r.Scale)), fmt.Sprintf("%.2f", p.RequestedMBps)}
				for _, k := range r.Caches {
					if i >= len(r.Points[k]) {
						row = append(row, "–", "–", "–")
						continue
					}
					q := r.Points[k][i]
					fail := ""
					if q.Failed > 0 {
						fail = fmt.Sprintf(", %d failed", q.Failed)
					}
					row = append(row, fmt.Sprintf("%.2f (%.0f %%%s)", q.DeliveredMBps, 100*q.Fraction, fail), fmt.Sprintf("%.0f %%", 100*q.MinFraction), fmt.Sprintf("%.2f", q.CPUCores))
				}
				rows = append(rows, row)
			}
		}
		mdTable(&b, head, rows)
	}
	fmt.Fprintf(&b, "Figures: scale-fixed-concurrency.png, scale-fixed-total.png.\n\n")
	return b.Bytes()
}

func (r *ScaleResult) charts() map[string]*report.Chart {
	pct := func(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) }
	fc := &report.Chart{Title: "Delivered / requested per client, fixed concurrency (like seed 004 Fig. 1)", XLabel: "requested rate per client [MB/s]",
		YLabel: "delivered / requested", YMin: 0, YMax: 1.1, YFormat: pct}
	ft := &report.Chart{Title: fmt.Sprintf("Delivered / requested per client, fixed total %.0f MB/s (like seed 004 Fig. 2)", r.TotalMBps),
		XLabel: "clients", YLabel: "delivered / requested", YMin: 0, YMax: 1.1, YFormat: pct,
		HRules: []report.Rule{{Value: 0.6, Label: "UCSD at 5000 clients", Color: report.Gray, Dashed: true}}}
	for i, k := range r.Caches {
		col := report.Palette[i%len(report.Palette)]
		a := report.Series{Name: k, Color: col, Markers: true}
		t := report.Series{Name: k, Color: col, Markers: true}
		for _, p := range r.Points[k] {
			if p.Test == "fixed-concurrency" {
				a.X, a.Y = append(a.X, p.RequestedMBps), append(a.Y, p.Fraction)
			} else {
				t.X, t.Y = append(t.X, float64(p.Clients)), append(t.Y, p.Fraction)
			}
		}
		fc.Series = append(fc.Series, a)
		ft.Series = append(ft.Series, t)
	}
	return map[string]*report.Chart{"scale-fixed-concurrency.png": fc, "scale-fixed-total.png": ft}
}
