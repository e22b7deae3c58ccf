package replay

import (
	"context"
	"fmt"
	"testing"

	"github.com/hepcache/hepcache/internal/sim/policy"
	"github.com/hepcache/hepcache/internal/sim/trace"
)

// TestNoPerRequestAllocation: a replay allocates for its setup, days and
// occupancy samples, never per request, so ten times the requests over the
// same period cost no more allocations.
func TestNoPerRequestAllocation(t *testing.T) {
	mk := func(n int) *trace.Trace {
		b := trace.NewBuilder()
		for i := range n {
			f := (i * 7919) % 500
			// Same period (two days) whatever n is.
			b.Add(fmt.Appendf(nil, "/f%d", f), int64(i)*int64(2*day)/int64(n), int64(1000+f), int64(500+f))
		}
		return b.Finish()
	}
	small, large := mk(20000), mk(200000)
	for _, name := range policy.Names() {
		t.Run(name, func(t *testing.T) {
			allocs := func(tr *trace.Trace) float64 {
				return testing.AllocsPerRun(2, func() {
					if _, err := Run(context.Background(), tr, Config{Policy: policy.Config{Name: name, Capacity: 100000}, SampleEvery: 3600e9}); err != nil {
						t.Fatal(err)
					}
				})
			}
			a, b := allocs(small), allocs(large)
			if b > a+20 { // opt's heap and the slices' growth add a few
				t.Errorf("%d requests: %.0f allocations; %d requests: %.0f", small.Len(), a, large.Len(), b)
			}
		})
	}
}
