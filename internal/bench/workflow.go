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
	"strings"
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
	// Jobs are the analysis jobs, run side by side on the same file:
	// "go-hep" (hepcache's root:// client and groot), "uproot" (uproot and
	// awkward reading through XrdCl with fsspec-xrootd), "xrdcl-proxy"
	// (the uproot job with XrdCl's proxy plugin sending it to the cache in
	// forwarding mode, seed 000's set-up). Default "uproot" where Python
	// imports uproot and fsspec-xrootd, else "go-hep". Every job's
	// histograms must equal the go-hep job's on the local file, or the
	// run fails.
	Jobs []string
	// Python is the Python jobs' interpreter. Default DefaultPython().
	Python string
	// XrdCl picks the Python jobs' XRootD bindings: "venv" (what Python
	// imports: PyPI's xrootd 6 in .ci/install's venv) or "debian"
	// (python3-xrootd 5.5.3). Default "venv" for uproot and "debian" for
	// xrdcl-proxy, whose plugin is then Debian's libXrdClProxyPlugin-5.
	XrdCl string
	// Inputs, when set, replaces the generated file by every *.root file
	// under this directory (e.g. go-hep's groot/testdata, written by C++
	// ROOT): the uproot job reads each whole, locally, directly from the
	// farthest site and through each cache cold and hot, and every read's
	// digest must equal the local one's (see workflow_inputs.go).
	Inputs string
	// HepcacheBin is the hepcache binary (cache and job). Default: this
	// executable.
	HepcacheBin string
	// CacheFlags are extra `hepcache serve` flags.
	CacheFlags []string
	// Smoke starts the origin with its monitoring, the first site's link
	// and each cache as the benchmark does, and reads the input file
	// through each, measuring nothing (no job runs).
	Smoke bool
	// Out receives the Markdown report; Progress the progress lines
	// (default stderr).
	Out, Progress io.Writer
}

func (c *WorkflowConfig) ensureDefaults() error {
	if c.Dir == "" {
		return fmt.Errorf("bench workflow: a results directory is required")
	}
	if c.Smoke {
		c.FileEvents, c.Events, c.Repeat, c.Jobs = 30, []int64{1}, 1, []string{jobGoHEP}
		if len(c.Sites) == 0 {
			c.Sites = PaperSites()[:1]
		}
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
	if c.Python == "" {
		c.Python = DefaultPython()
	}
	if len(c.Jobs) == 0 {
		c.Jobs = []string{jobUproot}
		if PythonJobError(c.Python) != nil {
			c.Jobs = []string{jobGoHEP}
		}
	}
	for _, j := range c.Jobs {
		if !slices.Contains(jobKinds, j) {
			return fmt.Errorf("bench workflow: unknown job %q (have %s)", j, strings.Join(jobKinds, ", "))
		}
	}
	if c.XrdCl != "" && c.XrdCl != xrdclVenv && c.XrdCl != xrdclDebian {
		return fmt.Errorf("bench workflow: unknown XRootD bindings %q (have %s, %s)", c.XrdCl, xrdclVenv, xrdclDebian)
	}
	var err error
	c.HepcacheBin, err = defaultBin(c.HepcacheBin)
	if c.Out == nil {
		c.Out = os.Stdout
	}
	return err
}

// xrdclFor returns the bindings a Python job uses.
func (c *WorkflowConfig) xrdclFor(job string) string {
	switch {
	case c.XrdCl != "":
		return c.XrdCl
	case job == jobProxy:
		return xrdclDebian
	}
	return xrdclVenv
}

// Access modes.
const (
	modeStream = "stream"
	modeCopy   = "copy2scratch"
)

// WorkflowRun is one measured job.
type WorkflowRun struct {
	// Job is the analysis job (go-hep, uproot, xrdcl-proxy).
	Job string `json:"job"`
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
	Result        *jobResult `json:"result"`
	// Server is what the server the job read from (the origin for
	// direct, else the cache) reported on its f-stream about the job's
	// requests (stream mode only).
	Server *RequestStats `json:"server,omitempty"`
}

// WorkflowCell is the summary of the repetitions of one configuration.
type WorkflowCell struct {
	Job           string  `json:"job"`
	Config        string  `json:"config"`
	Site          string  `json:"site,omitempty"`
	RTTms         float64 `json:"rtt_ms,omitempty"`
	Mode          string  `json:"mode"`
	Events        int64   `json:"events"`
	Seconds       Stat    `json:"seconds"`
	InputSeconds  Stat    `json:"input_s"`
	CPUEfficiency Stat    `json:"cpu_efficiency"`
	// VsLocal is Seconds.Mean over the direct-local mean of the same job
	// and events: the anchor measured in the same run.
	VsLocal float64 `json:"vs_local"`
	// Server is the mean of the runs' f-stream figures.
	Server *RequestStats `json:"server,omitempty"`
	// ClientRequests and ClientChunks are what the job counted itself
	// (go-hep: reads; uproot: requests and the ranges they asked for).
	ClientRequests float64 `json:"client_requests"`
	ClientChunks   float64 `json:"client_chunks"`
}

// WorkflowResult is everything one run measured.
type WorkflowResult struct {
	FileEvents int         `json:"file_events"`
	FileBytes  int64       `json:"file_bytes"`
	Events     []int64     `json:"events"`
	Repeat     int         `json:"repeat"`
	Sites      []*SiteLink `json:"sites"`
	Caches     []string    `json:"caches"`
	Modes      []string    `json:"modes"`
	Work       int         `json:"work"`
	ReadAhead  int         `json:"readahead"`
	Jobs       []string    `json:"jobs"`
	// Clients names each job's libraries.
	Clients map[string]string `json:"clients"`
	// PhysicsChecked counts the jobs whose histograms were compared with
	// the go-hep job's on the local file (all equal, or the run failed).
	PhysicsChecked int            `json:"physics_checked"`
	Cells          []WorkflowCell `json:"cells"`
	Runs           []WorkflowRun  `json:"runs"`
	Started        time.Time      `json:"started"`
	Seconds        float64        `json:"total_seconds"`
}

// Workflow runs the workflow benchmark and writes workflow.json,
// workflow.md and the figures into cfg.Dir.
func Workflow(ctx context.Context, cfg WorkflowConfig) (_ *WorkflowResult, err error) {
	if err := cfg.ensureDefaults(); err != nil {
		return nil, err
	}
	wd := newWatch(ctx)
	ctx = wd.ctx
	defer wd.close()
	defer func() { err = wd.result(err) }()
	if err := needTools("workflow", "xrootd", "xrdcp"); err != nil {
		return nil, err
	}
	if cfg.Inputs != "" {
		return nil, workflowInputs(ctx, cfg)
	}
	progress := progressFunc(cfg.Progress, "workflow")
	res := &WorkflowResult{FileEvents: cfg.FileEvents, Events: cfg.Events, Repeat: cfg.Repeat,
		Caches: cfg.Caches, Modes: cfg.Modes, Work: cfg.Work, ReadAhead: cfg.ReadAhead, Jobs: cfg.Jobs,
		Clients: map[string]string{}, Started: time.Now()}

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
	scratch := filepath.Join(cfg.Dir, "scratch")
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(scratch)
	jo := jobOpts{Work: cfg.Work, ReadAhead: cfg.ReadAhead, Hist: filepath.Join(scratch, "hist.root")}
	runners := map[string]*jobRunner{}
	for _, kind := range cfg.Jobs {
		if cfg.Smoke {
			break // no job runs
		}
		jr := &jobRunner{kind: kind, bin: cfg.HepcacheBin, opts: jo}
		res.Clients[kind] = "hepcache's root:// client, go-hep groot"
		if kind != jobGoHEP {
			if jr.py, err = newPyEnv(cfg.Python, cfg.xrdclFor(kind), filepath.Join(cfg.Dir, "python-"+kind)); err != nil {
				return nil, fmt.Errorf("bench workflow --job %s: %w", kind, err)
			}
			res.Clients[kind] = jr.py.label
			if kind == jobProxy {
				res.Clients[kind] += ", XRD_PLUGIN=" + jr.py.plugin
			}
		}
		runners[kind] = jr
		progress("job %s: %s", kind, res.Clients[kind])
	}

	// The physics every job must reproduce: the go-hep job on local disk.
	ref := map[int64]*ttbar.Timings{}
	goHEP := &jobRunner{kind: jobGoHEP, bin: cfg.HepcacheBin, opts: jo}
	for _, n := range cfg.Events {
		if cfg.Smoke {
			break
		}
		j, err := goHEP.run(ctx, local, n, "")
		if err != nil {
			return nil, fmt.Errorf("reference job: %w", err)
		}
		ref[n] = &j.Timings
	}

	if err := xrdproc.GiveToServerUser(dataDir); err != nil {
		return nil, err
	}
	originMon, err := newFStreamCollector()
	if err != nil {
		return nil, err
	}
	defer originMon.close()
	origin, err := xrdproc.StartOrigin(dataDir, func(o *xrdproc.OriginOptions) { o.Config = xcacheMonitorConfig(originMon.addr()) })
	if err != nil {
		return nil, err
	}
	defer origin.Remove()
	wd.xrootd("origin", origin)
	progress("origin: C++ xrootd at %s", origin.Addr)
	links, closeLinks, err := openLinks(ctx, cfg.Sites, origin.Addr, cfg.Bandwidth, progress)
	if err != nil {
		return nil, err
	}
	defer closeLinks()
	res.Sites = links
	if cfg.Smoke {
		return nil, smokeBehindLink(smoke{ctx: ctx, progress: progress, file: "/" + rel}, wd, origin, links[0].Addr, cfg.Caches,
			func(kind string) (*cacheProc, error) {
				mon, err := newFStreamCollector()
				if err != nil {
					return nil, err
				}
				c, err := startCacheProcOpts(kind, cfg.HepcacheBin, filepath.Join(cfg.Dir, "cache-"+kind+"-smoke"), links[0].Addr, cfg.CacheFlags,
					cacheOpts{monitor: mon.addr()})
				if err != nil {
					mon.close()
					return nil, err
				}
				stop := c.stop
				c.stop = func() { stop(); mon.close() }
				return c, nil
			})
	}

	w := &workflowRun{cfg: &cfg, res: res, ref: ref, scratch: scratch, progress: progress, watch: wd}
	for _, kind := range cfg.Jobs {
		if err := w.job(ctx, runners[kind], links, local, rel, originMon); err != nil {
			return nil, err
		}
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

// workflowRun is one Workflow call's measuring state.
type workflowRun struct {
	cfg      *WorkflowConfig
	res      *WorkflowResult
	ref      map[int64]*ttbar.Timings
	scratch  string
	caches   int // caches started, for their directory names
	progress func(string, ...any)
	watch    *watch
}

// monitorWait bounds the wait for a server's close record of a job.
const monitorWait = 5*fstreamFlush + 2*time.Second

// add records a run after checking its physics against the reference.
func (w *workflowRun) add(r WorkflowRun) error {
	if err := ttbar.SamePhysics(&r.Result.Timings, w.ref[r.Events]); err != nil {
		return fmt.Errorf("%s job, %s %s %s, %d events: not the go-hep job's histograms on local disk: %w", r.Job, r.Config, r.Site, r.Mode, r.Events, err)
	}
	w.res.PhysicsChecked++
	w.res.Runs = append(w.res.Runs, r)
	return nil
}

// stream runs the job reading input over the network (or local disk) and,
// with mon, takes the server's f-stream figures of the job's requests.
func (w *workflowRun) stream(ctx context.Context, jr *jobRunner, config, site, input, proxy string, n int64, rep int, mon *fstreamCollector) error {
	j, err := jr.run(ctx, input, n, proxy)
	if err != nil {
		return fmt.Errorf("%s %s: %w", config, site, err)
	}
	r := WorkflowRun{Job: jr.kind, Config: config, Site: site, Mode: modeStream, Events: n, Rep: rep,
		Seconds: j.ProcessSeconds, InputSeconds: j.FirstEventSeconds, CPUEfficiency: j.CPUSeconds / j.ProcessSeconds, Result: j}
	if mon != nil {
		if r.Server, err = mon.forPID(j.PID, monitorWait); err != nil {
			if jr.kind == jobProxy && proxy != "" {
				return fmt.Errorf("%s %s: the proxy plugin did not send the job to the cache: %w", config, site, err)
			}
			// A record can come late (a job that exits without closing
			// leaves the close to the server's disconnect, seen once
			// through a WAN link) or be lost (UDP): the run stands
			// without the server's figures.
			w.progress("%s job, %s %s, %d events: %v", jr.kind, config, site, n, err)
		}
	}
	return w.add(r)
}

// copyRuns copies the input to scratch once (t1), then runs every event
// count on the local copy; each job's completion time is t1 plus its own.
func (w *workflowRun) copyRuns(ctx context.Context, jr *jobRunner, config, site, url, proxy string, rep int) error {
	dst := filepath.Join(w.scratch, "input.root")
	t1, err := jr.copyInput(ctx, url, dst, proxy)
	if err != nil {
		return fmt.Errorf("%s %s: %w", config, site, err)
	}
	defer os.Remove(dst)
	for _, n := range w.cfg.Events {
		j, err := jr.run(ctx, dst, n, "")
		if err != nil {
			return fmt.Errorf("%s %s: %w", config, site, err)
		}
		total := t1 + j.ProcessSeconds
		if err := w.add(WorkflowRun{Job: jr.kind, Config: config, Site: site, Mode: modeCopy, Events: n, Rep: rep,
			Seconds: total, InputSeconds: t1, CPUEfficiency: j.CPUSeconds / total, Result: j}); err != nil {
			return err
		}
	}
	return nil
}

// job measures one analysis job: on local disk (the anchor), directly from
// each site, and through each cache, cold (a new, empty cache per job)
// from each site and hot (the file already in the cache; its origin the
// farthest site).
func (w *workflowRun) job(ctx context.Context, jr *jobRunner, links []*SiteLink, local, rel string, originMon *fstreamCollector) error {
	cfg, progress := w.cfg, w.progress
	has := func(m string) bool { return slices.Contains(cfg.Modes, m) }
	for rep := 0; rep < cfg.Repeat; rep++ {
		for _, n := range cfg.Events {
			if err := w.stream(ctx, jr, "local", "", local, "", n, rep, nil); err != nil {
				return err
			}
		}
	}
	progress("%s: direct local done", jr.kind)

	for _, l := range links {
		url := "root://" + l.Addr + "//" + rel
		for rep := 0; rep < cfg.Repeat; rep++ {
			if has(modeStream) {
				for _, n := range cfg.Events {
					if err := w.stream(ctx, jr, "direct", l.Name, url, "", n, rep, originMon); err != nil {
						return err
					}
				}
			}
			if has(modeCopy) {
				if err := w.copyRuns(ctx, jr, "direct", l.Name, url, "", rep); err != nil {
					return err
				}
			}
		}
		progress("%s: direct from %s done", jr.kind, l.Name)
	}

	// The proxy job names the site and the cache forwards to it; the
	// others name the cache, which has the site as its origin.
	forward := jr.kind == jobProxy
	type started struct {
		c   *cacheProc
		mon *fstreamCollector
		// url is what the job opens, proxy what XROOT_PROXY names.
		url, proxy string
	}
	start := func(kind string, l *SiteLink) (*started, error) {
		w.caches++
		mon, err := newFStreamCollector()
		if err != nil {
			return nil, err
		}
		c, err := startCacheProcOpts(kind, cfg.HepcacheBin, filepath.Join(cfg.Dir, fmt.Sprintf("cache-%s-%d", kind, w.caches)), l.Addr, cfg.CacheFlags,
			cacheOpts{forward: forward, monitor: mon.addr()})
		if err != nil {
			mon.close()
			return nil, err
		}
		w.watch.cache(c)
		s := &started{c: c, mon: mon, url: c.url() + "//" + rel}
		if forward {
			s.url, s.proxy = "root://"+l.Addr+"//"+rel, c.url()
		}
		return s, nil
	}
	stop := func(s *started) { s.c.stop(); s.mon.close() }
	for _, kind := range cfg.Caches {
		for _, l := range links {
			for rep := 0; rep < cfg.Repeat; rep++ {
				if has(modeStream) {
					for _, n := range cfg.Events {
						s, err := start(kind, l)
						if err != nil {
							return err
						}
						err = w.stream(ctx, jr, kind+"-cold", l.Name, s.url, s.proxy, n, rep, s.mon)
						stop(s)
						if err != nil {
							return err
						}
					}
				}
				if has(modeCopy) {
					s, err := start(kind, l)
					if err != nil {
						return err
					}
					err = w.copyRuns(ctx, jr, kind+"-cold", l.Name, s.url, s.proxy, rep)
					stop(s)
					if err != nil {
						return err
					}
				}
			}
			progress("%s: %s cold from %s done", jr.kind, kind, l.Name)
		}
		far := links[len(links)-1]
		s, err := start(kind, far)
		if err != nil {
			return err
		}
		if _, err := jr.copyInput(ctx, s.url, "/dev/null", s.proxy); err != nil {
			stop(s)
			return fmt.Errorf("warm %s: %w", kind, err)
		}
		// XCache writes blocks asynchronously; give both a moment to
		// have the file complete on disk before "hot" is measured.
		time.Sleep(500 * time.Millisecond)
		for rep := 0; rep < cfg.Repeat && err == nil; rep++ {
			if has(modeStream) {
				for _, n := range cfg.Events {
					if err = w.stream(ctx, jr, kind+"-hot", far.Name, s.url, s.proxy, n, rep, s.mon); err != nil {
						break
					}
				}
			}
			if has(modeCopy) && err == nil {
				err = w.copyRuns(ctx, jr, kind+"-hot", far.Name, s.url, s.proxy, rep)
			}
		}
		stop(s)
		if err != nil {
			return err
		}
		progress("%s: %s hot done", jr.kind, kind)
	}
	return nil
}

type cellKey struct {
	job, config, site, mode string
	events                  int64
}

func (r *WorkflowResult) summarise(links []*SiteLink) {
	rtt := map[string]float64{}
	for _, l := range links {
		rtt[l.Name] = l.MeasuredMS
	}
	var order []cellKey
	groups := map[cellKey][]WorkflowRun{}
	for _, run := range r.Runs {
		k := cellKey{run.Job, run.Config, run.Site, run.Mode, run.Events}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], run)
	}
	type jobEvents struct {
		job    string
		events int64
	}
	localMean := map[jobEvents]float64{}
	for _, k := range order {
		var s, in, eff []float64
		var srv []*RequestStats
		var reqs, chunks float64
		for _, run := range groups[k] {
			s, in, eff = append(s, run.Seconds), append(in, run.InputSeconds), append(eff, run.CPUEfficiency)
			if run.Server != nil {
				srv = append(srv, run.Server)
			}
			reqs += float64(run.Result.Reads)
			chunks += float64(max(run.Result.Chunks, run.Result.Reads))
		}
		n := float64(len(groups[k]))
		c := WorkflowCell{Job: k.job, Config: k.config, Site: k.site, RTTms: rtt[k.site], Mode: k.mode, Events: k.events,
			Seconds: meanSD(s), InputSeconds: meanSD(in), CPUEfficiency: meanSD(eff), Server: meanRequests(srv),
			ClientRequests: reqs / n, ClientChunks: chunks / n}
		if k.config == "local" {
			localMean[jobEvents{k.job, k.events}] = c.Seconds.Mean
		}
		r.Cells = append(r.Cells, c)
	}
	for i := range r.Cells {
		if m := localMean[jobEvents{r.Cells[i].Job, r.Cells[i].Events}]; m > 0 {
			r.Cells[i].VsLocal = r.Cells[i].Seconds.Mean / m
		}
	}
}

// meanRequests averages the runs' f-stream figures (nil for none).
func meanRequests(v []*RequestStats) *RequestStats {
	if len(v) == 0 {
		return nil
	}
	var m RequestStats
	for _, s := range v {
		m.Files += s.Files
		m.Reads += s.Reads
		m.ReadVs += s.ReadVs
		m.ReadVSegs += s.ReadVSegs
		m.Bytes += s.Bytes
		m.ReadMax = max(m.ReadMax, s.ReadMax)
		m.ReadVMax = max(m.ReadVMax, s.ReadVMax)
	}
	n := len(v)
	m.Files, m.Reads, m.ReadVs, m.ReadVSegs, m.Bytes = m.Files/n, m.Reads/int64(n), m.ReadVs/int64(n), m.ReadVSegs/int64(n), m.Bytes/int64(n)
	return &m
}

func (r *WorkflowResult) cell(job, config, site, mode string, events int64) (WorkflowCell, bool) {
	for _, c := range r.Cells {
		if c.Job == job && c.Config == config && c.Site == site && c.Mode == mode && c.Events == events {
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
		"Mean ± SD of %d runs; completion time of the analysis job in seconds (process wall time, interpreter start included; for copy2scratch the xrdcp copy plus the job). "+
		"Work factor %d.\n\n", r.FileEvents, float64(r.FileBytes)/1e6, float64(r.FileBytes)/float64(r.FileEvents)/1e3, r.Repeat, max(r.Work, 1))
	fmt.Fprintf(&b, "Jobs (the same analysis: every particle's pseudorapidity and the reconstructed ttbar mass, filled into histograms):\n\n")
	for _, j := range r.Jobs {
		desc := r.Clients[j]
		if j == jobGoHEP {
			desc += fmt.Sprintf(", %d-byte read-ahead", r.ReadAhead)
		}
		fmt.Fprintf(&b, "- **%s**: %s\n", j, desc)
	}
	fmt.Fprintf(&b, "\nEvery one of the %d jobs filled histograms equal bin for bin to the go-hep job's on local disk over the same events.\n\n", r.PhysicsChecked)
	fmt.Fprintf(&b, "Sites (RTT measured through the emulated link, 10 probes):\n\n")
	var rows [][]string
	for _, l := range r.Sites {
		rows = append(rows, []string{l.Name, fmt.Sprintf("%.2f", l.NominalMS), fmt.Sprintf("%.3f ± %.3f", l.MeasuredMS, l.SDMS)})
	}
	mdTable(&b, []string{"site", "paper RTT [ms]", "measured RTT [ms]"}, rows)

	// Columns: each event count, the jobs side by side.
	multi := len(r.Jobs) > 1
	head := []string{"configuration"}
	for _, n := range r.Events {
		for _, j := range r.Jobs {
			h := eventsLabel(n)
			if multi {
				h += " " + j
			}
			head = append(head, h)
		}
	}
	far := r.Sites[len(r.Sites)-1].Name
	for _, mode := range r.Modes {
		fmt.Fprintf(&b, "### Without cache, %s (shaped like Table 2) [s]\n\n", mode)
		rows = nil
		line := func(label, config, site, mode string) {
			row := []string{label}
			for _, n := range r.Events {
				for _, j := range r.Jobs {
					c, ok := r.cell(j, config, site, mode, n)
					if !ok {
						row = append(row, "–")
						continue
					}
					row = append(row, fmtStat(c.Seconds))
				}
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
			line("hot: file in cache (origin "+far+")", kind+"-hot", far, mode)
			for _, l := range r.Sites {
				line("cold: "+l.Name, kind+"-cold", l.Name, mode)
			}
			mdTable(&b, head, rows)
		}
	}

	// CPU efficiency against RTT at the largest event count (seed 002
	// Figure 3), and the ratios against the local anchor.
	nmax := r.Events[len(r.Events)-1]
	for _, job := range r.Jobs {
		fmt.Fprintf(&b, "### CPU efficiency (CPU time / wall time) and time relative to local disk, %s job, %s events, stream\n\n", job, eventsLabel(nmax))
		h := []string{"site", "RTT [ms]", "direct eff", "direct / local"}
		for _, kind := range r.Caches {
			h = append(h, kind+" cold eff", kind+" cold / local")
		}
		rows = nil
		for _, l := range r.Sites {
			row := []string{l.Name, fmt.Sprintf("%.2f", l.MeasuredMS)}
			for _, config := range append([]string{"direct"}, mapStr(r.Caches, func(k string) string { return k + "-cold" })...) {
				c, ok := r.cell(job, config, l.Name, modeStream, nmax)
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
		loc, _ := r.cell(job, "local", "", modeStream, nmax)
		rows = append(rows, pad([]string{"local disk", "0", fmt.Sprintf("%.0f %%", 100*loc.CPUEfficiency.Mean), "1.00x"}))
		for _, kind := range r.Caches {
			if c, ok := r.cell(job, kind+"-hot", far, modeStream, nmax); ok {
				rows = append(rows, pad([]string{kind + " hot", "–", fmt.Sprintf("%.0f %%", 100*c.CPUEfficiency.Mean), fmt.Sprintf("%.2fx", c.VsLocal)}))
			}
		}
		mdTable(&b, h, rows)
	}

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
						for _, j := range r.Jobs {
							a, ok1 := r.cell(j, "hepcache-"+temp, l.Name, mode, n)
							x, ok2 := r.cell(j, "xcache-"+temp, l.Name, mode, n)
							if !ok1 || !ok2 {
								row = append(row, "–")
								continue
							}
							row = append(row, fmt.Sprintf("%.2f", a.Seconds.Mean/x.Seconds.Mean))
						}
					}
					rows = append(rows, row)
				}
			}
		}
		mdTable(&b, head, rows)
	}
	r.requestsMarkdown(&b)

	fmt.Fprintf(&b, "### Against the paper: time added over the local-disk job, in seconds and in RTTs of the site\n\n")
	fmt.Fprintf(&b, "Absolute times are not comparable (the paper's PyROOT job spends about 3 s starting and 15 ms per event; the go-hep job a few ms and well under 1 ms, the uproot job about 1 s importing and columnar batches), "+
		"but the time a site adds over local disk is: divided by the RTT it counts the round trips a job waits for. The paper's anchor is its Table 2 BeeGFS row, ours the direct-local job of this run.\n\n")
	rows = nil
	extra := func(t, base, rttMS float64) string {
		return fmt.Sprintf("%s (%.0f RTT)", fmtSeconds(t-base), (t-base)/(rttMS/1e3))
	}
	for _, job := range r.Jobs {
		for _, l := range r.Sites {
			p2, ok := paperTable2[l.Name]
			p3 := paperTable3[l.Name]
			if !ok {
				continue
			}
			for i, n := range paperEvents {
				c, ok := r.cell(job, "direct", l.Name, modeStream, n)
				if !ok {
					continue
				}
				base := paperTable2["BeeGFS FR"][i]
				lc, _ := r.cell(job, "local", "", modeStream, n)
				row := []string{job, l.Name, eventsLabel(n), extra(p2[i], base, l.NominalMS), extra(p3[i], base, l.NominalMS), extra(c.Seconds.Mean, lc.Seconds.Mean, l.MeasuredMS)}
				for _, kind := range r.Caches {
					if cc, ok := r.cell(job, kind+"-cold", l.Name, modeStream, n); ok {
						row = append(row, extra(cc.Seconds.Mean, lc.Seconds.Mean, l.MeasuredMS))
					} else {
						row = append(row, "–")
					}
				}
				rows = append(rows, row)
			}
		}
	}
	h := []string{"job", "site", "events", "paper direct", "paper XCache cold", "ours direct"}
	for _, kind := range r.Caches {
		h = append(h, "ours "+kind+" cold")
	}
	if len(rows) > 0 {
		mdTable(&b, h, rows)
	} else {
		fmt.Fprintf(&b, "(no site and event count in common with the paper's)\n\n")
	}
	fmt.Fprintf(&b, "Figures: workflow-fig4.png (hot cache vs direct per site), workflow-fig5-CACHE.png (direct vs cold cache per site), workflow-cpueff.png (CPU efficiency vs RTT)")
	if multi {
		fmt.Fprintf(&b, ", for the %s job; the other jobs' have the job's name appended (workflow-fig4-%s.png)", r.Jobs[0], r.Jobs[1])
	}
	fmt.Fprintf(&b, ".\n\n")
	return b.Bytes()
}

// requestsMarkdown writes what the servers' f-streams say each job asked
// for: the access pattern a site's cache sees from each client.
func (r *WorkflowResult) requestsMarkdown(b *bytes.Buffer) {
	far := r.Sites[len(r.Sites)-1].Name
	configs := []string{"direct"}
	for _, k := range r.Caches {
		configs = append(configs, k+"-cold", k+"-hot")
	}
	var rows [][]string
	for _, job := range r.Jobs {
		for _, n := range r.Events {
			for _, config := range configs {
				c, ok := r.cell(job, config, far, modeStream, n)
				if !ok || c.Server == nil {
					continue
				}
				s := c.Server
				where := "origin"
				if config != "direct" {
					where = config
				}
				segs, perV := "–", "–"
				if s.ReadVs > 0 {
					perV = fmt.Sprintf("%.1f", float64(s.ReadVSegs)/float64(s.ReadVs))
				}
				segs = strconv.FormatInt(s.ReadVs, 10)
				perReq := "–"
				if q := s.Requests(); q > 0 {
					perReq = fmtBytes(float64(s.Bytes) / float64(q))
				}
				rows = append(rows, []string{job, eventsLabel(n), where, strconv.FormatInt(s.Requests(), 10), segs, perV, perReq,
					fmt.Sprintf("%.3g", float64(s.Requests())/float64(n)), fmtBytes(float64(max(s.ReadMax, s.ReadVMax))), fmtBytes(float64(s.Bytes)),
					fmt.Sprintf("%.0f / %.0f", c.ClientRequests, c.ClientChunks)})
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "### What the server saw of each job: its requests, from the f-stream (stream, from %s)\n\n", far)
	fmt.Fprintf(b, "Per job run, from the close records (XrdXrootdMonStatOPS) of the monitoring f-stream of the server the job read from: the C++ origin for direct reads, else the cache. "+
		"A request is a read or a vector read (kXR_readv) of several segments. The last column is what the job counted itself: "+
		"go-hep its reads (after its read-ahead), uproot its requests to fsspec-xrootd and the byte ranges they carried.\n\n")
	mdTable(b, []string{"job", "events", "read from", "requests", "vector reads", "segments / vector read", "bytes / request", "requests / event", "largest request", "bytes", "job's own count: requests / ranges"}, rows)
}

// fmtBytes prints a byte count with a binary-free SI unit.
func fmtBytes(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.1f MB", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1f kB", v/1e3)
	}
	return fmt.Sprintf("%.0f B", v)
}

func mapStr(in []string, f func(string) string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = f(s)
	}
	return out
}

func (r *WorkflowResult) series(name, job, config, site, mode string, col int, dashed bool) report.Series {
	s := report.Series{Name: name, Color: report.Palette[col%len(report.Palette)], Dashed: dashed, Markers: true}
	for _, n := range r.Events {
		c, ok := r.cell(job, config, site, mode, n)
		if !ok {
			continue
		}
		s.X = append(s.X, float64(n))
		s.Y = append(s.Y, math.Log10(c.Seconds.Mean))
	}
	return s
}

// charts draws the figures of each job; the first job's files have the
// plain names, the others' the job's name appended.
func (r *WorkflowResult) charts() map[string]*report.Chart {
	out := map[string]*report.Chart{}
	for i, job := range r.Jobs {
		suffix := ""
		if i > 0 {
			suffix = "-" + job
		}
		for name, c := range r.jobCharts(job) {
			if !hasPoints(c) {
				// Nothing to draw (e.g. no stream runs); an empty log
				// axis would also send report.logTicks into an endless
				// loop (log10(0)).
				continue
			}
			c.Title += " [" + job + " job]"
			out[strings.TrimSuffix(name, ".png")+suffix+".png"] = c
		}
	}
	return out
}

func hasPoints(c *report.Chart) bool {
	for _, s := range c.Series {
		if len(s.X) > 0 {
			return true
		}
	}
	return false
}

func (r *WorkflowResult) jobCharts(job string) map[string]*report.Chart {
	out := map[string]*report.Chart{}
	// Times span orders of magnitude: plot log10(seconds), label seconds.
	logSec := func(v float64) string { return fmtSeconds(math.Pow(10, v)) }
	evFmt := func(v float64) string { return eventsLabel(int64(math.Round(v))) }
	far := r.Sites[len(r.Sites)-1].Name
	f4 := &report.Chart{Title: "Workflow: hot cache vs direct access per site (stream; like seed 000 Fig. 4)",
		XLabel: "events processed", YLabel: "completion time [s], log scale", XAxis: report.AxisLog, XFormat: evFmt, YFormat: logSec}
	for i, kind := range r.Caches {
		s := r.series(kind+" hot", job, kind+"-hot", far, modeStream, i, false)
		s.Color = []color.RGBA{report.Black, report.Navy}[i%2]
		f4.Series = append(f4.Series, s)
	}
	for i, l := range r.Sites {
		f4.Series = append(f4.Series, r.series("direct "+l.Name, job, "direct", l.Name, modeStream, i, true))
	}
	f4.Series = append(f4.Series, r.series("local disk", job, "local", "", modeStream, 10, false))
	out["workflow-fig4.png"] = f4
	for _, kind := range r.Caches {
		f5 := &report.Chart{Title: "Workflow: direct (dashed) vs " + kind + " cold (solid) per site (stream; like seed 000 Fig. 5)",
			XLabel: "events processed", YLabel: "completion time [s], log scale", XAxis: report.AxisLog, XFormat: evFmt, YFormat: logSec}
		for i, l := range r.Sites {
			f5.Series = append(f5.Series, r.series(l.Name+" direct", job, "direct", l.Name, modeStream, i, true))
			f5.Series = append(f5.Series, r.series(l.Name+" cold", job, kind+"-cold", l.Name, modeStream, i, false))
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
				if c, ok := r.cell(job, config, l.Name, mode, nmax); ok {
					s.X = append(s.X, l.MeasuredMS)
					s.Y = append(s.Y, c.CPUEfficiency.Mean)
				}
			}
			fe.Series = append(fe.Series, s)
		}
	}
	if c, ok := r.cell(job, "local", "", modeStream, nmax); ok {
		fe.HRules = append(fe.HRules, report.Rule{Value: c.CPUEfficiency.Mean, Label: "local disk", Color: report.Gray, Dashed: true})
	}
	out["workflow-cpueff.png"] = fe
	return out
}
