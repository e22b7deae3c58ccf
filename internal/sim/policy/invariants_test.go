//go:build invariants

package policy_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/sim/policy"
)

// TestPoliciesMatchReferenceLong is TestPoliciesMatchReference at 25 times
// the volume: longer traces, more files, more seeds. Minutes, not seconds.
func TestPoliciesMatchReferenceLong(t *testing.T) {
	for _, name := range policy.Names() {
		for _, block := range []bool{false, true} {
			mode := map[bool]string{false: "whole-file", true: "block"}[block]
			t.Run(name+"/"+mode, func(t *testing.T) {
				t.Parallel()
				for seed := range 1000 {
					rng := rand.New(rand.NewPCG(uint64(seed), 1234))
					tr := randomTrace(rng, 2000, 2+rng.IntN(300), block)
					cfg := policy.Config{Name: name, Capacity: 20 + rng.Int64N(2000), NumFiles: tr.nf, Next: tr.next,
						PurgeInterval: []time.Duration{-1, 3, 100}[rng.IntN(3)],
						HighWatermark: 0.8 + 0.2*rng.Float64(), LowWatermark: 0.5 + 0.3*rng.Float64(), SmallRatio: 0.05 + 0.4*rng.Float64()}
					if err := compare(tr, cfg); err != nil {
						t.Fatalf("seed %d, block %v, %+v: %v", seed, block, cfg, err)
					}
				}
			})
		}
	}
}
