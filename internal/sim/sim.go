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
// sample per seed instead (heavy: the share of accesses the heavy stratum may
// hold).
func (s *Source) load(ctx context.Context, rate float64, samples int, heavy float64) ([]*trace.Trace, error) {
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
		return trace.Samples(tr, rate, seeds, heavy)
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
		return trace.ReadFileSampled(s.Path, opt, rate, seeds, heavy)
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

func summarize(src *Source, trs []*trace.Trace) report.TraceSummary {
	sum := report.Summarize(src.name(), trs[0])
	if m := trs[0].M(); m > 1 {
		var acc, files, foot int64
		for _, tr := range trs {
			a, f := tr.Estimated()
			acc, files = acc+a, files+f
			for id, size := range tr.Size {
				foot += size * tr.W(uint32(id))
			}
		}
		k := int64(len(trs))
		sum.SampleRate, sum.Samples = 1/float64(m), len(trs)
		sum.Accesses, sum.Files, sum.Footprint = int(acc/k), int(files/k), foot/k
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
	trs, err := cfg.Source.load(ctx, 1, 1, 0)
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
	out := report.Run{Result: res, Trace: summarize(&cfg.Source, trs)}
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
	// ShardsHeavy is the largest share of the accesses that the heaviest
	// files, kept whole in every sample, may hold (memory: the sample grows by
	// up to this share of the trace). Default 0.25; negative disables.
	ShardsHeavy float64
	// ReportDir, if set, receives index.html with the plots and sweep.json.
	ReportDir string
}

const (
	defaultShardsSamples = 4
	defaultShardsHeavy   = 0.25
)

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
	heavy := cfg.ShardsHeavy
	if heavy == 0 {
		heavy = defaultShardsHeavy
	}
	trs, err := cfg.Source.load(ctx, rate, n, max(0, heavy))
	if err != nil {
		return report.Sweep{}, err
	}
	sc := cfg.Sweep
	bar := cfg.Source.bar("sweep", "", 0)
	sc.Progress = func(done, total int64) {
		bar.SetTotal(total)
		bar.Set(done)
	}
	res, err := sweep.Run(ctx, trs, sc)
	bar.Done()
	if err != nil {
		return report.Sweep{}, err
	}
	out := report.Sweep{Result: res, Trace: summarize(&cfg.Source, trs)}
	if cfg.ReportDir != "" {
		if err := report.WriteSweepDir(cfg.ReportDir, out); err != nil {
			return out, err
		}
	}
	return out, nil
}
