package sim

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/sim/gen"
	"github.com/hepcache/hepcache/internal/sim/policy"
	"github.com/hepcache/hepcache/internal/sim/replay"
	"github.com/hepcache/hepcache/internal/sim/sweep"
)

func small() gen.Config { return gen.Config{Seed: 4, Accesses: 40000, Days: 14} }

func TestGenerateRunSweepFromFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.csv.gz")
	sum, err := Generate(context.Background(), GenerateConfig{Gen: small(), Out: path}, nil)
	if err != nil || sum.Accesses != 40000 {
		t.Fatalf("generate: %v %+v", err, sum)
	}
	var progress bytes.Buffer
	src := Source{Path: path, Progress: &progress}
	run, err := Run(context.Background(), RunConfig{Source: src, Replay: replay.Config{Policy: policy.Config{Name: "xcache", Capacity: 20e12}},
		ReportDir: filepath.Join(dir, "run")})
	if err != nil {
		t.Fatal(err)
	}
	if run.Requests != 40000 || run.Trace.Source != path || run.Trace.Info.Format != "csv" {
		t.Errorf("run: %d requests, trace %+v", run.Requests, run.Trace)
	}
	if !strings.Contains(progress.String(), "100%") {
		t.Errorf("no progress drawn: %q", progress.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "run", "index.html")); err != nil {
		t.Error(err)
	}

	// The same trace from memory and from the file give the same replay.
	mem, err := Run(context.Background(), RunConfig{Source: Source{Synthetic: small()}, Replay: replay.Config{Policy: policy.Config{Name: "xcache", Capacity: 20e12}}})
	if err != nil {
		t.Fatal(err)
	}
	if mem.Hits != run.Hits || mem.BytesIn != run.BytesIn {
		t.Errorf("generated in memory: %d hits %d in; read back: %d hits %d in", mem.Hits, mem.BytesIn, run.Hits, run.BytesIn)
	}

	// SHARDS reads the file once into several samples.
	sw, err := Sweep(context.Background(), SweepConfig{Source: Source{Path: path}, ShardsRate: 0.2, ShardsSamples: 3,
		Sweep: sweep.Config{Sizes: []int64{50e12, 100e12}}})
	if err != nil {
		t.Fatal(err)
	}
	if sw.Sampling == nil || sw.Sampling.Samples != 3 || sw.Trace.SampleRate != 0.2 {
		t.Errorf("sampled sweep: %+v %+v", sw.Sampling, sw.Trace)
	}
	if d := sw.Trace.Accesses - 40000; d < -8000 || d > 8000 {
		t.Errorf("sampled trace scaled back to %d accesses, want about 40000", sw.Trace.Accesses)
	}
	if _, err := Sweep(context.Background(), SweepConfig{Source: Source{Path: path}, ShardsRate: 1.5}); err == nil {
		t.Error("SHARDS rate 1.5 accepted")
	}
}
