package simbench

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/sim/gen"
	"github.com/hepcache/hepcache/internal/sim/policy"
	"github.com/hepcache/hepcache/internal/sim/replay"
)

// TestRunSmall checks that the benchmark runs and reports every figure; the
// speeds themselves are measured by `hepcache sim bench`, never asserted.
func TestRunSmall(t *testing.T) {
	var out bytes.Buffer
	res, err := Run(context.Background(), Config{Accesses: 20000, Repeat: 1, Capacity: 5e12}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if res.LRUReplayPerSec <= 0 || res.NaivePerSec <= 0 || res.SweepSeconds <= 0 || len(res.Policies) != len(policy.Names()) {
		t.Errorf("result %+v", res)
	}
	for _, want := range []string{"libCacheSim claims", "exact LRU sweep of 20000 accesses", "anchor, same run"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestNaiveLRUAgreesWithPolicy: the anchor is a fair comparison only if it
// computes the same LRU.
func TestNaiveLRUAgreesWithPolicy(t *testing.T) {
	tr, err := gen.Generate(gen.Config{Seed: 9, Accesses: 30000, Days: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, capa := range []int64{1e9, 20e12, 100e12} {
		res, err := replay.Run(context.Background(), tr, replay.Config{Policy: policy.Config{Name: "lru", Capacity: capa}})
		if err != nil {
			t.Fatal(err)
		}
		if got := naiveLRU(tr, capa); int64(got) != res.Hits {
			t.Errorf("capacity %d: naive LRU %d hits, policy %d", capa, got, res.Hits)
		}
	}
}
