package hrw

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func nodes(n int) []Node {
	out := make([]Node, n)
	for i := range out {
		out[i] = Node{Name: fmt.Sprintf("cache-%02d.example.org", i)}
	}
	return out
}

// keys returns n seeded, reproducible file keys (origin + path).
func keys(n int, seed uint64) []string {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("root://origin.example:1094//store/mc/Run%d/%08x/file_%d.root", r.IntN(10), r.Uint32(), i)
	}
	return out
}

func owners(ns []Node, ks []string) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		o, _ := Owner(ns, k)
		out[i] = o.Name
	}
	return out
}

func moved(a, b []string) int {
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

// TestMembershipChangeMovesOneNth checks the property the cluster relies on:
// adding or removing one node of N moves about 1/N of the files, and only
// files that involve that node.
func TestMembershipChangeMovesOneNth(t *testing.T) {
	const nkeys = 20000
	ks := keys(nkeys, 42)
	for _, n := range []int{2, 3, 4, 5, 8, 11, 16} {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			all := nodes(n + 1)
			before := owners(all[:n], ks)
			added := owners(all, ks)

			// Add node n: exactly the keys it now owns moved, all to it.
			m := moved(before, added)
			for i := range ks {
				if before[i] != added[i] && added[i] != all[n].Name {
					t.Fatalf("key %s moved from %s to %s, not to the new node", ks[i], before[i], added[i])
				}
			}
			checkFraction(t, "add: moved", m, nkeys, 1/float64(n+1))

			// Remove node 0: exactly its keys moved, to the next in rank.
			rest := owners(all[1:n], ks)
			m = moved(before, rest)
			for i := range ks {
				if before[i] != rest[i] && before[i] != all[0].Name {
					t.Fatalf("key %s moved from %s though only %s left", ks[i], before[i], all[0].Name)
				}
				if before[i] == all[0].Name {
					if r := Rank(all[:n], ks[i]); r[1].Name != rest[i] {
						t.Fatalf("key %s: new owner %s is not the second in rank %s", ks[i], rest[i], r[1].Name)
					}
				}
			}
			if n > 1 {
				checkFraction(t, "remove: moved", m, nkeys, 1/float64(n))
			}
		})
	}
}

// checkFraction fails if got/total is further from want than six standard
// deviations of a binomial (the keys are seeded, so this is deterministic).
func checkFraction(t *testing.T, what string, got, total int, want float64) {
	t.Helper()
	f := float64(got) / float64(total)
	sd := math.Sqrt(want * (1 - want) / float64(total))
	t.Logf("%s: %d of %d keys (%.4f, ideal %.4f)", what, got, total, f, want)
	if math.Abs(f-want) > 6*sd {
		t.Errorf("%s: %.4f of the keys, want %.4f ± %.4f", what, f, want, 6*sd)
	}
}

// TestModuloMovesAlmostAll documents the anchor: XCache's path hash modulo
// the node count remaps most files when one node is added.
func TestModuloMovesAlmostAll(t *testing.T) {
	ks := keys(10000, 7)
	n := 10
	m := 0
	for _, k := range ks {
		h := Hash64(k)
		if h%uint64(n) != h%uint64(n+1) {
			m++
		}
	}
	f := float64(m) / float64(len(ks))
	t.Logf("modulo: %.3f of the keys moved going from %d to %d nodes (rendezvous: %.3f)", f, n, n+1, 1/float64(n+1))
	if f < 0.8 {
		t.Errorf("modulo hashing moved only %.3f", f)
	}
}

func TestBalance(t *testing.T) {
	const nkeys = 30000
	ks := keys(nkeys, 3)
	for _, tc := range []struct {
		name    string
		weights []float64
	}{
		{"equal", []float64{1, 1, 1, 1, 1}},
		{"zero-means-one", []float64{0, 1, 0, 1}},
		{"weighted", []float64{1, 2, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := nodes(len(tc.weights))
			var sum float64
			for i, w := range tc.weights {
				ns[i].Weight = w
				if w <= 0 {
					w = 1
				}
				sum += w
			}
			count := map[string]int{}
			for _, o := range owners(ns, ks) {
				count[o]++
			}
			for _, n := range ns {
				w := n.Weight
				if w <= 0 {
					w = 1
				}
				checkFraction(t, n.Name+" owns", count[n.Name], nkeys, w/sum)
			}
		})
	}
}

func TestRankIsConsistentWithOwner(t *testing.T) {
	ns := nodes(7)
	ns[3].Weight = 3
	for _, k := range keys(2000, 9) {
		r := Rank(ns, k)
		o, ok := Owner(ns, k)
		if !ok || r[0].Name != o.Name {
			t.Fatalf("key %s: Rank[0] = %s, Owner = %s", k, r[0].Name, o.Name)
		}
		if len(r) != len(ns) {
			t.Fatalf("Rank returned %d nodes", len(r))
		}
		for i := 1; i < len(r); i++ {
			if Score(r[i-1], Hash64(k)) < Score(r[i], Hash64(k)) {
				t.Fatalf("key %s: rank not descending at %d", k, i)
			}
		}
	}
	if _, ok := Owner(nil, "x"); ok {
		t.Fatal("Owner of no nodes reported one")
	}
}

// TestStableAcrossVersions pins owners of a few keys: nodes running
// different hepcache versions must agree on owners, so the hash must never
// change silently.
func TestStableAcrossVersions(t *testing.T) {
	ns := []Node{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	got := ""
	for _, k := range []string{"root://o:1094//store/f1", "root://o:1094//store/f2", "root://o:1094//store/f3", "/x", ""} {
		r := Rank(ns, k)
		got += r[0].Name + r[1].Name + r[2].Name + " "
	}
	if want := "cba cba bca bca bac "; got != want {
		t.Errorf("rankings changed: got %q, want %q", got, want)
	}
	if h := Hash64("hepcache"); h != 0x135230cb9e16acd8 {
		t.Errorf("Hash64 changed: %#x", h)
	}
}

func BenchmarkOwner(b *testing.B) {
	for _, n := range []int{3, 11, 100} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			ns := nodes(n)
			ks := keys(1024, 1)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				Owner(ns, ks[i%len(ks)])
			}
		})
	}
}
