package bench

import (
	"bytes"
	"context"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/hepcache/hepcache/internal/bench/ttbar"
	"github.com/hepcache/hepcache/internal/sim/report"
	"github.com/hepcache/hepcache/internal/xrdproc"
)

// WorkflowConfig configures the workflow benchmark of seed 000 (sections
// "Input Files" to "Workflow Results", Tables 2 and 3, Figures 3 to 5),
// with seed 002's CPU efficiency against latency (its Figure 3) and seed
// 003's copy2scratch access mode.
type WorkflowConfig struct {
	// Dir is the work and results directory. Required.
	Dir string
	// FileEvents is the number of events in the input file. Default 2000
	// (59 MB); the paper's files had 50 000, 200 000 and 500 000.
	FileEvents int
	// Events are the numbers of events each job processes. Default 1,
	// 100, 1000 and FileEvents; values above FileEvents are dropped.
	Events []int64
	// Repeat is how often each measurement is taken. Default 2.
	Repeat int
	// Sites are the emulated remote sites. Default PaperSites.
	Sites []Site
	// Bandwidth is each site link's capacity in bytes/s; 0 is unlimited.
	Bandwidth int64
	// Modes are "stream" (read over the network) and "copy2scratch" (copy
	// the file with xrdcp first, then read it locally). Default both.
	Modes []string
	// Caches are the caches run cold and hot: "hepcache", "xcache".
	// Default both.
	Caches []string
	// Work and ReadAhead are passed to every job (see ttbar.JobConfig).
	// ReadAhead defaults to 4 MiB, about what ROOT's TTreeCache fetches at
	// once; negative means none.
	Work      int
	ReadAhead int
	// Seed is the input file's generator seed. Default 1.
	Seed uint64
	// HepcacheBin is the hepcache binary (cache and job). Default: this
	// executable.
	HepcacheBin string
	// CacheFlags are extra `hepcache serve` flags.
	CacheFlags []string
	// Out receives the Markdown report; Progress the progress lines
	// (default stderr).
	Out, Progress io.Writer
}

func (c *WorkflowConfig) ensureDefaults() error {
	if c.Dir == "" {
		return fmt.Errorf("bench workflow: a results directory is required")
	}
	if c.FileEvents == 0 {
		c.FileEvents = 2000
	}
	if len(c.Events) == 0 {
		c.Events = []int64{1, 100, 1000, int64(c.FileEvents)}
	}
	var ev []int64
	for _, e := range c.Events {
		if e > 0 && e <= int64(c.FileEvents) && !slices.Contains(ev, e) {
			ev = append(ev, e)
		}
	}
	if len(ev) == 0 {
		return fmt.Errorf("bench workflow: no event count in %v fits a file of %d events", c.Events, c.FileEvents)
	}
	slices.Sort(ev)
	c.Events = ev
	if c.Repeat == 0 {
		c.Repeat = 2
	}
	if len(c.Sites) == 0 {
		c.Sites = PaperSites()
	}
	if len(c.Modes) == 0 {
		c.Modes = []string{modeStream, modeCopy}
	}
	for _, m := range c.Modes {
		if m != modeStream && m != modeCopy {
			return fmt.Errorf("bench workflow: unknown mode %q (have %s, %s)", m, modeStream, modeCopy)
		}
	}
	if c.Caches == nil {
		c.Caches = slices.Clone(cacheKinds)
	}
	for _, k := range c.Caches {
		if !slices.Contains(cacheKinds, k) {
			return fmt.Errorf("bench workflow: unknown cache %q", k)
		}
	}
	switch {
	case c.ReadAhead == 0:
		c.ReadAhead = 4 << 20
	case c.ReadAhead < 0:
		c.ReadAhead = 0
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	var err error
	c.HepcacheBin, err = defaultBin(c.HepcacheBin)
	if c.Out == nil {
		c.Out = os.Stdout
	}
	return err
}

// Access modes.
const (
	modeStream = "stream"
	modeCopy   = "copy2scratch"
)

// WorkflowRun is one measured job.
type WorkflowRun struct {
	// Config is "local", "direct", "<cache>-cold" or "<cache>-hot".
	Config string `json:"config"`
	Site   string `json:"site,omitempty"`
	Mode   string `json:"mode"`
	Events int64  `json:"events"`
	Rep    int    `json:"rep"`
	// Seconds is the completion time: the job process's wall time, plus
	// the copy for copy2scratch.
	Seconds float64 `json:"seconds"`
	// InputSeconds is t1, the input download time (copy2scratch), or the
	// job's time to its first event (stream).
	InputSeconds float64 `json:"input_s"`
	// CPUEfficiency is the job's CPU time over Seconds.
	CPUEfficiency float64    `json:"cpu_efficiency"`
	Job           *jobResult `json:"job"`
}

// WorkflowCell is the summary of the repetitions of one configuration.
type WorkflowCell struct {
	Config        string  `json:"config"`
	Site          string  `json:"site,omitempty"`
	RTTms         float64 `json:"rtt_ms,omitempty"`
	Mode          string  `json:"mode"`
	Events        int64   `json:"events"`
	Seconds       Stat    `json:"seconds"`
	InputSeconds  Stat    `json:"input_s"`
	CPUEfficiency Stat    `json:"cpu_efficiency"`
	// VsLocal is Seconds.Mean over the direct-local mean for the same
	// events: the anchor measured in the same run.
	VsLocal float64 `json:"vs_local"`
}

// WorkflowResult is everything one run measured.
type WorkflowResult struct {
	FileEvents int            `json:"file_events"`
	FileBytes  int64          `json:"file_bytes"`
	Events     []int64        `json:"events"`
	Repeat     int            `json:"repeat"`
	Sites      []*SiteLink    `json:"sites"`
	Caches     []string       `json:"caches"`
	Modes      []string       `json:"modes"`
	Work       int            `json:"work"`
	ReadAhead  int            `json:"readahead"`
	Cells      []WorkflowCell `json:"cells"`
	Runs       []WorkflowRun  `json:"runs"`
	Started    time.Time      `json:"started"`
	Seconds    float64        `json:"total_seconds"`
}

// Workflow runs the workflow benchmark and writes workflow.json,
// workflow.md and the figures into cfg.Dir.
func Workflow(ctx context.Context, cfg WorkflowConfig) (*WorkflowResult, error) {
	if err := cfg.ensureDefaults(); err != nil {
		return nil, err
	}
	if err := needTools("workflow", "xrootd", "xrdcp"); err != nil {
		return nil, err
	}
	progress := progressFunc(cfg.Progress, "workflow")
	res := &WorkflowResult{FileEvents: cfg.FileEvents, Events: cfg.Events, Repeat: cfg.Repeat,
		Caches: cfg.Caches, Modes: cfg.Modes, Work: cfg.Work, ReadAhead: cfg.ReadAhead, Started: time.Now()}

	dataDir := filepath.Join(cfg.Dir, "origin")
	rel := fmt.Sprintf("ttbar/ttbar-%d-s%d.root", cfg.FileEvents, cfg.Seed)
	local := filepath.Join(dataDir, rel)
	if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
		return nil, err
	}
	if _, err := os.Stat(local); err != nil {
		progress("generating %d ttbar events into %s", cfg.FileEvents, local)
		if err := ttbar.Generate(local, ttbar.GenConfig{Events: cfg.FileEvents, Seed: cfg.Seed}); err != nil {
			return nil, err
		}
	}
	st, err := os.Stat(local)
	if err != nil {
		return nil, err
	}
	res.FileBytes = st.Size()
	progress("input %s: %d events, %.1f MB (%.1f kB/event)", rel, cfg.FileEvents, float64(st.Size())/1e6, float64(st.Size())/float64(cfg.FileEvents)/1e3)
	if err := xrdproc.GiveToServerUser(dataDir); err != nil {
		return nil, err
	}
	origin, err := xrdproc.StartOrigin(dataDir)
	if err != nil {
		return nil, err
	}
	defer origin.Remove()
	progress("origin: C++ xrootd at %s", origin.Addr)
	links, closeLinks, err := openLinks(ctx, cfg.Sites, origin.Addr, cfg.Bandwidth, progress)
	if err != nil {
		return nil, err
	}
	defer closeLinks()
	res.Sites = links

	scratch := filepath.Join(cfg.Dir, "scratch")
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(scratch)
	jo := jobOpts{Work: cfg.Work, ReadAhead: cfg.ReadAhead, Hist: filepath.Join(scratch, "hist.root")}
	job := func(input string, n int64) (*jobResult, error) { return runJob(ctx, cfg.HepcacheBin, input, n, jo) }
	add := func(r WorkflowRun) {
		res.Runs = append(res.Runs, r)
	}
	streamRun := func(config, site, input string, n int64, rep int) error {
		j, err := job(input, n)
		if err != nil {
			return fmt.Errorf("%s %s: %w", config, site, err)
		}
		add(WorkflowRun{Config: config, Site: site, Mode: modeStream, Events: n, Rep: rep,
			Seconds: j.ProcessSeconds, InputSeconds: j.FirstEventSeconds, CPUEfficiency: j.CPUSeconds / j.ProcessSeconds, Job: j})
		return nil
	}
	// copyRuns copies the input to scratch once (t1), then runs every
	// event count on the local copy; each job's completion time is t1
	// plus its own.
	copyRuns := func(config, site, url string, rep int) error {
		dst := filepath.Join(scratch, "input.root")
		t1, err := xrdcpTo(ctx, url, dst)
		if err != nil {
			return fmt.Errorf("%s %s: %w", config, site, err)
		}
		defer os.Remove(dst)
		for _, n := range cfg.Events {
			j, err := job(dst, n)
			if err != nil {
				return fmt.Errorf("%s %s: %w", config, site, err)
			}
			total := t1 + j.ProcessSeconds
			add(WorkflowRun{Config: config, Site: site, Mode: modeCopy, Events: n, Rep: rep,
				Seconds: total, InputSeconds: t1, CPUEfficiency: j.CPUSeconds / total, Job: j})
		}
		return nil
	}
	has := func(m string) bool { return slices.Contains(cfg.Modes, m) }

	// Direct local: the anchor.
	for rep := 0; rep < cfg.Repeat; rep++ {
		for _, n := range cfg.Events {
			if err := streamRun("local", "", local, n, rep); err != nil {
				return nil, err
			}
		}
	}
	progress("direct local done")

	// Direct from each site.
	for _, l := range links {
		url := "root://" + l.Addr + "//" + rel
		for rep := 0; rep < cfg.Repeat; rep++ {
			if has(modeStream) {
				for _, n := range cfg.Events {
					if err := streamRun("direct", l.Name, url, n, rep); err != nil {
						return nil, err
					}
				}
			}
			if has(modeCopy) {
				if err := copyRuns("direct", l.Name, url, rep); err != nil {
					return nil, err
				}
			}
		}
		progress("direct from %s done", l.Name)
	}

	// Through each cache: cold (a new, empty cache per job) from each
	// site, then hot (the file already in the cache; its origin the
	// farthest site).
	run := 0
	start := func(kind string, l *SiteLink) (*cacheProc, error) {
		run++
		return startCacheProc(kind, cfg.HepcacheBin, filepath.Join(cfg.Dir, fmt.Sprintf("cache-%s-%d", kind, run)), l.Addr, cfg.CacheFlags)
	}
	for _, kind := range cfg.Caches {
		for _, l := range links {
			for rep := 0; rep < cfg.Repeat; rep++ {
				if has(modeStream) {
					for _, n := range cfg.Events {
						c, err := start(kind, l)
						if err != nil {
							return nil, err
						}
						err = streamRun(kind+"-cold", l.Name, c.url()+"//"+rel, n, rep)
						c.stop()
						if err != nil {
							return nil, err
						}
					}
				}
				if has(modeCopy) {
					c, err := start(kind, l)
					if err != nil {
						return nil, err
					}
					err = copyRuns(kind+"-cold", l.Name, c.url()+"//"+rel, rep)
					c.stop()
					if err != nil {
						return nil, err
					}
				}
			}
			progress("%s cold from %s done", kind, l.Name)
		}
		far := links[len(links)-1]
		c, err := start(kind, far)
		if err != nil {
			return nil, err
		}
		url := c.url() + "//" + rel
		if _, err := xrdcpTo(ctx, url, "/dev/null"); err != nil {
			c.stop()
			return nil, fmt.Errorf("warm %s: %w", kind, err)
		}
		// XCache writes blocks asynchronously; give both a moment to
		// have the file complete on disk before "hot" is measured.
		time.Sleep(500 * time.Millisecond)
		for rep := 0; rep < cfg.Repeat && err == nil; rep++ {
			if has(modeStream) {
				for _, n := range cfg.Events {
					if err = streamRun(kind+"-hot", far.Name, url, n, rep); err != nil {
						break
					}
				}
			}
			if has(modeCopy) && err == nil {
				err = copyRuns(kind+"-hot", far.Name, url, rep)
			}
		}
		c.stop()
		if err != nil {
			return nil, err
		}
		progress("%s hot done", kind)
	}
	res.summarise(links)
	res.Seconds = time.Since(res.Started).Seconds()
	md := res.markdown()
	if err := writeResults(cfg.Dir, "workflow", res, md, res.charts()); err != nil {
		return nil, err
	}
	cfg.Out.Write(md)
	progress("results in %s (%.0f s)", cfg.Dir, res.Seconds)
	return res, nil
}

type cellKey struct {
	config, site, mode string
	events             int64
}

func (r *WorkflowResult) summarise(links []*SiteLink) {
	rtt := map[string]float64{}
	for _, l := range links {
		rtt[l.Name] = l.MeasuredMS
	}
	var order []cellKey
	groups := map[cellKey][]WorkflowRun{}
	for _, run := range r.Runs {
		k := cellKey{run.Config, run.Site, run.Mode, run.Events}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], run)
	}
	localMean := map[int64]float64{}
	for _, k := range order {
		var s, in, eff []float64
		for _, run := range groups[k] {
			s, in, eff = append(s, run.Seconds), append(in, run.InputSeconds), append(eff, run.CPUEfficiency)
		}
		c := WorkflowCell{Config: k.config, Site: k.site, RTTms: rtt[k.site], Mode: k.mode, Events: k.events,
			Seconds: meanSD(s), InputSeconds: meanSD(in), CPUEfficiency: meanSD(eff)}
		if k.config == "local" {
			localMean[k.events] = c.Seconds.Mean
		}
		r.Cells = append(r.Cells, c)
	}
	for i := range r.Cells {
		if m := localMean[r.Cells[i].Events]; m > 0 {
			r.Cells[i].VsLocal = r.Cells[i].Seconds.Mean / m
		}
	}
}

func (r *WorkflowResult) cell(config, site, mode string, events int64) (WorkflowCell, bool) {
	for _, c := range r.Cells {
		if c.Config == config && c.Site == site && c.Mode == mode && c.Events == events {
			return c, true
		}
	}
	return WorkflowCell{}, false
}

func eventsLabel(n int64) string {
	switch {
	case n >= 1000 && n%1000 == 0:
		return strconv.FormatInt(n/1000, 10) + "k"
	}
	return strconv.FormatInt(n, 10)
}

// paperTable2 and paperTable3 are seed 000's completion times in seconds
// (three file sizes merged) for 1, 100, 1k and 50k events.
var (
	paperEvents = []int64{1, 100, 1000, 50000}
	paperTable2 = map[string][]float64{
		"BeeGFS FR": {2.9, 4.24, 17.1, 730},
		"dCache FR": {3.2, 4.5, 17.6, 730},
		"KIT":       {3.7, 5.2, 19, 760},
		"LRZ":       {3.5, 4.9, 18.8, 770},
		"DESY":      {3.8, 5.5, 18.8, 800},
		"BNL":       {5.9, 7.0, 23, 880},
		"TRIUMF":    {7.5, 9.1, 26, 1050},
	}
	paperTable3 = map[string][]float64{
		"hot":       {3.6, 4.8, 18.1, 740},
		"dCache FR": {4.8, 6.3, 20.4, 742},
		"KIT":       {5.4, 6.7, 19.5, 730},
		"LRZ":       {5.0, 6.7, 19.5, 730},
		"DESY":      {5.4, 6.6, 19.6, 730},
		"BNL":       {7.5, 9.3, 22, 739},
		"TRIUMF":    {9.8, 11.3, 24.1, 760},
	}
)

func (r *WorkflowResult) markdown() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "## Workflow benchmark (seed 000 Tables 2-3, seed 002 Figure 3)\n\n")
	fmt.Fprintf(&b, "Input: %d simulated ttbar events, %.1f MB (%.1f kB/event). Origin: C++ xrootd on loopback behind an emulated WAN link per site. "+
		"Mean ± SD of %d runs; completion time of the analysis job in seconds (process wall time; for copy2scratch the xrdcp copy plus the job). "+
		"Job: groot, %d-byte read-ahead, work factor %d.\n\n", r.FileEvents, float64(r.FileBytes)/1e6, float64(r.FileBytes)/float64(r.FileEvents)/1e3, r.Repeat, r.ReadAhead, max(r.Work, 1))
	fmt.Fprintf(&b, "Sites (RTT measured through the emulated link, 10 probes):\n\n")
	var rows [][]string
	for _, l := range r.Sites {
		rows = append(rows, []string{l.Name, fmt.Sprintf("%.2f", l.NominalMS), fmt.Sprintf("%.3f ± %.3f", l.MeasuredMS, l.SDMS)})
	}
	mdTable(&b, []string{"site", "paper RTT [ms]", "measured RTT [ms]"}, rows)

	head := []string{"configuration"}
	for _, n := range r.Events {
		head = append(head, eventsLabel(n))
	}
	for _, mode := range r.Modes {
		fmt.Fprintf(&b, "### Without cache, %s (shaped like Table 2) [s]\n\n", mode)
		rows = nil
		line := func(label, config, site, mode string) {
			row := []string{label}
			for _, n := range r.Events {
				c, ok := r.cell(config, site, mode, n)
				if !ok {
					row = append(row, "–")
					continue
				}
				row = append(row, fmtStat(c.Seconds))
			}
			rows = append(rows, row)
		}
		line("local disk", "local", "", modeStream)
		for _, l := range r.Sites {
			line(l.Name, "direct", l.Name, mode)
		}
		mdTable(&b, head, rows)
		for _, kind := range r.Caches {
			fmt.Fprintf(&b, "### Through %s, %s (shaped like Table 3) [s]\n\n", kind, mode)
			rows = nil
			far := r.Sites[len(r.Sites)-1].Name
			line("hot: file in cache (origin "+far+")", kind+"-hot", far, mode)
			for _, l := range r.Sites {
				line("cold: "+l.Name, kind+"-cold", l.Name, mode)
			}
			mdTable(&b, head, rows)
		}
	}

	// CPU efficiency against RTT at the largest event count (seed 002
	// Figure 3), and the ratios against the local anchor and XCache.
	nmax := r.Events[len(r.Events)-1]
	fmt.Fprintf(&b, "### CPU efficiency (CPU time / wall time) and time relative to local disk, %s events, stream\n\n", eventsLabel(nmax))
	h := []string{"site", "RTT [ms]", "direct eff", "direct / local"}
	for _, kind := range r.Caches {
		h = append(h, kind+" cold eff", kind+" cold / local")
	}
	rows = nil
	for _, l := range r.Sites {
		row := []string{l.Name, fmt.Sprintf("%.2f", l.MeasuredMS)}
		for _, config := range append([]string{"direct"}, mapStr(r.Caches, func(k string) string { return k + "-cold" })...) {
			c, ok := r.cell(config, l.Name, modeStream, nmax)
			if !ok {
				row = append(row, "–", "–")
				continue
			}
			row = append(row, fmt.Sprintf("%.0f %%", 100*c.CPUEfficiency.Mean), fmt.Sprintf("%.2fx", c.VsLocal))
		}
		rows = append(rows, row)
	}
	pad := func(row []string) []string {
		for len(row) < len(h) {
			row = append(row, "–")
		}
		return row
	}
	loc, _ := r.cell("local", "", modeStream, nmax)
	rows = append(rows, pad([]string{"local disk", "0", fmt.Sprintf("%.0f %%", 100*loc.CPUEfficiency.Mean), "1.00x"}))
	for _, kind := range r.Caches {
		far := r.Sites[len(r.Sites)-1].Name
		c, ok := r.cell(kind+"-hot", far, modeStream, nmax)
		if ok {
			rows = append(rows, pad([]string{kind + " hot", "–", fmt.Sprintf("%.0f %%", 100*c.CPUEfficiency.Mean), fmt.Sprintf("%.2fx", c.VsLocal)}))
		}
	}
	mdTable(&b, h, rows)

	if slices.Contains(r.Caches, "hepcache") && slices.Contains(r.Caches, "xcache") {
		fmt.Fprintf(&b, "### hepcache / XCache completion time (same run; < 1 means hepcache faster)\n\n")
		rows = nil
		for _, mode := range r.Modes {
			for _, temp := range []string{"hot", "cold"} {
				sites := r.Sites
				if temp == "hot" {
					sites = sites[len(sites)-1:]
				}
				for _, l := range sites {
					row := []string{mode + " " + temp + " " + l.Name}
					for _, n := range r.Events {
						a, ok1 := r.cell("hepcache-"+temp, l.Name, mode, n)
						x, ok2 := r.cell("xcache-"+temp, l.Name, mode, n)
						if !ok1 || !ok2 {
							row = append(row, "–")
							continue
						}
						row = append(row, fmt.Sprintf("%.2f", a.Seconds.Mean/x.Seconds.Mean))
					}
					rows = append(rows, row)
				}
			}
		}
		mdTable(&b, head, rows)
	}

	fmt.Fprintf(&b, "### Against the paper: time added over the local-disk job, in seconds and in RTTs of the site\n\n")
	fmt.Fprintf(&b, "Absolute times are not comparable (the paper's PyROOT job spends about 3 s starting and 15 ms per event; this Go job a few ms and well under 1 ms), "+
		"but the time a site adds over local disk is: divided by the RTT it counts the round trips a job waits for. The paper's anchor is its Table 2 BeeGFS row, ours the direct-local job of this run.\n\n")
	rows = nil
	extra := func(t, base, rttMS float64) string {
		return fmt.Sprintf("%s (%.0f RTT)", fmtSeconds(t-base), (t-base)/(rttMS/1e3))
	}
	for _, l := range r.Sites {
		p2, ok := paperTable2[l.Name]
		p3 := paperTable3[l.Name]
		if !ok {
			continue
		}
		for i, n := range paperEvents {
			c, ok := r.cell("direct", l.Name, modeStream, n)
			if !ok {
				continue
			}
			base := paperTable2["BeeGFS FR"][i]
			lc, _ := r.cell("local", "", modeStream, n)
			row := []string{l.Name, eventsLabel(n), extra(p2[i], base, l.NominalMS), extra(p3[i], base, l.NominalMS), extra(c.Seconds.Mean, lc.Seconds.Mean, l.MeasuredMS)}
			for _, kind := range r.Caches {
				if cc, ok := r.cell(kind+"-cold", l.Name, modeStream, n); ok {
					row = append(row, extra(cc.Seconds.Mean, lc.Seconds.Mean, l.MeasuredMS))
				} else {
					row = append(row, "–")
				}
			}
			rows = append(rows, row)
		}
	}
	h = []string{"site", "events", "paper direct", "paper XCache cold", "ours direct"}
	for _, kind := range r.Caches {
		h = append(h, "ours "+kind+" cold")
	}
	if len(rows) > 0 {
		mdTable(&b, h, rows)
	} else {
		fmt.Fprintf(&b, "(no site and event count in common with the paper's)\n\n")
	}
	fmt.Fprintf(&b, "Figures: workflow-fig4.png (hot cache vs direct per site), workflow-fig5-CACHE.png (direct vs cold cache per site), workflow-cpueff.png (CPU efficiency vs RTT).\n\n")
	return b.Bytes()
}

func mapStr(in []string, f func(string) string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = f(s)
	}
	return out
}

func (r *WorkflowResult) series(name, config, site, mode string, col int, dashed bool) report.Series {
	s := report.Series{Name: name, Color: report.Palette[col%len(report.Palette)], Dashed: dashed, Markers: true}
	for _, n := range r.Events {
		c, ok := r.cell(config, site, mode, n)
		if !ok {
			continue
		}
		s.X = append(s.X, float64(n))
		s.Y = append(s.Y, math.Log10(c.Seconds.Mean))
	}
	return s
}

func (r *WorkflowResult) charts() map[string]*report.Chart {
	out := map[string]*report.Chart{}
	// Times span orders of magnitude: plot log10(seconds), label seconds.
	logSec := func(v float64) string { return fmtSeconds(math.Pow(10, v)) }
	evFmt := func(v float64) string { return eventsLabel(int64(math.Round(v))) }
	far := r.Sites[len(r.Sites)-1].Name
	f4 := &report.Chart{Title: "Workflow: hot cache vs direct access per site (stream; like seed 000 Fig. 4)",
		XLabel: "events processed", YLabel: "completion time [s], log scale", XAxis: report.AxisLog, XFormat: evFmt, YFormat: logSec}
	for i, kind := range r.Caches {
		s := r.series(kind+" hot", kind+"-hot", far, modeStream, i, false)
		s.Color = []color.RGBA{report.Black, report.Navy}[i%2]
		f4.Series = append(f4.Series, s)
	}
	for i, l := range r.Sites {
		f4.Series = append(f4.Series, r.series("direct "+l.Name, "direct", l.Name, modeStream, i, true))
	}
	f4.Series = append(f4.Series, r.series("local disk", "local", "", modeStream, 10, false))
	out["workflow-fig4.png"] = f4
	for _, kind := range r.Caches {
		f5 := &report.Chart{Title: "Workflow: direct (dashed) vs " + kind + " cold (solid) per site (stream; like seed 000 Fig. 5)",
			XLabel: "events processed", YLabel: "completion time [s], log scale", XAxis: report.AxisLog, XFormat: evFmt, YFormat: logSec}
		for i, l := range r.Sites {
			f5.Series = append(f5.Series, r.series(l.Name+" direct", "direct", l.Name, modeStream, i, true))
			f5.Series = append(f5.Series, r.series(l.Name+" cold", kind+"-cold", l.Name, modeStream, i, false))
		}
		out["workflow-fig5-"+kind+".png"] = f5
	}
	nmax := r.Events[len(r.Events)-1]
	fe := &report.Chart{Title: fmt.Sprintf("CPU efficiency vs RTT, %s events (like seed 002 Fig. 3)", eventsLabel(nmax)),
		XLabel: "RTT [ms]", YLabel: "CPU time / wall time", YMin: 0, YMax: 1.05,
		YFormat: func(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) }}
	for i, config := range append([]string{"direct"}, mapStr(r.Caches, func(k string) string { return k + "-cold" })...) {
		for j, mode := range r.Modes {
			s := report.Series{Name: config + " " + mode, Color: report.Palette[i%len(report.Palette)], Dashed: j > 0, Markers: true}
			for _, l := range r.Sites {
				if c, ok := r.cell(config, l.Name, mode, nmax); ok {
					s.X = append(s.X, l.MeasuredMS)
					s.Y = append(s.Y, c.CPUEfficiency.Mean)
				}
			}
			fe.Series = append(fe.Series, s)
		}
	}
	if c, ok := r.cell("local", "", modeStream, nmax); ok {
		fe.HRules = append(fe.HRules, report.Rule{Value: c.CPUEfficiency.Mean, Label: "local disk", Color: report.Gray, Dashed: true})
	}
	out["workflow-cpueff.png"] = fe
	return out
}
