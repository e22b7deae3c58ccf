package main

// Flags of the benchmarks that reproduce the seeds' experiments; the logic
// is in internal/bench.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hepcache/hepcache/internal/bench"
	"github.com/hepcache/hepcache/internal/bench/ttbar"
	"github.com/hepcache/hepcache/internal/config"
)

// int64List is a comma-separated list flag of integers ("1,100,1k,50k").
type int64List []int64

func (l *int64List) String() string {
	s := make([]string, len(*l))
	for i, v := range *l {
		s[i] = strconv.FormatInt(v, 10)
	}
	return strings.Join(s, ",")
}

func (l *int64List) Set(v string) error {
	*l = nil
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		mult := int64(1)
		if strings.HasSuffix(f, "k") {
			f, mult = strings.TrimSuffix(f, "k"), 1000
		}
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return fmt.Errorf("bad number %q in list", f)
		}
		*l = append(*l, n*mult)
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// benchJob runs one pseudo-analysis job and prints its timings as JSON: the
// child process of `hepcache bench workflow`, usable on its own.
func benchJob(ctx context.Context, args []string) error {
	fs := newFlagSet("bench job", "")
	var cfg ttbar.JobConfig
	fs.StringVar(&cfg.Input, "input", "", "input ROOT file: a local path or root://host:port//path")
	fs.Int64Var(&cfg.Events, "events", 0, "events to process (0: all)")
	fs.StringVar(&cfg.HistOut, "hist", "", "write the eta and m_tt histograms to this ROOT file")
	fs.IntVar(&cfg.Work, "work", 1, "per-event work factor (emulates slower analysis code)")
	fs.IntVar(&cfg.ReadAhead, "readahead", 0, "remote read-ahead block in bytes (0: none)")
	fs.IntVar(&cfg.Prefetch, "prefetch", 0, "baskets read ahead per branch (0: groot's default 2, -1: none)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	t, err := ttbar.Run(ctx, cfg)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(t)
}

// benchGenerate writes an input file of the workflow benchmark.
func benchGenerate(ctx context.Context, args []string) error {
	fs := newFlagSet("bench generate", "")
	var cfg ttbar.GenConfig
	out := fs.String("o", "ttbar.root", "output ROOT file")
	fs.IntVar(&cfg.Events, "events", 2000, "events (the paper: 50000, 200000, 500000)")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "generator seed (same seed, same events)")
	fs.IntVar(&cfg.Particles, "particles", 1600, "mean particles per event")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := ttbar.Generate(*out, cfg); err != nil {
		return err
	}
	st, err := os.Stat(*out)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %s: %d events, %.1f MB\n", *out, cfg.Events, float64(st.Size())/1e6)
	return nil
}

func benchWorkflow(ctx context.Context, args []string) error {
	fs := newFlagSet("bench workflow", "")
	var cfg bench.WorkflowConfig
	events := int64List{}
	sites, modes, caches, cacheFlags, jobs := "", "", "", "", ""
	paper := fs.Bool("paper", false, "the paper's sizes: a 50k-event file, events 1,100,1k,50k, 3 repetitions")
	generate := fs.Bool("generate", false, "only generate the input file (into -dir) and exit")
	bw := config.Size(0)
	fs.StringVar(&cfg.Dir, "dir", "results/workflow", "work and results directory")
	fs.IntVar(&cfg.FileEvents, "file-events", 2000, "events in the input file (the paper: 50k, 200k, 500k)")
	fs.Var(&events, "events", "events per job, comma-separated (default 1,100,1000,<file-events>)")
	fs.IntVar(&cfg.Repeat, "repeat", 2, "repetitions of each measurement")
	fs.StringVar(&sites, "sites", "", "sites as NAME=RTT,... (default the paper's six: dCache FR=380us, KIT=2.8ms, LRZ=10.3ms, DESY=20.8ms, BNL=89.5ms, TRIUMF=157.15ms)")
	fs.Var(&bw, "bandwidth", "bandwidth of each site link per second, e.g. 125M (default unlimited)")
	fs.StringVar(&modes, "modes", "stream,copy2scratch", "access modes")
	fs.StringVar(&caches, "caches", "hepcache,xcache", "caches to run cold and hot (empty for none)")
	fs.IntVar(&cfg.Work, "work", 1, "per-event work factor of the analysis job")
	fs.IntVar(&cfg.ReadAhead, "readahead", 4<<20, "job's remote read-ahead in bytes (-1: none)")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "input generator seed")
	fs.StringVar(&cacheFlags, "cache-flags", "", "extra `hepcache serve` flags, space-separated")
	fs.StringVar(&cfg.HepcacheBin, "bin", "", "hepcache binary run as cache and analysis job (default: this one)")
	fs.StringVar(&jobs, "job", "", "analysis jobs, comma-separated, side by side: uproot (uproot over XrdCl), xrdcl-proxy (uproot through XrdCl's proxy plugin and a forwarding cache), go-hep (hepcache's client and groot); default uproot where the Python has uproot and fsspec-xrootd, else go-hep")
	fs.StringVar(&cfg.Python, "python", "", "Python of the uproot jobs (default $HEPCACHE_PYTHON, else /opt/hepvenv/bin/python)")
	fs.StringVar(&cfg.XrdCl, "xrdcl", "", "XRootD bindings of the uproot jobs: venv (PyPI's, XrdCl 6) or debian (python3-xrootd, XrdCl 5.5.3); default venv for uproot, debian for xrdcl-proxy")
	fs.StringVar(&cfg.Inputs, "inputs", "", "instead of the generated file, read every *.root file under this directory (e.g. go-hep's groot/testdata) with the uproot job: local, direct and through each cache, each compared with the local read")
	fs.BoolVar(&cfg.Smoke, "smoke", false, "start every server as the benchmark would, read one small file through each with xrdcp, and exit: checks the set-up in seconds, measures nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := absPath(&cfg.Dir); err != nil {
		return err
	}
	cfg.Jobs = splitList(jobs)
	if *paper {
		cfg.FileEvents, cfg.Repeat = 50000, 3
		events = int64List{1, 100, 1000, 50000}
	}
	cfg.Events = events
	cfg.Bandwidth = int64(bw)
	if sites != "" {
		var err error
		if cfg.Sites, err = bench.ParseSites(sites); err != nil {
			return err
		}
	}
	cfg.Modes = splitList(modes)
	cfg.Caches = splitList(caches)
	if cfg.Caches == nil {
		cfg.Caches = []string{}
	}
	cfg.CacheFlags = strings.Fields(cacheFlags)
	if *generate {
		p := fmt.Sprintf("%s/origin/ttbar/ttbar-%d-s%d.root", cfg.Dir, cfg.FileEvents, cfg.Seed)
		if err := os.MkdirAll(p[:strings.LastIndexByte(p, '/')], 0o755); err != nil {
			return err
		}
		return benchGenerate(ctx, []string{"-o", p, "-events", strconv.Itoa(cfg.FileEvents), "-seed", strconv.FormatUint(cfg.Seed, 10)})
	}
	_, err := bench.Workflow(ctx, cfg)
	return err
}

var errBenchUsage = errors.New("usage: hepcache bench throughput|wan|floor|link|soak|purge|workflow|resources|scale|layouts|job|generate|cluster [flags]")

// intList is a comma-separated list flag of ints.
type intList []int

func (l *intList) String() string {
	s := make([]string, len(*l))
	for i, v := range *l {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ",")
}

func (l *intList) Set(v string) error {
	var big int64List
	if err := big.Set(v); err != nil {
		return err
	}
	*l = nil
	for _, n := range big {
		*l = append(*l, int(n))
	}
	return nil
}

func benchResources(ctx context.Context, args []string) error {
	fs := newFlagSet("bench resources", "")
	var cfg bench.ResourcesConfig
	clients := intList{10, 25, 50, 75, 100, 128}
	size, rate := config.Size(16<<20), config.Size(2e6)
	caches, cacheFlags := "", ""
	fs.StringVar(&cfg.Dir, "dir", "results/resources", "work and results directory")
	fs.Var(&clients, "clients", "numbers of parallel requests")
	fs.Var(&size, "size", "file size per client")
	fs.Var(&rate, "rate", "read rate per client in bytes/s (0: unlimited)")
	fs.DurationVar(&cfg.RTT, "rtt", 2800*time.Microsecond, "emulated RTT to the origin (the paper: KIT)")
	fs.StringVar(&caches, "caches", "hepcache,xcache", "caches to measure")
	fs.DurationVar(&cfg.Interval, "interval", 100*time.Millisecond, "sampling interval")
	fs.StringVar(&cacheFlags, "cache-flags", "", "extra `hepcache serve` flags, space-separated")
	fs.StringVar(&cfg.HepcacheBin, "bin", "", "hepcache binary run as cache and analysis job (default: this one)")
	fs.BoolVar(&cfg.Smoke, "smoke", false, "start every server as the benchmark would, read one small file through each with xrdcp, and exit: checks the set-up in seconds, measures nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := absPath(&cfg.Dir); err != nil {
		return err
	}
	cfg.Clients, cfg.FileSize, cfg.Rate = clients, int64(size), float64(rate)
	if rate == 0 {
		cfg.Rate = -1
	}
	cfg.Caches = splitList(caches)
	cfg.CacheFlags = strings.Fields(cacheFlags)
	_, err := bench.Resources(ctx, cfg)
	return err
}

func benchScale(ctx context.Context, args []string) error {
	fs := newFlagSet("bench scale", "")
	var cfg bench.ScaleConfig
	rates := int64List{}
	totalClients := intList{}
	total, size := config.Size(0), config.Size(32<<20)
	caches, cacheFlags := "", ""
	fs.StringVar(&cfg.Dir, "dir", "results/scale", "work and results directory")
	fs.Float64Var(&cfg.Scale, "scale", 5, "divide UCSD's client counts (1000; 1000-5000) and total rate (5 GB/s) by this")
	fs.IntVar(&cfg.Clients, "clients", 0, "fixed concurrency (default 1000/scale)")
	fs.Var(&rates, "rates", "per-client rates in bytes/s for the fixed-concurrency test (default 1e6,2e6,4e6,8e6)")
	fs.Var(&total, "total", "fixed total rate in bytes/s (default 5G/scale)")
	fs.Var(&totalClients, "total-clients", "client counts sharing the fixed total (default 1000,2000,3000,5000 / scale)")
	fs.DurationVar(&cfg.Duration, "duration", 8*time.Second, "duration of each point")
	fs.DurationVar(&cfg.Interval, "interval", time.Second, "time between one client's reads")
	fs.IntVar(&cfg.Files, "files", 16, "files read (hot in the cache)")
	fs.Var(&size, "size", "file size")
	fs.StringVar(&caches, "caches", "hepcache,xcache", "caches to measure")
	fs.StringVar(&cacheFlags, "cache-flags", "", "extra `hepcache serve` flags, space-separated")
	fs.StringVar(&cfg.HepcacheBin, "bin", "", "hepcache binary run as cache and analysis job (default: this one)")
	fs.BoolVar(&cfg.Smoke, "smoke", false, "start every server as the benchmark would, read one small file through each with xrdcp, and exit: checks the set-up in seconds, measures nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := absPath(&cfg.Dir); err != nil {
		return err
	}
	for _, r := range rates {
		cfg.Rates = append(cfg.Rates, float64(r))
	}
	cfg.TotalRate, cfg.TotalClients, cfg.FileSize = float64(total), totalClients, int64(size)
	cfg.Caches = splitList(caches)
	cfg.CacheFlags = strings.Fields(cacheFlags)
	_, err := bench.Scale(ctx, cfg)
	return err
}

func benchLayouts(ctx context.Context, args []string) error {
	fs := newFlagSet("bench layouts", "")
	var cfg bench.LayoutsConfig
	bw := config.Size(50e6)
	caches, cacheFlags := "", ""
	fs.StringVar(&cfg.Dir, "dir", "results/layouts", "work and results directory")
	fs.IntVar(&cfg.Files, "files", 2, "input files")
	fs.IntVar(&cfg.FileEvents, "file-events", 500, "events per input file")
	fs.IntVar(&cfg.K, "k", 20, "reads per file")
	fs.IntVar(&cfg.Nodes, "nodes", 4, "worker nodes")
	fs.DurationVar(&cfg.RTT, "rtt", 11*time.Millisecond, "RTT to the primary storage")
	fs.Var(&bw, "bandwidth", "WAN bandwidth per second")
	fs.DurationVar(&cfg.LANRTT, "lan-rtt", 200*time.Microsecond, "RTT from a worker node to the dedicated cache")
	fs.StringVar(&caches, "caches", "hepcache,xcache", "caches for the dedicated and local layouts")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of the read sequence")
	fs.StringVar(&cacheFlags, "cache-flags", "", "extra `hepcache serve` flags, space-separated")
	fs.StringVar(&cfg.HepcacheBin, "bin", "", "hepcache binary run as cache and analysis job (default: this one)")
	fs.BoolVar(&cfg.Smoke, "smoke", false, "start every server as the benchmark would, read one small file through each with xrdcp, and exit: checks the set-up in seconds, measures nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := absPath(&cfg.Dir); err != nil {
		return err
	}
	cfg.Bandwidth = int64(bw)
	cfg.Caches = splitList(caches)
	cfg.CacheFlags = strings.Fields(cacheFlags)
	_, err := bench.Layouts(ctx, cfg)
	return err
}
