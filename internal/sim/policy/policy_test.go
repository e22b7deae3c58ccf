package policy_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/sim/policy"
	"github.com/hepcache/hepcache/internal/sim/policy/reference"
)

// smallTrace is a random request sequence over a few files of random sizes.
type smallTrace struct {
	file []uint32
	need []int64
	time []int64
	next []int32
	nf   int
}

// randomTrace draws n requests over nf files. In block mode a request needs a
// random block-aligned prefix of its file; otherwise the whole file.
func randomTrace(rng *rand.Rand, n, nf int, block bool) smallTrace {
	size := make([]int64, nf)
	for i := range size {
		switch rng.IntN(10) {
		case 0:
			size[i] = 0
		case 1:
			size[i] = 200 + rng.Int64N(100) // often larger than the cache
		default:
			size[i] = 1 + rng.Int64N(60)
		}
	}
	tr := smallTrace{nf: nf}
	var now int64
	// A skewed choice of files gives both hits and evictions.
	for range n {
		f := uint32(min(rng.IntN(nf), rng.IntN(nf)))
		need := size[f]
		if block && need > 0 {
			const bs = 8
			need = min(size[f], (1+rng.Int64N((size[f]+bs-1)/bs))*bs)
		}
		now += rng.Int64N(20)
		tr.file = append(tr.file, f)
		tr.need = append(tr.need, need)
		tr.time = append(tr.time, now)
	}
	tr.next = make([]int32, n)
	last := make([]int32, nf)
	for i := range last {
		last[i] = int32(n)
	}
	for i := n - 1; i >= 0; i-- {
		tr.next[i] = last[tr.file[i]]
		last[tr.file[i]] = int32(i)
	}
	return tr
}

func TestPoliciesMatchReference(t *testing.T) {
	seeds := 200
	if testing.Short() {
		seeds = 40
	}
	for _, name := range policy.Names() {
		for _, block := range []bool{false, true} {
			mode := "whole-file"
			if block {
				mode = "block"
			}
			t.Run(name+"/"+mode, func(t *testing.T) {
				for seed := range seeds {
					rng := rand.New(rand.NewPCG(uint64(seed), 7))
					tr := randomTrace(rng, 400, 2+rng.IntN(40), block)
					cfg := policy.Config{
						Name:          name,
						Capacity:      20 + rng.Int64N(250),
						NumFiles:      tr.nf,
						Next:          tr.next,
						PurgeInterval: []time.Duration{-1, 7, 60}[rng.IntN(3)],
					}
					if err := compare(tr, cfg); err != nil {
						t.Fatalf("seed %d, capacity %d, %d files, interval %v: %v", seed, cfg.Capacity, tr.nf, cfg.PurgeInterval, err)
					}
				}
			})
		}
	}
}

func compare(tr smallTrace, cfg policy.Config) error {
	fast, err := policy.New(&cfg)
	if err != nil {
		return err
	}
	ref, err := reference.New(cfg)
	if err != nil {
		return err
	}
	for i, f := range tr.file {
		h1, s1 := fast.Access(f, tr.need[i], tr.time[i])
		h2, s2 := ref.Access(f, tr.need[i], tr.time[i])
		if h1 != h2 || s1 != s2 {
			return fmt.Errorf("request %d (file %d, need %d): fast (had %d, stored %v), reference (had %d, stored %v)",
				i, f, tr.need[i], h1, s1, h2, s2)
		}
		if fast.Used() != ref.Used() || fast.Stats() != ref.Stats() {
			return fmt.Errorf("after request %d: fast used %d %+v, reference used %d %+v",
				i, fast.Used(), fast.Stats(), ref.Used(), ref.Stats())
		}
		if cfg.Name != "infinite" && fast.Used() > cfg.Capacity {
			return fmt.Errorf("after request %d: used %d > capacity %d", i, fast.Used(), cfg.Capacity)
		}
	}
	return nil
}

// TestXCacheBetweenLRUWatermarks checks the property that makes the watermark
// bounds of the sweep exact: with a purge check after every request, xcache
// hits every request LRU at low*C hits and only requests LRU at high*C hits.
func TestXCacheBetweenLRUWatermarks(t *testing.T) {
	for seed := range 100 {
		rng := rand.New(rand.NewPCG(uint64(seed), 9))
		tr := randomTrace(rng, 500, 30, false)
		capacity := int64(400 + rng.IntN(600)) // every file fits under the low watermark
		mk := func(name string, c int64) policy.Policy {
			p, err := policy.New(&policy.Config{Name: name, Capacity: c, NumFiles: tr.nf, PurgeInterval: -1})
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		xc, lo, hi := mk("xcache", capacity), mk("lru", capacity*90/100), mk("lru", capacity*95/100)
		for i, f := range tr.file {
			n := tr.need[i]
			hx, _ := xc.Access(f, n, tr.time[i])
			hl, _ := lo.Access(f, n, tr.time[i])
			hh, _ := hi.Access(f, n, tr.time[i])
			x, l, h := hx >= n && n > 0, hl >= n && n > 0, hh >= n && n > 0
			if (l && !x) || (x && !h) {
				t.Fatalf("seed %d request %d: lru@90%% hit=%v xcache hit=%v lru@95%% hit=%v", seed, i, l, x, h)
			}
		}
	}
}

// TestOPTBeatsOnlinePolicies: with equal sizes Belady's MIN is optimal, so no
// policy may have more hits on any trace.
func TestOPTBeatsOnlinePolicies(t *testing.T) {
	for seed := range 50 {
		rng := rand.New(rand.NewPCG(uint64(seed), 11))
		tr := randomTrace(rng, 600, 40, false)
		for i := range tr.need {
			tr.need[i] = 10
		}
		capacity := int64(10 * (2 + rng.IntN(20)))
		hits := map[string]int{}
		for _, name := range policy.Names() {
			p, err := policy.New(&policy.Config{Name: name, Capacity: capacity, NumFiles: tr.nf, Next: tr.next})
			if err != nil {
				t.Fatal(err)
			}
			for i, f := range tr.file {
				if had, _ := p.Access(f, tr.need[i], tr.time[i]); had >= tr.need[i] {
					hits[name]++
				}
			}
		}
		for name, h := range hits {
			if name != "infinite" && h > hits["opt"] {
				t.Errorf("seed %d: %s has %d hits, more than opt's %d", seed, name, h, hits["opt"])
			}
		}
		if hits["infinite"] < hits["opt"] {
			t.Errorf("seed %d: opt %d hits > infinite %d", seed, hits["opt"], hits["infinite"])
		}
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  policy.Config
		ok   bool
	}{
		{"lru", policy.Config{Name: "lru", Capacity: 10}, true},
		{"alias", policy.Config{Name: "Admit-On-Second-Access", Capacity: 10}, true},
		{"unknown", policy.Config{Name: "mru", Capacity: 10}, false},
		{"no capacity", policy.Config{Name: "lru"}, false},
		{"infinite needs none", policy.Config{Name: "infinite"}, true},
		{"opt without next", policy.Config{Name: "opt", Capacity: 10}, false},
		{"inverted watermarks", policy.Config{Name: "xcache", Capacity: 10, HighWatermark: 0.5, LowWatermark: 0.9}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := policy.New(&tc.cfg)
			if (err == nil) != tc.ok {
				t.Fatalf("New(%+v) err = %v, want ok=%v", tc.cfg, err, tc.ok)
			}
		})
	}
}
