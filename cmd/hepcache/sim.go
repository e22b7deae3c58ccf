package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/hepcache/hepcache/internal/sim"
	"github.com/hepcache/hepcache/internal/sim/bytesize"
	"github.com/hepcache/hepcache/internal/sim/gen"
	"github.com/hepcache/hepcache/internal/sim/policy"
	"github.com/hepcache/hepcache/internal/sim/progress"
	"github.com/hepcache/hepcache/internal/sim/report"
	"github.com/hepcache/hepcache/internal/sim/simbench"
	"github.com/hepcache/hepcache/internal/sim/trace"
)

func runSim(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		writeHelp(nil, "sim", verbList("sim")+"\n\nRun 'hepcache sim VERB -h' for the flags of a verb. Documentation: docs/sim.md.", "hepcache sim VERB [flags]")
		if len(args) == 0 {
			return errors.New("missing verb")
		}
		return nil
	}
	verbs := map[string]func(context.Context, []string) error{
		"generate": simGenerate, "run": simRun, "sweep": simSweep, "bench": simBench,
	}
	v, ok := verbs[args[0]]
	if !ok {
		return fmt.Errorf("unknown verb %q (hepcache sim -h lists them)", args[0])
	}
	return v(ctx, args[1:])
}

// genFlags registers the workload generator's flags.
func genFlags(fs *flag.FlagSet, c *gen.Config) func() error {
	d := gen.DefaultConfig()
	fs.Uint64Var(&c.Seed, "seed", 0, "random seed of the synthetic workload")
	fs.IntVar(&c.Accesses, "accesses", d.Accesses, "number of file accesses")
	fs.Float64Var(&c.Days, "days", d.Days, "period the accesses span, in days")
	fs.Float64Var(&c.ReadsPerFile, "reads-per-file", d.ReadsPerFile, "mean reads per file K (hit-rate ceiling 1-1/K)")
	fs.Float64Var(&c.Zipf, "zipf", d.Zipf, "Zipf popularity exponent")
	fs.StringVar(&c.Sizes, "file-sizes", d.Sizes, "file size distribution: uniform:MIN:MAX, lognormal:MEDIAN:SIGMA[:MIN:MAX], fixed:SIZE")
	fs.Float64Var(&c.Partial, "partial", d.Partial, "share of reads that read only part of the file")
	fs.DurationVar(&c.Lifetime, "lifetime", d.Lifetime, "mean delay of a file's later reads after its first")
	start := fs.String("start", d.Start.Format("2006-01-02"), "start date of the period (UTC)")
	return func() error {
		t, err := time.Parse("2006-01-02", *start)
		if err != nil {
			return fmt.Errorf("--start: %w", err)
		}
		c.Start = t
		return nil
	}
}

// sourceFlags registers the flags that choose and read a trace.
func sourceFlags(fs *flag.FlagSet, s *sim.Source) func() error {
	fs.StringVar(&s.Path, "trace", "", "trace file: hepcache access log, CSV or XRootD g-stream JSON (gzip ok)")
	synthetic := fs.Bool("synthetic", false, "use a generated workload instead of --trace (generator flags apply)")
	genDone := genFlags(fs, &s.Synthetic)
	format := fs.String("format", "auto", "trace format: auto, hepcache, csv, gstream")
	fs.BoolVar(&s.Read.OrderByOpen, "order-by-open", false, "order accesses by open time instead of close time")
	fs.StringVar(&s.Read.CSV.Time, "csv-time", "time", "CSV column with the access time (RFC 3339 or Unix seconds)")
	fs.StringVar(&s.Read.CSV.Path, "csv-path", "path", "CSV column with the file path")
	fs.StringVar(&s.Read.CSV.Size, "csv-size", "size", "CSV column with the file size in bytes")
	fs.StringVar(&s.Read.CSV.BytesRead, "csv-bytes", "bytes_read", "CSV column with the bytes read (optional)")
	fs.StringVar(&s.Read.CSV.Origin, "csv-origin", "origin", "CSV column with the origin (optional)")
	fs.Float64Var(&s.Read.MaxBadFraction, "max-bad", 0.01, "fail if more than this fraction of lines is bad (0..1)")
	prog := fs.String("progress", "auto", "progress bar on stderr: auto (if a terminal), always, never")
	return func() error {
		if err := genDone(); err != nil {
			return err
		}
		s.Read.Format = trace.Format(*format)
		if s.Read.MaxBadFraction == 0 {
			s.Read.MaxBadFraction = -1 // 0 on the command line means none tolerated
		}
		switch {
		case s.Path == "" && !*synthetic:
			return errors.New("no trace: give --trace FILE, or --synthetic for a generated workload")
		case s.Path != "" && *synthetic:
			return errors.New("--trace and --synthetic exclude each other")
		}
		if progress.Enabled(*prog, os.Stderr) {
			s.Progress = os.Stderr
		}
		return nil
	}
}

// policyFlags registers the policy parameters shared by run and sweep.
func policyFlags(fs *flag.FlagSet, p *policy.Config) {
	fs.Float64Var(&p.HighWatermark, "high", 0.95, "xcache: purge starts above this occupancy fraction")
	fs.Float64Var(&p.LowWatermark, "low", 0.90, "xcache: purge stops at this occupancy fraction")
	fs.DurationVar(&p.PurgeInterval, "purge-interval", 300*time.Second, "xcache: trace time between purge checks (negative: after every request)")
}

func parseFlags(fs *flag.FlagSet, args []string, after ...func() error) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for _, f := range after {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

func simGenerate(ctx context.Context, args []string) error {
	fs := newFlagSet("sim generate", "")
	var cfg sim.GenerateConfig
	fs.StringVar(&cfg.Out, "out", "", "CSV file to write (- for stdout, .gz to compress)")
	done := genFlags(fs, &cfg.Gen)
	if err := parseFlags(fs, args, done); err != nil {
		return err
	}
	sum, err := sim.Generate(ctx, cfg, os.Stdout)
	if err != nil {
		return err
	}
	if cfg.Out != "-" {
		fmt.Fprintf(os.Stderr, "wrote %s\n", report.TraceLine(sum))
	}
	return nil
}

func simRun(ctx context.Context, args []string) error {
	fs := newFlagSet("sim run", "")
	var cfg sim.RunConfig
	srcDone := sourceFlags(fs, &cfg.Source)
	size := fs.String("size", "", "cache size, e.g. 200TB (not needed for infinite)")
	fs.StringVar(&cfg.Replay.Policy.Name, "policy", "xcache", "policy: "+strings.Join(policy.Names(), ", "))
	policyFlags(fs, &cfg.Replay.Policy)
	fs.BoolVar(&cfg.Replay.Block, "block", false, "block mode: a request needs only the blocks it read")
	blockSize := fs.String("block-size", "128KiB", "block size for --block")
	asJSON := fs.Bool("json", false, "print one JSON object instead of the table")
	fs.StringVar(&cfg.ReportDir, "report", "", "also write an HTML report with plots to this directory")
	err := parseFlags(fs, args, srcDone, func() error {
		var err error
		if *size != "" {
			if cfg.Replay.Policy.Capacity, err = bytesize.Parse(*size); err != nil {
				return fmt.Errorf("--size: %w", err)
			}
		} else if policy.Canonical(cfg.Replay.Policy.Name) != "infinite" {
			return errors.New("--size is required (e.g. --size 200TB)")
		}
		if cfg.Replay.BlockSize, err = bytesize.Parse(*blockSize); err != nil {
			return fmt.Errorf("--block-size: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	res, err := sim.Run(ctx, cfg)
	if err != nil {
		return err
	}
	return printResult(os.Stdout, *asJSON, res, func(w io.Writer) error { return report.WriteRunText(w, res) }, cfg.ReportDir)
}

func simSweep(ctx context.Context, args []string) error {
	fs := newFlagSet("sim sweep", "")
	var cfg sim.SweepConfig
	srcDone := sourceFlags(fs, &cfg.Source)
	sizes := fs.String("sizes", "", "comma-separated cache sizes for the table (default: 1-2-5 series up to the footprint)")
	policies := fs.String("policies", "xcache", "policies replayed at each size, comma-separated, or all (LRU is always exact)")
	policyFlags(fs, &cfg.Sweep.Policy)
	fs.BoolVar(&cfg.Sweep.Block, "block", false, "block mode (LRU then replayed per size)")
	blockSize := fs.String("block-size", "128KiB", "block size for --block")
	within := fs.Float64("within", 5, "recommend the smallest size within this many percent of the infinite cache's hit rate")
	fs.Float64Var(&cfg.ShardsRate, "shards", 0, "SHARDS sampling rate in (0,1) for traces too large for memory (0: exact)")
	fs.IntVar(&cfg.ShardsSamples, "shards-samples", 4, "independent SHARDS samples, to state the sampling error")
	heavy := fs.Float64("shards-heavy", 0.25, "SHARDS: largest share of accesses the most read files, kept whole, may hold (0: none)")
	fs.IntVar(&cfg.Sweep.Workers, "workers", 0, "parallel replays (default: GOMAXPROCS)")
	fs.StringVar(&cfg.ReportDir, "report", "", "write index.html with the plots and sweep.json to this directory")
	asJSON := fs.Bool("json", false, "print JSON instead of the table")
	err := parseFlags(fs, args, srcDone, func() error {
		var err error
		if *sizes != "" {
			if cfg.Sweep.Sizes, err = bytesize.ParseList(*sizes); err != nil {
				return fmt.Errorf("--sizes: %w", err)
			}
		}
		if cfg.Sweep.BlockSize, err = bytesize.Parse(*blockSize); err != nil {
			return fmt.Errorf("--block-size: %w", err)
		}
		if !(*within > 0 && *within < 100) {
			return fmt.Errorf("--within %g: want a percentage in (0, 100)", *within)
		}
		cfg.Sweep.Within = *within / 100
		cfg.ShardsHeavy = *heavy
		if *heavy == 0 {
			cfg.ShardsHeavy = -1 // 0 on the command line means no heavy stratum
		}
		cfg.Sweep.Policies = strings.Split(*policies, ",")
		return nil
	})
	if err != nil {
		return err
	}
	res, err := sim.Sweep(ctx, cfg)
	if err != nil {
		return err
	}
	return printResult(os.Stdout, *asJSON, res, func(w io.Writer) error { return report.WriteSweepText(w, res) }, cfg.ReportDir)
}

func printResult(w io.Writer, asJSON bool, v any, text func(io.Writer) error, dir string) error {
	if asJSON {
		return report.WriteJSON(w, v)
	}
	if err := text(w); err != nil {
		return err
	}
	if dir != "" {
		fmt.Fprintf(w, "report: %s/index.html\n", strings.TrimSuffix(dir, "/"))
	}
	return nil
}

func simBench(ctx context.Context, args []string) error {
	fs := newFlagSet("sim bench", "")
	cfg := simbench.DefaultConfig()
	fs.IntVar(&cfg.Accesses, "accesses", cfg.Accesses, "accesses of the generated CMS-like trace")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "random seed of the trace")
	fs.IntVar(&cfg.Repeat, "repeat", cfg.Repeat, "runs per measurement; the best is reported")
	size := fs.String("size", bytesize.Format(cfg.Capacity), "cache size of the replays")
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	err := parseFlags(fs, args, func() error {
		var err error
		cfg.Capacity, err = bytesize.Parse(*size)
		return err
	})
	if err != nil {
		return err
	}
	out := io.Writer(os.Stdout)
	if *asJSON {
		out = io.Discard
	}
	res, err := simbench.Run(ctx, cfg, out)
	if err != nil {
		return err
	}
	if *asJSON {
		return report.WriteJSON(os.Stdout, res)
	}
	return nil
}
