package bitmap

import (
	"math/rand/v2"
	"testing"
)

func TestBitmapAgainstBools(t *testing.T) {
	for _, n := range []int{0, 1, 7, 63, 64, 65, 130, 1000} {
		r := rand.New(rand.NewPCG(uint64(n), 1))
		b := New(n)
		ref := make([]bool, n)
		for k := 0; k < 3*n; k++ {
			i := r.IntN(n + 1)
			if i == n {
				continue
			}
			if r.IntN(3) == 0 {
				b.Clear(i)
				ref[i] = false
			} else {
				b.Set(i)
				ref[i] = true
			}
		}
		count := 0
		for i, v := range ref {
			if b.Test(i) != v {
				t.Fatalf("n=%d bit %d: got %v want %v", n, i, b.Test(i), v)
			}
			if v {
				count++
			}
		}
		if b.Count() != count {
			t.Fatalf("n=%d Count=%d want %d", n, b.Count(), count)
		}
		for i := 0; i <= n; i++ {
			want := -1
			for j := i; j < n; j++ {
				if !ref[j] {
					want = j
					break
				}
			}
			if got := b.NextClear(i); got != want {
				t.Fatalf("n=%d NextClear(%d)=%d want %d", n, i, got, want)
			}
		}
		c := FromBytes(n, b.Bytes())
		for i := range ref {
			if c.Test(i) != ref[i] {
				t.Fatalf("n=%d round trip bit %d", n, i)
			}
		}
		if b.Full() != (count == n) {
			t.Fatalf("n=%d Full wrong", n)
		}
	}
}
