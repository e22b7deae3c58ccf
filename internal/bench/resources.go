package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/hepcache/hepcache/internal/procstat"
	"github.com/hepcache/hepcache/internal/sim/report"
	"github.com/hepcache/hepcache/internal/xrdproc"
)

// ResourcesConfig configures the proxy resource benchmark of seed 000
// (Tables 4 and 5, Figures 6 to 9): N parallel clients, each reading its
// own file through a cold cache, while the cache process's resident memory
// and CPU load are sampled.
type ResourcesConfig struct {
	// Dir is the work and results directory. Required.
	Dir string
	// Clients are the numbers of parallel requests. Default 10, 25, 50,
	// 75, 100, 128 (the paper's, plus 10).
	Clients []int
	// FileSize is the size of each client's file. Default 16 MiB.
	FileSize int64
	// Rate is each client's read rate in bytes/s, the pace of an analysis
	// job. Default 2 MB/s (the paper's PyROOT job read 26 kB per 15 ms
	// event, 1.8 MB/s); 0 reads as fast as possible.
	Rate float64
	// Chunk is each client's read size. Default 1 MiB.
	Chunk int
	// RTT is the emulated link to the origin. Default 2.8 ms (KIT, as in
	// the paper).
	RTT time.Duration
	// Caches are the caches measured. Default hepcache and xcache.
	Caches []string
	// Interval is the sampling period. Default 100 ms.
	Interval time.Duration
	// HepcacheBin and CacheFlags: see WorkflowConfig.
	HepcacheBin string
	CacheFlags  []string
	// Smoke starts every server and reads one small file through each,
	// measuring nothing.
	Smoke    bool
	Out      io.Writer
	Progress io.Writer
}

func (c *ResourcesConfig) ensureDefaults() error {
	if c.Dir == "" {
		return fmt.Errorf("bench resources: a results directory is required")
	}
	if c.Smoke {
		c.Clients, c.FileSize = []int{1}, 1<<20
	}
	if len(c.Clients) == 0 {
		c.Clients = []int{10, 25, 50, 75, 100, 128}
	}
	slices.Sort(c.Clients)
	if c.Clients[0] < 1 {
		return fmt.Errorf("bench resources: client counts must be positive")
	}
	if c.FileSize == 0 {
		c.FileSize = 16 << 20
	}
	if c.Rate == 0 {
		c.Rate = 2e6
	}
	if c.Rate < 0 {
		c.Rate = 0
	}
	if c.Chunk == 0 {
		c.Chunk = 1 << 20
	}
	if c.RTT == 0 {
		c.RTT = 2800 * time.Microsecond
	}
	if c.Caches == nil {
		c.Caches = slices.Clone(cacheKinds)
	}
	if c.Interval == 0 {
		c.Interval = 100 * time.Millisecond
	}
	if c.Out == nil {
		c.Out = os.Stdout
	}
	var err error
	c.HepcacheBin, err = defaultBin(c.HepcacheBin)
	return err
}

// ResourcePoint is one cache at one number of parallel clients.
type ResourcePoint struct {
	Clients int `json:"clients"`
	// IdleRSSGB is the cache's resident memory before the clients start.
	IdleRSSGB float64 `json:"idle_rss_gb"`
	// MemGB is the resident memory over the run (mean, SD), PeakGB its
	// maximum.
	MemGB  Stat    `json:"mem_gb"`
	PeakGB float64 `json:"peak_gb"`
	// CPUCores is the CPU load in cores over the samples above 5 % (the
	// paper's threshold).
	CPUCores Stat `json:"cpu_cores"`
	// CPUSeconds is the CPU time the cache used during the run.
	CPUSeconds float64 `json:"cpu_s"`
	// CPUPerGB is CPUSeconds per GB delivered to the clients: the cost
	// of serving, comparable even when the machine saturates.
	CPUPerGB float64 `json:"cpu_s_per_gb"`
	// Seconds is the wall time until the last client finished;
	// DeliveredMBps the mean per-client read rate achieved.
	Seconds       float64 `json:"seconds"`
	DeliveredMBps float64 `json:"delivered_mbps_per_client"`
	Failed        int     `json:"failed_clients"`
	FirstError    string  `json:"first_error,omitempty"`
}

// Fit is f(N) = A + B N.
type Fit struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

func (f Fit) At(n float64) float64 { return f.A + f.B*n }

func (f Fit) String() string { return fmt.Sprintf("%.3f + %.5f N", f.A, f.B) }

// Paper's fits (seed 000): memory in GB, CPU in cores, for XCache.
var (
	paperMemFit = Fit{0.67, 0.01}
	paperCPUFit = Fit{0.406, 0.005}
)

// ResourcesResult holds every cache's points and fits.
type ResourcesResult struct {
	FileSize   int64                      `json:"file_size"`
	RateMBps   float64                    `json:"rate_mbps_per_client"`
	RTTms      float64                    `json:"rtt_ms"`
	MeasuredMS float64                    `json:"rtt_measured_ms"`
	Points     map[string][]ResourcePoint `json:"points"`
	MemFit     map[string]Fit             `json:"mem_fit_gb"`
	CPUFit     map[string]Fit             `json:"cpu_fit_cores"`
	Caches     []string                   `json:"caches"`
}

// Resources runs the proxy resource benchmark and writes resources.json,
// resources.md and the figures into cfg.Dir.
func Resources(ctx context.Context, cfg ResourcesConfig) (_ *ResourcesResult, err error) {
	if err := cfg.ensureDefaults(); err != nil {
		return nil, err
	}
	w := newWatch(ctx)
	ctx = w.ctx
	defer w.close()
	defer func() { err = w.result(err) }()
	if err := needTools("resources", "xrootd"); err != nil {
		return nil, err
	}
	progress := progressFunc(cfg.Progress, "resources")
	maxN := cfg.Clients[len(cfg.Clients)-1]
	data := filepath.Join(cfg.Dir, "origin")
	progress("writing %d files of %d MiB under %s", maxN+1, cfg.FileSize>>20, data)
	files, err := writeLoadFiles(data, "res", maxN+1, cfg.FileSize) // +1 for the warm-up
	if err != nil {
		return nil, err
	}
	origin, err := xrdproc.StartOrigin(data)
	if err != nil {
		return nil, err
	}
	defer origin.Remove()
	w.xrootd("origin", origin)
	links, closeLinks, err := openLinks(ctx, []Site{{"KIT", cfg.RTT}}, origin.Addr, 0, progress)
	if err != nil {
		return nil, err
	}
	defer closeLinks()
	link := links[0]
	if cfg.Smoke {
		return nil, smokeBehindLink(smoke{ctx: ctx, progress: progress, file: files[0]}, w, origin, link.Addr, cfg.Caches,
			func(kind string) (*cacheProc, error) {
				return startCacheProc(kind, cfg.HepcacheBin, filepath.Join(cfg.Dir, "cache-"+kind+"-smoke"), link.Addr, cfg.CacheFlags)
			})
	}
	res := &ResourcesResult{FileSize: cfg.FileSize, RateMBps: cfg.Rate / 1e6, RTTms: ms(cfg.RTT), MeasuredMS: link.MeasuredMS,
		Points: map[string][]ResourcePoint{}, MemFit: map[string]Fit{}, CPUFit: map[string]Fit{}, Caches: cfg.Caches}
	run := 0
	for _, kind := range cfg.Caches {
		for _, n := range cfg.Clients {
			run++
			c, err := startCacheProc(kind, cfg.HepcacheBin, filepath.Join(cfg.Dir, fmt.Sprintf("cache-%s-%d", kind, run)), link.Addr, cfg.CacheFlags)
			if err != nil {
				return nil, err
			}
			w.cache(c)
			pt, err := resourcePoint(ctx, cfg, c, files, n)
			c.stop()
			if err != nil {
				return nil, fmt.Errorf("%s with %d clients: %w", kind, n, err)
			}
			res.Points[kind] = append(res.Points[kind], pt)
			progress("%-8s N=%3d: memory %.3f ± %.3f GB (peak %.3f, idle %.3f), CPU %.2f ± %.2f cores, %.1f s, %.2f MB/s per client, %d failed",
				kind, n, pt.MemGB.Mean, pt.MemGB.SD, pt.PeakGB, pt.IdleRSSGB, pt.CPUCores.Mean, pt.CPUCores.SD, pt.Seconds, pt.DeliveredMBps, pt.Failed)
		}
		var xs, mem, cpu []float64
		for _, p := range res.Points[kind] {
			xs = append(xs, float64(p.Clients))
			mem = append(mem, p.MemGB.Mean)
			cpu = append(cpu, p.CPUCores.Mean)
		}
		a, b := fitLine(xs, mem)
		res.MemFit[kind] = Fit{a, b}
		a, b = fitLine(xs, cpu)
		res.CPUFit[kind] = Fit{a, b}
	}
	md := res.markdown()
	if err := writeResults(cfg.Dir, "resources", res, md, res.charts()); err != nil {
		return nil, err
	}
	cfg.Out.Write(md)
	progress("results in %s", cfg.Dir)
	return res, nil
}

func resourcePoint(ctx context.Context, cfg ResourcesConfig, c *cacheProc, files []string, n int) (ResourcePoint, error) {
	pt := ResourcePoint{Clients: n}
	// One small read first, so lazily started pools count in the idle
	// baseline rather than in the per-client growth.
	warm := pacedRead{addr: c.addr, path: files[len(files)-1], chunk: cfg.Chunk, total: int64(cfg.Chunk)}
	if r := warm.run(ctx); r.Err != nil {
		return pt, fmt.Errorf("warm-up: %w", r.Err)
	}
	time.Sleep(200 * time.Millisecond)
	idle, err := procstat.RSS(c.pid)
	if err != nil {
		return pt, err
	}
	cpu0, _ := procstat.CPU(c.pid)
	pt.IdleRSSGB = float64(idle) / 1e9
	stop := make(chan struct{})
	done := make(chan *usage)
	go func() { done <- sampleUsage(c.pid, cfg.Interval, stop) }()
	reads := make([]pacedRead, n)
	for i := range reads {
		reads[i] = pacedRead{addr: c.addr, path: files[i], chunk: cfg.Chunk, rate: cfg.Rate, total: cfg.FileSize}
	}
	start := time.Now()
	results := runPaced(ctx, reads)
	pt.Seconds = time.Since(start).Seconds()
	close(stop)
	u := <-done
	cpu1, _ := procstat.CPU(c.pid)
	pt.CPUSeconds = (cpu1 - cpu0).Seconds()
	var rates []float64
	var delivered int64
	for _, r := range results {
		delivered += r.Bytes
		if r.Err != nil {
			pt.Failed++
			if pt.FirstError == "" {
				pt.FirstError = r.Err.Error()
			}
			continue
		}
		rates = append(rates, float64(r.Bytes)/r.Seconds/1e6)
	}
	pt.DeliveredMBps = meanSD(rates).Mean
	if delivered > 0 {
		pt.CPUPerGB = pt.CPUSeconds / (float64(delivered) / 1e9)
	}
	gb := make([]float64, len(u.RSS))
	for i, v := range u.RSS {
		gb[i] = v / 1e9
		pt.PeakGB = max(pt.PeakGB, gb[i])
	}
	pt.MemGB = meanSD(gb)
	pt.CPUCores = meanSD(above(u.CPU, 0.05))
	if pt.CPUCores.N == 0 {
		pt.CPUCores = Stat{}
	}
	return pt, nil
}

func (r *ResourcesResult) markdown() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "## Proxy resources vs parallel requests (seed 000 Tables 4-5)\n\n")
	fmt.Fprintf(&b, "Each client reads its own %d MiB file through a cold cache at %.1f MB/s (the paper's analysis pace), "+
		"origin a C++ xrootd behind an emulated %.2f ms link (measured %.3f ms). Memory: resident set of the cache process over the run; "+
		"CPU: load in cores over the samples above 5 %%, as in the paper, and CPU seconds per GB served (comparable when the two cores saturate; clients, origin and cache share them).\n\n", r.FileSize>>20, r.RateMBps, r.RTTms, r.MeasuredMS)
	head := []string{"N"}
	for _, k := range r.Caches {
		head = append(head, k+" mem [GB]", k+" CPU [cores]", k+" CPU [s/GB]", k+" MB/s/client")
	}
	var rows [][]string
	if len(r.Caches) > 0 {
		for i, p := range r.Points[r.Caches[0]] {
			row := []string{strconv.Itoa(p.Clients)}
			for _, k := range r.Caches {
				if i >= len(r.Points[k]) {
					row = append(row, "–", "–", "–", "–")
					continue
				}
				q := r.Points[k][i]
				fail := ""
				if q.Failed > 0 {
					fail = fmt.Sprintf(" (%d failed)", q.Failed)
				}
				row = append(row, fmt.Sprintf("%.3f ± %.3f", q.MemGB.Mean, q.MemGB.SD), fmt.Sprintf("%.2f ± %.2f", q.CPUCores.Mean, q.CPUCores.SD), fmt.Sprintf("%.2f", q.CPUPerGB), fmt.Sprintf("%.2f%s", q.DeliveredMBps, fail))
			}
			rows = append(rows, row)
		}
	}
	mdTable(&b, head, rows)
	fmt.Fprintf(&b, "### Linear fits f(N) = a + b N and extrapolation\n\n")
	rows = nil
	for _, k := range r.Caches {
		m, c := r.MemFit[k], r.CPUFit[k]
		rows = append(rows, []string{k + " (this machine)", m.String(), fmt.Sprintf("%.2f", m.At(1000)), fmt.Sprintf("%.2f", m.At(3000)),
			c.String(), fmt.Sprintf("%.2f", c.At(1000)), fmt.Sprintf("%.2f", c.At(3000))})
	}
	rows = append(rows, []string{"XCache (paper, 4 vCPU VM)", paperMemFit.String(), fmt.Sprintf("%.2f", paperMemFit.At(1000)), fmt.Sprintf("%.2f", paperMemFit.At(3000)),
		paperCPUFit.String(), fmt.Sprintf("%.2f", paperCPUFit.At(1000)), fmt.Sprintf("%.2f", paperCPUFit.At(3000))})
	mdTable(&b, []string{"cache", "memory [GB]", "at 1000", "at 3000", "CPU [cores]", "at 1000", "at 3000"}, rows)
	if slices.Contains(r.Caches, "hepcache") && slices.Contains(r.Caches, "xcache") {
		h, x := r.MemFit["hepcache"], r.MemFit["xcache"]
		hc, xc := r.CPUFit["hepcache"], r.CPUFit["xcache"]
		fmt.Fprintf(&b, "hepcache / XCache at 1000 requests: memory %.2fx, CPU %.2fx; at 3000: memory %.2fx, CPU %.2fx.\n\n",
			h.At(1000)/x.At(1000), hc.At(1000)/xc.At(1000), h.At(3000)/x.At(3000), hc.At(3000)/xc.At(3000))
	}
	fmt.Fprintf(&b, "Figures: resources-memory.png, resources-cpu.png (means with fits, like seed 000 Figures 7 and 9).\n\n")
	return b.Bytes()
}

func (r *ResourcesResult) charts() map[string]*report.Chart {
	mem := &report.Chart{Title: "Cache resident memory vs parallel requests (like seed 000 Fig. 7)", XLabel: "parallel requests N", YLabel: "memory [GB]",
		YFormat: func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }}
	cpu := &report.Chart{Title: "Cache CPU load vs parallel requests (like seed 000 Fig. 9)", XLabel: "parallel requests N", YLabel: "CPU [cores]",
		YFormat: func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }}
	for i, k := range r.Caches {
		col := report.Palette[i%len(report.Palette)]
		ms := report.Series{Name: k, Color: col, Markers: true}
		cs := report.Series{Name: k, Color: col, Markers: true}
		mf := report.Series{Name: k + " fit " + r.MemFit[k].String(), Color: col, Dashed: true}
		cf := report.Series{Name: k + " fit " + r.CPUFit[k].String(), Color: col, Dashed: true}
		for _, p := range r.Points[k] {
			x := float64(p.Clients)
			ms.X, ms.Y = append(ms.X, x), append(ms.Y, p.MemGB.Mean)
			cs.X, cs.Y = append(cs.X, x), append(cs.Y, p.CPUCores.Mean)
			mf.X, mf.Y = append(mf.X, x), append(mf.Y, r.MemFit[k].At(x))
			cf.X, cf.Y = append(cf.X, x), append(cf.Y, r.CPUFit[k].At(x))
		}
		mem.Series = append(mem.Series, ms, mf)
		cpu.Series = append(cpu.Series, cs, cf)
	}
	return map[string]*report.Chart{"resources-memory.png": mem, "resources-cpu.png": cpu}
}
