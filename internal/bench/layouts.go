package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/hepcache/hepcache/internal/bench/ttbar"
	"github.com/hepcache/hepcache/internal/sim/report"
	"github.com/hepcache/hepcache/internal/wan"
	"github.com/hepcache/hepcache/internal/xrdproc"
)

// LayoutsConfig configures the cache-layout benchmark of seed 003
// (Figures 7 to 9): a primary storage behind a WAN link, worker nodes
// reading each file K times from random nodes, through no cache, one
// dedicated cache on the site's LAN, or a cache local to every worker node
// (several cache processes on loopback ports). Every read is a
// HammerCloud copy2scratch job: xrdcp the input to scratch (t1, the input
// download time), then run the analysis on it (wall time t).
type LayoutsConfig struct {
	// Dir is the work and results directory. Required.
	Dir string
	// Files is the number of input files (default 2), FileEvents their
	// events (default 500, 15 MB; seed 003's files were 1 to 5 GB).
	Files      int
	FileEvents int
	// K is how often each file is read. Default 20 (seed 003's K).
	K int
	// Nodes is the number of worker nodes. Default 4.
	Nodes int
	// RTT and Bandwidth describe the WAN link to the primary storage.
	// Default 11 ms (PNPI to JINR) and 50 MB/s.
	RTT       time.Duration
	Bandwidth int64
	// LANRTT is the link from a worker node to the dedicated cache.
	// Default 0.2 ms.
	LANRTT time.Duration
	// Caches are the caches run in the dedicated and local layouts.
	// Default hepcache and xcache.
	Caches []string
	// Seed fixes the sequence of (file, node) reads. Default 1.
	Seed        uint64
	HepcacheBin string
	CacheFlags  []string
	// Smoke starts every server and reads one small file through each,
	// measuring nothing.
	Smoke    bool
	Out      io.Writer
	Progress io.Writer
}

func (c *LayoutsConfig) ensureDefaults() error {
	if c.Dir == "" {
		return fmt.Errorf("bench layouts: a results directory is required")
	}
	if c.Smoke {
		c.Files, c.FileEvents = 1, 20
	}
	if c.Files == 0 {
		c.Files = 2
	}
	if c.FileEvents == 0 {
		c.FileEvents = 500
	}
	if c.K == 0 {
		c.K = 20
	}
	if c.Nodes == 0 {
		c.Nodes = 4
	}
	if c.RTT == 0 {
		c.RTT = 11 * time.Millisecond
	}
	if c.Bandwidth == 0 {
		c.Bandwidth = 50e6
	}
	if c.LANRTT == 0 {
		c.LANRTT = 200 * time.Microsecond
	}
	if c.Caches == nil {
		c.Caches = slices.Clone(cacheKinds)
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Out == nil {
		c.Out = os.Stdout
	}
	var err error
	c.HepcacheBin, err = defaultBin(c.HepcacheBin)
	return err
}

// LayoutRead is one job.
type LayoutRead struct {
	Layout string `json:"layout"` // "none", "dedicated", "local"
	Cache  string `json:"cache,omitempty"`
	File   int    `json:"file"`
	Node   int    `json:"node"`
	// Index is the read's number for its file (0 .. K-1).
	Index int `json:"index"`
	// Warm tells whether the cache the read went through had read the
	// file before.
	Warm bool `json:"warm"`
	// T1 is the input download time, Wall the job's completion time.
	T1   float64 `json:"t1_s"`
	Wall float64 `json:"wall_s"`
}

// LayoutSummary summarises one layout (and cache).
type LayoutSummary struct {
	Layout string `json:"layout"`
	Cache  string `json:"cache,omitempty"`
	T1     Stat   `json:"t1_s"`
	Wall   Stat   `json:"wall_s"`
	// T1Cold and T1Warm split t1 by whether the cache had the file.
	T1Cold Stat `json:"t1_cold_s"`
	T1Warm Stat `json:"t1_warm_s"`
	// T1Median and WallMedian resist the outliers of a shared machine.
	T1Median   float64 `json:"t1_median_s"`
	WallMedian float64 `json:"wall_median_s"`
	// HitRate is the fraction of reads served by a warm cache.
	HitRate float64 `json:"hit_rate"`
	// VsNone is Wall.Mean over the no-cache layout's.
	VsNone   float64 `json:"wall_vs_none"`
	T1VsNone float64 `json:"t1_vs_none"`
}

// LayoutsResult holds every read and the summaries.
type LayoutsResult struct {
	Files      int             `json:"files"`
	FileBytes  int64           `json:"file_bytes"`
	K          int             `json:"k"`
	Nodes      int             `json:"nodes"`
	RTTms      float64         `json:"wan_rtt_ms"`
	MeasuredMS float64         `json:"wan_rtt_measured_ms"`
	Bandwidth  int64           `json:"wan_bandwidth"`
	Summaries  []LayoutSummary `json:"summaries"`
	Reads      []LayoutRead    `json:"reads"`
}

// Layouts runs the cache-layout benchmark and writes layouts.json,
// layouts.md and the figures into cfg.Dir.
func Layouts(ctx context.Context, cfg LayoutsConfig) (_ *LayoutsResult, err error) {
	if err := cfg.ensureDefaults(); err != nil {
		return nil, err
	}
	w := newWatch(ctx)
	ctx = w.ctx
	defer w.close()
	defer func() { err = w.result(err) }()
	if err := needTools("layouts", "xrootd", "xrdcp"); err != nil {
		return nil, err
	}
	progress := progressFunc(cfg.Progress, "layouts")
	data := filepath.Join(cfg.Dir, "origin")
	var rels []string
	res := &LayoutsResult{Files: cfg.Files, K: cfg.K, Nodes: cfg.Nodes, RTTms: ms(cfg.RTT), Bandwidth: cfg.Bandwidth}
	for i := 0; i < cfg.Files; i++ {
		rel := fmt.Sprintf("layouts/ttbar-%d-s%d.root", cfg.FileEvents, i+1)
		p := filepath.Join(data, rel)
		if _, err := os.Stat(p); err != nil {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return nil, err
			}
			progress("generating %s", p)
			if err := ttbar.Generate(p, ttbar.GenConfig{Events: cfg.FileEvents, Seed: uint64(i + 1)}); err != nil {
				return nil, err
			}
		}
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		res.FileBytes = st.Size()
		rels = append(rels, rel)
	}
	if err := xrdproc.GiveToServerUser(data); err != nil {
		return nil, err
	}
	origin, err := xrdproc.StartOrigin(data)
	if err != nil {
		return nil, err
	}
	defer origin.Remove()
	w.xrootd("origin", origin)
	links, closeLinks, err := openLinks(ctx, []Site{{"primary storage", cfg.RTT}}, origin.Addr, cfg.Bandwidth, progress)
	if err != nil {
		return nil, err
	}
	defer closeLinks()
	wanAddr := links[0].Addr
	res.MeasuredMS = links[0].MeasuredMS
	if cfg.Smoke {
		return nil, smokeBehindLink(smoke{ctx: ctx, progress: progress, file: "/" + rels[0]}, w, origin, wanAddr, cfg.Caches,
			func(kind string) (*cacheProc, error) {
				return startCacheProc(kind, cfg.HepcacheBin, filepath.Join(cfg.Dir, "cache-"+kind+"-smoke"), wanAddr, cfg.CacheFlags)
			})
	}

	// The same sequence of (file, node) for every layout.
	rng := rand.New(rand.NewPCG(cfg.Seed, 3))
	type step struct{ file, node, index int }
	var steps []step
	for k := 0; k < cfg.K; k++ {
		for f := range rels {
			steps = append(steps, step{f, rng.IntN(cfg.Nodes), k})
		}
	}
	scratch := filepath.Join(cfg.Dir, "scratch")
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(scratch)
	job := func(layout, cache, src string, s step, warm bool) error {
		dst := filepath.Join(scratch, "input.root")
		t1, err := xrdcpTo(ctx, src, dst)
		if err != nil {
			return fmt.Errorf("%s %s: %w", layout, cache, err)
		}
		j, err := runJob(ctx, cfg.HepcacheBin, dst, 0, jobOpts{Hist: filepath.Join(scratch, "hist.root")})
		os.Remove(dst)
		if err != nil {
			return fmt.Errorf("%s %s: %w", layout, cache, err)
		}
		res.Reads = append(res.Reads, LayoutRead{Layout: layout, Cache: cache, File: s.file, Node: s.node, Index: s.index, Warm: warm, T1: t1, Wall: t1 + j.ProcessSeconds})
		return nil
	}

	// No cache: every node reads from the primary storage.
	for _, s := range steps {
		if err := job("none", "", "root://"+wanAddr+"//"+rels[s.file], s, false); err != nil {
			return nil, err
		}
	}
	progress("no cache done")
	run := 0
	for _, kind := range cfg.Caches {
		// Dedicated: one cache on the LAN, in front of the WAN link.
		run++
		c, err := startCacheProc(kind, cfg.HepcacheBin, filepath.Join(cfg.Dir, fmt.Sprintf("cache-%s-%d", kind, run)), wanAddr, cfg.CacheFlags)
		if err != nil {
			return nil, err
		}
		w.cache(c)
		lan, err := wan.New(&wan.Config{Target: c.addr, RTT: cfg.LANRTT})
		if err != nil {
			c.stop()
			return nil, err
		}
		seen := map[int]bool{}
		for _, s := range steps {
			if err = job("dedicated", kind, "root://"+lan.Addr().String()+"//"+rels[s.file], s, seen[s.file]); err != nil {
				break
			}
			seen[s.file] = true
		}
		lan.Close()
		c.stop()
		if err != nil {
			return nil, err
		}
		progress("dedicated %s done", kind)

		// Local: a cache on every worker node, each in front of the WAN.
		var nodes []*cacheProc
		stopAll := func() {
			for _, n := range nodes {
				n.stop()
			}
		}
		for n := 0; n < cfg.Nodes; n++ {
			run++
			c, err := startCacheProc(kind, cfg.HepcacheBin, filepath.Join(cfg.Dir, fmt.Sprintf("cache-%s-%d", kind, run)), wanAddr, cfg.CacheFlags)
			if err != nil {
				stopAll()
				return nil, err
			}
			nodes = append(nodes, w.cache(c))
		}
		seenOn := map[[2]int]bool{}
		for _, s := range steps {
			key := [2]int{s.node, s.file}
			if err = job("local", kind, nodes[s.node].url()+"//"+rels[s.file], s, seenOn[key]); err != nil {
				break
			}
			seenOn[key] = true
		}
		stopAll()
		if err != nil {
			return nil, err
		}
		progress("local %s done (%d nodes)", kind, cfg.Nodes)
	}
	res.summarise(cfg.Caches)
	md := res.markdown()
	if err := writeResults(cfg.Dir, "layouts", res, md, res.charts(cfg.Caches)); err != nil {
		return nil, err
	}
	cfg.Out.Write(md)
	progress("results in %s", cfg.Dir)
	return res, nil
}

func (r *LayoutsResult) summarise(caches []string) {
	groups := [][2]string{{"none", ""}}
	for _, k := range caches {
		groups = append(groups, [2]string{"dedicated", k}, [2]string{"local", k})
	}
	for _, g := range groups {
		var t1, wall, cold, warm []float64
		hits := 0
		for _, rd := range r.Reads {
			if rd.Layout != g[0] || rd.Cache != g[1] {
				continue
			}
			t1, wall = append(t1, rd.T1), append(wall, rd.Wall)
			if rd.Warm {
				warm = append(warm, rd.T1)
				hits++
			} else {
				cold = append(cold, rd.T1)
			}
		}
		s := LayoutSummary{Layout: g[0], Cache: g[1], T1: meanSD(t1), Wall: meanSD(wall), T1Cold: meanSD(cold), T1Warm: meanSD(warm),
			T1Median: medianOf64(t1), WallMedian: medianOf64(wall)}
		if len(t1) > 0 {
			s.HitRate = float64(hits) / float64(len(t1))
		}
		r.Summaries = append(r.Summaries, s)
	}
	for i := range r.Summaries {
		r.Summaries[i].VsNone = r.Summaries[i].Wall.Mean / r.Summaries[0].Wall.Mean
		r.Summaries[i].T1VsNone = r.Summaries[i].T1.Mean / r.Summaries[0].T1.Mean
	}
}

func (r *LayoutsResult) markdown() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "## Cache layouts (seed 003 Figures 7-9)\n\n")
	fmt.Fprintf(&b, "%d files of %.1f MB, each read K=%d times by a copy2scratch job on one of %d worker nodes drawn at random (the same sequence for every layout). "+
		"Primary storage: C++ xrootd behind a %.1f ms (measured %.2f ms), %.0f MB/s emulated WAN link. Dedicated cache on the LAN (0.2 ms link); local caches: one cache process per worker node. "+
		"t1 = input download time (xrdcp to scratch), wall = t1 + analysis job.\n\n",
		r.Files, float64(r.FileBytes)/1e6, r.K, r.Nodes, r.RTTms, r.MeasuredMS, float64(r.Bandwidth)/1e6)
	var rows [][]string
	for _, s := range r.Summaries {
		name := s.Layout
		if s.Cache != "" {
			name += " (" + s.Cache + ")"
		}
		rows = append(rows, []string{name, fmtStat(s.T1), fmtSeconds(s.T1Median), fmtStat(s.T1Cold), fmtStat(s.T1Warm), fmt.Sprintf("%.0f %%", 100*s.HitRate),
			fmtStat(s.Wall), fmtSeconds(s.WallMedian), fmt.Sprintf("%.2fx", s.T1VsNone), fmt.Sprintf("%.2fx", s.VsNone),
			fmt.Sprintf("%.2fx", s.T1Median/r.Summaries[0].T1Median)})
	}
	mdTable(&b, []string{"layout", "t1 [s]", "t1 median", "t1 miss [s]", "t1 hit [s]", "hit rate", "wall [s]", "wall median", "t1 / none", "wall / none", "t1 median / none"}, rows)
	fmt.Fprintf(&b, "Seed 003 (PNPI, HammerCloud): t1 direct 811 ± 574 s, through the dedicated xCache 53 ± 137 s (-95 %%); wall 2698 ± 577 s vs 1934 ± 139 s (-30 %%); "+
		"local caches on the worker nodes gave a benefit within the error margin (Figure 7). Here: dedicated t1 / none and wall / none above; "+
		"with K reads spread over %d nodes a local cache misses once per node and file.\n\n", r.Nodes)
	fmt.Fprintf(&b, "Figures: layouts-t1.png (t1 per read, like seed 003 Figures 7-9), layouts-wall.png.\n\n")
	return b.Bytes()
}

func (r *LayoutsResult) charts(caches []string) map[string]*report.Chart {
	out := map[string]*report.Chart{}
	for _, metric := range []string{"t1", "wall"} {
		c := &report.Chart{Title: fmt.Sprintf("%s per read of a file, mean over files (like seed 003 Figs. 7-9)", metric),
			XLabel: "read number of the file (1..K)", YLabel: metric + " [s]", YMin: 0,
			XFormat: func(v float64) string { return strconv.Itoa(int(v)) },
			YFormat: func(v float64) string { return fmtSeconds(v) }}
		groups := [][2]string{{"none", ""}}
		for _, k := range caches {
			groups = append(groups, [2]string{"dedicated", k}, [2]string{"local", k})
		}
		for i, g := range groups {
			s := report.Series{Name: g[0] + " " + g[1], Color: report.Palette[i%len(report.Palette)], Markers: true, Dashed: g[0] == "local"}
			for k := 0; k < r.K; k++ {
				var v []float64
				for _, rd := range r.Reads {
					if rd.Layout == g[0] && rd.Cache == g[1] && rd.Index == k {
						if metric == "t1" {
							v = append(v, rd.T1)
						} else {
							v = append(v, rd.Wall)
						}
					}
				}
				if len(v) > 0 {
					s.X, s.Y = append(s.X, float64(k+1)), append(s.Y, meanSD(v).Mean)
				}
			}
			c.Series = append(c.Series, s)
		}
		out["layouts-"+metric+".png"] = c
	}
	return out
}
