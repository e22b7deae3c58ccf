package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hepcache/hepcache/internal/bench"
	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/wan"
)

func runBench(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errBenchUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		writeHelp(nil, "bench", verbList("bench")+"\n\nRun 'hepcache bench NAME -h' for the flags of a benchmark; BENCHMARKS.md\ndescribes each and its results.", "hepcache bench NAME [flags]")
		return flag.ErrHelp
	case "stall":
		return benchStall(ctx, args[1:])
	case "throughput":
		return benchThroughput(ctx, args[1:])
	case "workflow":
		return benchWorkflow(ctx, args[1:])
	case "resources":
		return benchResources(ctx, args[1:])
	case "scale":
		return benchScale(ctx, args[1:])
	case "layouts":
		return benchLayouts(ctx, args[1:])
	case "job":
		return benchJob(ctx, args[1:])
	case "generate":
		return benchGenerate(ctx, args[1:])
	case "purge":
		return benchPurge(args[1:])
	case "files":
		return benchFiles(ctx, args[1:])
	case "cluster":
		return benchCluster(ctx, args[1:])
	case "wan":
		return benchWAN(ctx, args[1:])
	case "floor":
		return benchFloor(args[1:])
	case "link":
		return benchLink(args[1:])
	case "soak":
		return benchSoak(ctx, args[1:])
	}
	return fmt.Errorf("unknown benchmark %q: %w", args[0], errBenchUsage)
}

func benchThroughput(ctx context.Context, args []string) error {
	fs := newFlagSet("bench throughput", "")
	var cfg bench.ThroughputConfig
	big, par, mem := config.Size(1<<30), config.Size(64<<20), config.Size(16<<20)
	fs.StringVar(&cfg.Dir, "dir", "results/throughput", "work and results directory")
	fs.Var(&big, "big", "single-stream file size")
	fs.IntVar(&cfg.ParFiles, "parallel", 16, "files read in parallel")
	fs.Var(&par, "parallel-size", "size of each parallel file")
	fs.Var(&mem, "mem-size", "file size per client in the memory test")
	work := config.Size(1 << 30)
	fs.IntVar(&cfg.WorkFiles, "work-files", 5, "files of the working set, read all at once")
	fs.Var(&work, "work-size", "size of each working-set file")
	sets := fs.String("sets", "single,parallel,working-set", "datasets timed: single, parallel, working-set")
	fs.IntVar(&cfg.Repeat, "repeat", 3, "repetitions per timing (median reported)")
	fs.BoolVar(&cfg.NoXCache, "no-xcache", false, "skip the XCache anchor")
	fs.BoolVar(&cfg.NoS3, "no-s3", false, "skip the S3 origin rows (versitygw)")
	reads := fs.String("reads", "pgread,read", "read modes: pgread (xrdcp's default) and/or read (plain kXR_read, as ROOT and uproot)")
	cacheFlags := fs.String("cache-flags", "", "extra `hepcache serve` flags, space-separated")
	fs.BoolVar(&cfg.Smoke, "smoke", false, "start every server as the benchmark would, read one small file through each with xrdcp, and exit: checks the set-up in seconds, measures nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := absPath(&cfg.Dir); err != nil {
		return err
	}
	cfg.Reads = strings.Split(*reads, ",")
	cfg.BigSize, cfg.ParSize, cfg.MemSize, cfg.WorkSize = int64(big), int64(par), int64(mem), int64(work)
	cfg.Sets = strings.Split(*sets, ",")
	cfg.CacheFlags = strings.Fields(*cacheFlags)
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return err
	}
	_, err := bench.Throughput(ctx, cfg)
	return err
}

func benchFloor(args []string) error {
	fs := newFlagSet("bench floor", "")
	var cfg bench.FloorConfig
	size := config.Size(1 << 30)
	fs.StringVar(&cfg.Dir, "dir", "results/floor", "scratch directory, on the file system a cache would use")
	fs.Var(&size, "size", "bytes each step moves")
	smoke := fs.Bool("smoke", false, "every step once on 8 MiB: checks the set-up in seconds, the figures mean nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := absPath(&cfg.Dir); err != nil {
		return err
	}
	if *smoke {
		size = 8 << 20
	}
	cfg.Size = int64(size)
	_, err := bench.Floor(cfg)
	return err
}

func benchLink(args []string) error {
	fs := newFlagSet("bench link", "")
	var cfg wan.Config
	fs.StringVar(&cfg.Target, "target", "", "host:port every connection is forwarded to (required)")
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:0", "address to listen on")
	fs.DurationVar(&cfg.RTT, "rtt", 0, "round-trip time the link adds")
	fs.Int64Var(&cfg.Bandwidth, "bandwidth", 0, "bandwidth in bytes/s (0: unlimited)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return bench.Link(cfg, os.Stdout)
}

func benchPurge(args []string) error {
	fs := newFlagSet("bench purge", "")
	var cfg bench.PurgeConfig
	fs.StringVar(&cfg.Dir, "dir", "results/purge-cache", "cache directory to fill (removed first)")
	fs.IntVar(&cfg.Files, "files", 100_000, "number of cached files")
	smoke := fs.Bool("smoke", false, "200 files: checks the set-up in seconds, the figures mean nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *smoke {
		cfg.Files = 200
	}
	if err := absPath(&cfg.Dir); err != nil {
		return err
	}
	_, err := bench.Purge(cfg)
	return err
}

func benchFiles(ctx context.Context, args []string) error {
	fs := newFlagSet("bench files", `Reads many small files through hepcache and XCache (pfc.ram 1g) in one run,
with the origin alone (C++ xrootd) as the anchor: each client thread of the
XRootD Python bindings opens a file, reads it whole and closes it. Cold and
hot files/s, CPU per file, peak open descriptors; then, for hepcache, a
restart to its first hit (against an empty cache's first answer), the index
loaded while serving, its memory per file, hits under ulimit -n 1024, a purge
of half the files; and the slopes projected to 10 million files.`)
	var cfg bench.FilesConfig
	size := config.Size(4 << 10)
	fs.StringVar(&cfg.Dir, "dir", "results/files", "work and results directory")
	fs.IntVar(&cfg.Files, "files", 100_000, "number of files")
	fs.Var(&size, "size", "size of each file")
	fs.IntVar(&cfg.Threads, "threads", 8, "client threads")
	fs.IntVar(&cfg.LimitFD, "limit-fd", 1024, "descriptor limit (ulimit -n) of the hits-under-a-limit pass")
	fs.IntVar(&cfg.LimitThreads, "limit-threads", 32, "client threads of the hits-under-a-limit pass")
	fs.IntVar(&cfg.LimitFiles, "limit-files", 30_000, "cached files the hits-under-a-limit pass reads")
	fs.BoolVar(&cfg.NoXCache, "no-xcache", false, "skip XCache")
	fs.StringVar(&cfg.Python, "python", "/usr/bin/python3", "interpreter with the XRootD bindings (Debian python3-xrootd)")
	cacheFlags := fs.String("cache-flags", "", "extra `hepcache serve` flags, space-separated (default: as shipped)")
	fs.BoolVar(&cfg.Smoke, "smoke", false, "start every server as the benchmark would, read one small file through each with xrdcp, and exit: checks the set-up in seconds, measures nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := absPath(&cfg.Dir); err != nil {
		return err
	}
	cfg.Size = int64(size)
	cfg.CacheFlags = strings.Fields(*cacheFlags)
	_, err := bench.Files(ctx, cfg)
	return err
}

func benchWAN(ctx context.Context, args []string) error {
	fs := newFlagSet("bench wan", "")
	var cfg bench.WANConfig
	size := config.Size(64 << 20)
	fs.StringVar(&cfg.Dir, "dir", "results/wan", "work and results directory")
	rtts := fs.String("rtt", "0s,150ms", "round-trip times of the emulated link, comma-separated")
	clients := intList{1, 8}
	fs.Var(&clients, "clients", "parallel clients, comma-separated")
	bws := fs.String("bandwidth", "0", "link bandwidths in Gbit/s, comma-separated (0: unlimited)")
	reads := fs.String("reads", "read,pgread", "read modes: read (plain kXR_read, as ROOT and uproot) and/or pgread (xrdcp's default)")
	caches := fs.String("caches", "hepcache,xcache", "caches to compare with the direct read")
	origins := fs.String("origins", "xrootd,s3", "origins: xrootd (C++ xrootd; the caches compared) and/or s3 (versitygw, hepcache against the bucket read directly; left out without versitygw)")
	full := fs.Bool("full", false, "the whole matrix: RTT 0, 20, 150 ms; 1, 8, 32 clients; unlimited and 10 Gbit/s; both read modes (takes long on 2 cores)")
	fs.Var(&size, "file-size", "bytes each client reads")
	cacheFlags := fs.String("cache-flags", "", "extra `hepcache serve` flags, space-separated (default: as shipped)")
	fs.BoolVar(&cfg.NoWarmup, "no-warmup", false, "measure each cache process fresh, without a warm-up pass over other files")
	link := fs.String("link", "inline", "where the emulated link runs: inline (in the benchmark's process) or process (its own, `hepcache bench link`)")
	fs.BoolVar(&cfg.Smoke, "smoke", false, "start every server as the benchmark would, read one small file through each with xrdcp, and exit: checks the set-up in seconds, measures nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := absPath(&cfg.Dir); err != nil {
		return err
	}
	switch *link {
	case "inline":
	case "process":
		cfg.LinkProcess = true
	default:
		return fmt.Errorf("--link %q: want inline or process", *link)
	}
	if *full {
		*rtts, clients, *bws, *reads = "0s,20ms,150ms", intList{1, 8, 32}, "0,10", "read,pgread"
	}
	for _, v := range strings.Split(*rtts, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("--rtt %q: %w", v, err)
		}
		cfg.RTTs = append(cfg.RTTs, d)
	}
	for _, n := range clients {
		if n < 1 {
			return fmt.Errorf("--clients %d: want positive integers", n)
		}
	}
	cfg.Clients = clients
	for _, v := range strings.Split(*bws, ",") {
		g, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || g < 0 {
			return fmt.Errorf("--bandwidth %q: want Gbit/s", v)
		}
		cfg.Bandwidths = append(cfg.Bandwidths, int64(g*1e9/8))
	}
	cfg.Reads = strings.Split(*reads, ",")
	cfg.Caches = strings.Split(*caches, ",")
	cfg.Origins = strings.Split(*origins, ",")
	cfg.FileSize = int64(size)
	cfg.CacheFlags = strings.Fields(*cacheFlags)
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return err
	}
	_, err := bench.WAN(ctx, cfg)
	return err
}

func benchStall(ctx context.Context, args []string) error {
	fs := newFlagSet("bench stall", "")
	var cfg bench.StallConfig
	size := config.Size(16 << 20)
	fs.StringVar(&cfg.Dir, "dir", "results/stall", "work and results directory")
	fs.IntVar(&cfg.Stalled, "stalled", 64, "HTTP clients that ask for a file and read nothing")
	fs.IntVar(&cfg.Normal, "normal", 8, "cold xrdcp readers next to them")
	fs.Var(&size, "size", "file size of each client")
	fs.StringVar(&cfg.RAM, "ram", "64M", "the cache's cache.ram")
	fs.StringVar(&cfg.HepcacheBin, "cache-bin", "", "the hepcache binary run as the cache (default: this one), to compare builds")
	fs.BoolVar(&cfg.Smoke, "smoke", false, "start every server as the benchmark would, read one small file through each with xrdcp, and exit: checks the set-up in seconds, measures nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := absPath(&cfg.Dir); err != nil {
		return err
	}
	cfg.Size = int64(size)
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return err
	}
	_, err := bench.Stall(ctx, cfg)
	return err
}

// absPath makes *p absolute ("" stays ""): benchmark directories reach
// children that run in other working directories (xrootd's oss.localroot,
// hepcache's --cache-dir), where a relative path names another place.
func absPath(p *string) error {
	if *p == "" {
		return nil
	}
	a, err := filepath.Abs(*p)
	if err != nil {
		return fmt.Errorf("--dir %s: %w", *p, err)
	}
	*p = a
	return nil
}
