package sweep

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/hepcache/hepcache/internal/sim/policy"
	"github.com/hepcache/hepcache/internal/sim/replay"
	"github.com/hepcache/hepcache/internal/sim/trace"
)

// randomTrace draws n requests with skewed popularity over nf files of random
// sizes (some empty), reading random parts of them.
func randomTrace(rng *rand.Rand, n, nf int) *trace.Trace {
	size := make([]int64, nf)
	for i := range size {
		size[i] = rng.Int64N(1000)
		if rng.IntN(20) == 0 {
			size[i] = 0
		}
	}
	b := trace.NewBuilder()
	var now int64
	for range n {
		f := min(rng.IntN(nf), rng.IntN(nf), rng.IntN(nf))
		now += rng.Int64N(1e9)
		b.Add(fmt.Appendf(nil, "/f%d", f), now, size[f], rng.Int64N(size[f]+1))
	}
	return b.Finish()
}

// TestCurveEqualsLRUReplays is the sweep's contract: for every capacity from
// the largest file up, one pass gives exactly what an LRU replay gives.
func TestCurveEqualsLRUReplays(t *testing.T) {
	seeds := 30
	if testing.Short() {
		seeds = 8
	}
	for seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 3))
			tr := randomTrace(rng, 1500, 10+rng.IntN(200))
			c, err := NewCurve(context.Background(), tr, nil)
			if err != nil {
				t.Fatal(err)
			}
			// Capacities at and next to stack distances are where off-by-ones hide.
			caps := []int64{c.MinCapacity(), c.Footprint(), c.Footprint() + 1}
			for range 25 {
				d := c.dist[rng.IntN(len(c.dist))]
				caps = append(caps, d-1, d, d+1, c.MinCapacity()+rng.Int64N(c.Footprint()))
			}
			for _, capa := range caps {
				if capa < c.MinCapacity() {
					continue
				}
				res, err := replay.Run(context.Background(), tr, replay.Config{Policy: policy.Config{Name: "lru", Capacity: capa}})
				if err != nil {
					t.Fatal(err)
				}
				got := c.At(capa)
				want := Point{Capacity: capa, Requests: res.Requests, Hits: res.Hits, HitRate: res.HitRate,
					ByteHitRate: res.ByteHitRate, BytesOut: res.BytesOut, BytesHit: res.BytesHit, BytesIn: res.BytesIn,
					OutInRatio: res.OutInRatio, FilesCreated: res.FilesCreated, FilesDeleted: res.FilesDeleted}
				if got != want {
					t.Fatalf("capacity %d:\n sweep  %+v\n replay %+v", capa, got, want)
				}
			}
		})
	}
}

func TestSmallestForAndKnee(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	tr := randomTrace(rng, 3000, 150)
	c, err := NewCurve(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	inf := c.Infinite()
	if inf.Hits != c.Requests()-c.ColdMisses() || c.At(c.Footprint()).Hits != inf.Hits {
		t.Fatalf("infinite %+v vs footprint %+v", inf, c.At(c.Footprint()))
	}
	for _, frac := range []float64{0.5, 0.9, 0.95, 0.99, 1} {
		target := frac * inf.HitRate
		capa, ok := c.SmallestFor(target)
		if !ok {
			t.Fatalf("no capacity reaches %v", target)
		}
		if got := c.At(capa).HitRate; got < target {
			t.Errorf("SmallestFor(%v) = %d with hit rate %v", target, capa, got)
		}
		if capa > c.MinCapacity() && c.At(capa-1).HitRate >= target {
			t.Errorf("SmallestFor(%v) = %d but %d also reaches it", target, capa, capa-1)
		}
	}
	if _, ok := c.SmallestFor(inf.HitRate + 0.01); ok {
		t.Error("a hit rate above the infinite cache's was reachable")
	}
	knee, kh := c.Knee()
	if knee < c.MinCapacity() || knee > c.Footprint() || kh != c.At(knee).HitRate {
		t.Errorf("knee %d (hit rate %v) outside [%d, %d] or inconsistent with At", knee, kh, c.MinCapacity(), c.Footprint())
	}
}

// TestShardsEstimate: a 10 % SHARDS sample of a trace with many files
// estimates the hit-rate curve within a few points.
func TestShardsEstimate(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	tr := randomTrace(rng, 60000, 6000)
	full, err := NewCurve(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := trace.NewSampler(0.1, 1)
	est, err := NewCurve(context.Background(), trace.Sample(tr, s), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []float64{0.05, 0.1, 0.2, 0.4} {
		capa := int64(f * float64(full.Footprint()))
		a, b := full.At(capa).HitRate, est.At(capa).HitRate
		if d := a - b; d > 0.03 || d < -0.03 {
			t.Errorf("capacity %d: exact hit rate %.3f, SHARDS %.3f", capa, a, b)
		}
	}
}
