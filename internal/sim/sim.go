// Package sim is the cache simulator and sizing tool behind `hepcache sim`:
// it loads or generates a trace, replays it against policies, sweeps sizes and
// writes reports. The command line only fills these configs.
package sim

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/hepcache/hepcache/internal/sim/gen"
	"github.com/hepcache/hepcache/internal/sim/progress"
	"github.com/hepcache/hepcache/internal/sim/replay"
	"github.com/hepcache/hepcache/internal/sim/report"
	"github.com/hepcache/hepcache/internal/sim/sweep"
	"github.com/hepcache/hepcache/internal/sim/trace"
)

// Source says where a trace comes from: a file, or the generator when Path
// is empty.
type Source struct {
	// Path is the trace file (hepcache access log, CSV or g-stream JSON,
	// optionally gzip-compressed).
	Path string
	// Read controls the reader (format, columns, bad-line limit).
	Read trace.Options
	// Synthetic is the workload generated when Path is empty.
	Synthetic gen.Config
	// Progress receives progress bars (nil: none).
	Progress io.Writer
}

func (s *Source) name() string {
	if s.Path != "" {
		return s.Path
	}
	return fmt.Sprintf("generated (seed %d)", s.Synthetic.Seed)
}

// load reads or generates the trace; with rate < 1 it returns one SHARDS
// sample per seed instead, reading the file only once.
func (s *Source) load(ctx context.Context, rate float64, samples int) ([]*trace.Trace, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sampled := rate > 0 && rate < 1
	seeds := make([]uint64, max(1, samples))
	for i := range seeds {
		seeds[i] = uint64(i + 1)
	}
	if s.Path == "" {
		bar := s.bar("generate", "", 0)
		tr, err := gen.Generate(s.Synthetic)
		bar.Done()
		if err != nil {
			return nil, err
		}
		if !sampled {
			return []*trace.Trace{tr}, nil
		}
		out := make([]*trace.Trace, len(seeds))
		for i, seed := range seeds {
			sp, err := trace.NewSampler(rate, seed)
			if err != nil {
				return nil, err
			}
			out[i] = trace.Sample(tr, sp)
		}
		return out, nil
	}
	var size int64
	if st, err := os.Stat(s.Path); err == nil {
		size = st.Size()
	}
	bar := s.bar("read", "B", size)
	opt := s.Read
	opt.Progress = bar.Set
	defer bar.Done()
	if sampled {
		return trace.ReadFileSampled(s.Path, opt, rate, seeds)
	}
	tr, err := trace.ReadFile(s.Path, opt)
	if err != nil {
		return nil, err
	}
	return []*trace.Trace{tr}, nil
}

func (s *Source) bar(label, unit string, total int64) *progress.Bar {
	if s.Progress == nil {
		return nil
	}
	return progress.New(s.Progress, label, unit, total)
}

func summarize(src *Source, trs []*trace.Trace, rate float64) report.TraceSummary {
	sum := report.Summarize(src.name(), trs[0])
	if rate > 0 && rate < 1 {
		sum.SampleRate, sum.Samples = rate, len(trs)
		sum.Accesses = int(float64(sum.Accesses) / rate)
		sum.Files = int(float64(sum.Files) / rate)
		sum.Footprint = int64(float64(sum.Footprint) / rate)
	}
	return sum
}

// GenerateConfig describes `hepcache sim generate`.
type GenerateConfig struct {
	Gen gen.Config
	// Out is the CSV file to write; "-" is standard output; a name ending in
	// .gz is gzip-compressed.
	Out string
}

// Generate writes a synthetic trace as CSV and returns its summary.
func Generate(ctx context.Context, cfg GenerateConfig, stdout io.Writer) (report.TraceSummary, error) {
	if cfg.Out == "" {
		return report.TraceSummary{}, errors.New("sim generate: no output file (--out FILE, or - for stdout)")
	}
	tr, err := gen.Generate(cfg.Gen)
	if err != nil {
		return report.TraceSummary{}, err
	}
	if err := ctx.Err(); err != nil {
		return report.TraceSummary{}, err
	}
	w := stdout
	var f *os.File
	if cfg.Out != "-" {
		f, err = os.Create(cfg.Out)
		if err != nil {
			return report.TraceSummary{}, fmt.Errorf("sim generate: %w", err)
		}
		defer f.Close()
		w = f
	}
	var zw *gzip.Writer
	if strings.HasSuffix(cfg.Out, ".gz") {
		zw, _ = gzip.NewWriterLevel(w, gzip.BestSpeed) // a trace is written once and read a few times
		w = zw
	}
	if err := trace.WriteCSV(w, tr); err != nil {
		return report.TraceSummary{}, fmt.Errorf("sim generate %s: %w", cfg.Out, err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			return report.TraceSummary{}, fmt.Errorf("sim generate %s: %w", cfg.Out, err)
		}
	}
	if f != nil {
		if err := f.Close(); err != nil {
			return report.TraceSummary{}, fmt.Errorf("sim generate %s: %w", cfg.Out, err)
		}
	}
	return report.Summarize(cfg.Out, tr), nil
}

// RunConfig describes `hepcache sim run`.
type RunConfig struct {
	Source Source
	Replay replay.Config
	// ReportDir, if set, receives index.html with the run's plots and run.json.
	ReportDir string
}

// Run replays one configuration.
func Run(ctx context.Context, cfg RunConfig) (report.Run, error) {
	trs, err := cfg.Source.load(ctx, 1, 1)
	if err != nil {
		return report.Run{}, err
	}
	tr := trs[0]
	rc := cfg.Replay
	bar := cfg.Source.bar("replay", "", int64(tr.Len()))
	rc.Progress = func(n int) { bar.Set(int64(n)) }
	res, err := replay.Run(ctx, tr, rc)
	bar.Done()
	if err != nil {
		return report.Run{}, err
	}
	out := report.Run{Result: res, Trace: summarize(&cfg.Source, trs, 1)}
	if cfg.ReportDir != "" {
		if err := report.WriteRunDir(cfg.ReportDir, out); err != nil {
			return out, err
		}
	}
	return out, nil
}

// SweepConfig describes `hepcache sim sweep`.
type SweepConfig struct {
	Source Source
	Sweep  sweep.Config
	// ShardsRate, in (0, 1), samples the files with SHARDS instead of loading
	// the whole trace; ShardsSamples independent samples (default 4) state
	// the sampling error.
	ShardsRate    float64
	ShardsSamples int
	// ReportDir, if set, receives index.html with the plots and sweep.json.
	ReportDir string
}

const defaultShardsSamples = 4

// Sweep runs the size sweep.
func Sweep(ctx context.Context, cfg SweepConfig) (report.Sweep, error) {
	rate := 1.0
	if cfg.ShardsRate != 0 {
		if !(cfg.ShardsRate > 0 && cfg.ShardsRate < 1) {
			return report.Sweep{}, fmt.Errorf("sim sweep: SHARDS rate %g outside (0, 1)", cfg.ShardsRate)
		}
		rate = cfg.ShardsRate
	}
	n := cfg.ShardsSamples
	if n <= 0 {
		n = defaultShardsSamples
	}
	trs, err := cfg.Source.load(ctx, rate, n)
	if err != nil {
		return report.Sweep{}, err
	}
	sc := cfg.Sweep
	bar := cfg.Source.bar("sweep", "", 0)
	sc.Progress = func(done, total int64) {
		bar.SetTotal(total)
		bar.Set(done)
	}
	res, err := sweep.Run(ctx, trs, rate, sc)
	bar.Done()
	if err != nil {
		return report.Sweep{}, err
	}
	out := report.Sweep{Result: res, Trace: summarize(&cfg.Source, trs, rate)}
	if cfg.ReportDir != "" {
		if err := report.WriteSweepDir(cfg.ReportDir, out); err != nil {
			return out, err
		}
	}
	return out, nil
}
