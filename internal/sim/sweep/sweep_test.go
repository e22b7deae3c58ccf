package sweep

import (
	"context"
	"math"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/sim/gen"
	"github.com/hepcache/hepcache/internal/sim/policy"
	"github.com/hepcache/hepcache/internal/sim/trace"
)

func genTrace(t testing.TB, accesses int) *trace.Trace {
	t.Helper()
	tr, err := gen.Generate(gen.Config{Seed: 1, Accesses: accesses, Days: 20, Sizes: "uniform:1GB:5GB"})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestSweepExact(t *testing.T) {
	tr := genTrace(t, 40000)
	var progressed atomic.Int64
	res, err := Run(context.Background(), []*trace.Trace{tr}, Config{
		Policies: []string{"xcache", "lru", "opt", "infinite"},
		// A purge check after every request makes the watermark band exact.
		Policy:   policy.Config{PurgeInterval: -1},
		Progress: func(done, total int64) { progressed.Store(done) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) == 0 || len(res.Curve) < 100 || res.Recommended == nil {
		t.Fatalf("rows %d curve %d recommended %v", len(res.Rows), len(res.Curve), res.Recommended)
	}
	if progressed.Load() == 0 {
		t.Error("no progress reported")
	}
	for _, row := range res.Rows {
		x := row.Policies["xcache"]
		if row.XCacheLow > 0 && (x.HitRate < row.XCacheLow || x.HitRate > row.XCacheHigh) {
			t.Errorf("capacity %d: xcache hit rate %.4f outside LRU's watermark band [%.4f, %.4f]",
				row.Capacity, x.HitRate, row.XCacheLow, row.XCacheHigh)
		}
		if o := row.Policies["opt"].HitRate; o+1e-9 < row.LRU.HitRate {
			t.Errorf("capacity %d: opt %.4f below lru %.4f", row.Capacity, o, row.LRU.HitRate)
		}
		if inf := row.Policies["infinite"].HitRate; inf != res.Infinite.HitRate {
			t.Errorf("infinite replay %.4f != curve %.4f", inf, res.Infinite.HitRate)
		}
	}
	rec := res.Recommendation
	if rec.TargetHitRate != 0.95*res.Infinite.HitRate {
		t.Errorf("target %v", rec.TargetHitRate)
	}
	cv, _ := NewCurve(context.Background(), tr, nil)
	if got := cv.At(rec.LRUCapacity).HitRate; got < rec.TargetHitRate {
		t.Errorf("recommended LRU size %d reaches only %.4f", rec.LRUCapacity, got)
	}
	// With per-request purges, xcache at LRU size / low watermark is at least
	// as good as LRU at that size: the recommendation is safe.
	if rec.XCacheHitRate < rec.TargetHitRate {
		t.Errorf("xcache at %d: %.4f < target %.4f", rec.XCacheCapacity, rec.XCacheHitRate, rec.TargetHitRate)
	}
	if rec.Knee < res.MaxFileSize || rec.Knee > res.Footprint || rec.NICGbps == 0 {
		t.Errorf("knee %d, nic %d", rec.Knee, rec.NICGbps)
	}
	if len(res.Recommended.Occupancy) < 100 {
		t.Errorf("recommended run has %d occupancy samples", len(res.Recommended.Occupancy))
	}
}

func TestSweepBelowLargestFileReplays(t *testing.T) {
	tr := genTrace(t, 5000)
	res, err := Run(context.Background(), []*trace.Trace{tr}, Config{Sizes: []int64{2e9, 100e12}})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Rows[0]; r.Capacity != 2e9 || r.LRU.Requests != int64(tr.Len()) || r.XCacheLow != 0 {
		t.Errorf("row below the largest file: %+v", r)
	}
}

func TestSweepBlockMode(t *testing.T) {
	tr := genTrace(t, 20000)
	res, err := Run(context.Background(), []*trace.Trace{tr}, Config{Block: true, BlockSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if res.Mode != "block" || !res.Recommendation.Coarse || len(res.Curve) != 0 {
		t.Fatalf("mode %s rec %+v", res.Mode, res.Recommendation)
	}
	for i, row := range res.Rows {
		if row.LRU.Requests != int64(tr.Len()) {
			t.Fatalf("block-mode LRU not replayed at %d", row.Capacity)
		}
		if i > 0 && row.Policies["xcache"].HitRate+0.02 < res.Rows[i-1].Policies["xcache"].HitRate {
			t.Errorf("xcache hit rate falls from %d to %d", res.Rows[i-1].Capacity, row.Capacity)
		}
	}
	if res.Recommendation.XCacheCapacity == 0 {
		t.Error("no size recommended")
	}
}

func TestSweepShards(t *testing.T) {
	tr := genTrace(t, 200000)
	exact, err := Run(context.Background(), []*trace.Trace{tr}, Config{Policies: []string{"xcache"}})
	if err != nil {
		t.Fatal(err)
	}
	samples, err := trace.Samples(tr, 0.1, []uint64{1, 2, 3, 4}, 0.25)
	if err != nil {
		t.Fatal(err)
	}
	// Sizes well above the scaled largest file, where SHARDS is meaningful.
	var sizes []int64
	for _, r := range exact.Rows {
		if r.Capacity >= 10*exact.MaxFileSize {
			sizes = append(sizes, r.Capacity)
		}
	}
	est, err := Run(context.Background(), samples, Config{Sizes: sizes})
	if err != nil {
		t.Fatal(err)
	}
	if est.Sampling == nil || est.Sampling.Samples != 4 || est.Sampling.MaxStdDev <= 0 {
		t.Fatalf("sampling %+v", est.Sampling)
	}
	if !est.Rows[0].TooSmallToSample || est.Rows[len(est.Rows)-1].TooSmallToSample {
		t.Errorf("tiny scaled caches must be skipped, large ones replayed")
	}
	for i, r := range est.Rows {
		e := exactRow(exact, r.Capacity)
		if d := math.Abs(r.LRU.HitRate - e.LRU.HitRate); d > 4*est.Sampling.MaxStdDev+0.01 {
			t.Errorf("row %d capacity %d: SHARDS %.4f vs exact %.4f (stddev %.4f)", i, r.Capacity, r.LRU.HitRate, e.LRU.HitRate, r.LRUStdDev)
		}
		x, ok := r.Policies["xcache"]
		if !ok {
			if !r.TooSmallToSample {
				t.Errorf("capacity %d: no xcache replay", r.Capacity)
			}
			continue
		}
		if d := math.Abs(x.HitRate - e.Policies["xcache"].HitRate); d > 4*x.HitRateStdDev+0.01 {
			t.Errorf("capacity %d: scaled xcache %.4f±%.4f vs exact %.4f", r.Capacity, x.HitRate, x.HitRateStdDev, e.Policies["xcache"].HitRate)
		}
	}
	if rel := float64(est.Recommendation.XCacheCapacity) / float64(exact.Recommendation.XCacheCapacity); rel < 0.7 || rel > 1.4 {
		t.Errorf("SHARDS recommends %d, exact %d", est.Recommendation.XCacheCapacity, exact.Recommendation.XCacheCapacity)
	}
}

func exactRow(r *Result, capa int64) Row {
	i := slices.IndexFunc(r.Rows, func(x Row) bool { return x.Capacity == capa })
	return r.Rows[i]
}

func TestSweepCancel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	if _, err := Run(ctx, []*trace.Trace{genTrace(t, 100000)}, Config{Policies: []string{"all"}}); err == nil {
		t.Error("cancelled sweep returned no error")
	}
}

func TestAutoSizes(t *testing.T) {
	got := autoSizes(5e9, 3.7e15)
	if len(got) != maxAutoSizes || got[len(got)-1] != 5e15 || !slices.IsSorted(got) {
		t.Errorf("autoSizes = %v", got)
	}
}

// TestShardsHeavyStratum: on a skewed CMS-like trace (Zipf 0.9: the most read
// file has thousands of reads), keeping the heavy hitters whole cuts the
// spread of the samples' hit rates several-fold.
func TestShardsHeavyStratum(t *testing.T) {
	tr, err := gen.Generate(gen.Config{Seed: 3, Accesses: 300000, Days: 30})
	if err != nil {
		t.Fatal(err)
	}
	exact, err := NewCurve(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	capa := exact.Footprint() / 20
	spread := func(heavy float64) (float64, float64) {
		samples, err := trace.Samples(tr, 0.05, []uint64{1, 2, 3, 4, 5, 6}, heavy)
		if err != nil {
			t.Fatal(err)
		}
		var curves []*Curve
		for _, s := range samples {
			c, err := NewCurve(context.Background(), s, nil)
			if err != nil {
				t.Fatal(err)
			}
			curves = append(curves, c)
		}
		p, sd := (&estimate{curves: curves}).atSD(capa)
		return p.HitRate, sd
	}
	plain, plainSD := spread(0)
	strat, stratSD := spread(0.25)
	want := exact.At(capa).HitRate
	t.Logf("exact %.4f; uniform SHARDS %.4f±%.4f; stratified %.4f±%.4f", want, plain, plainSD, strat, stratSD)
	if stratSD*3 > plainSD {
		t.Errorf("heavy stratum spread %.4f not well below uniform %.4f", stratSD, plainSD)
	}
	if math.Abs(strat-want) > 3*stratSD+0.005 {
		t.Errorf("stratified estimate %.4f±%.4f, exact %.4f", strat, stratSD, want)
	}
}
