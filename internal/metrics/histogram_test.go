package metrics

import "testing"

func TestHistogramBuckets(t *testing.T) {
	var h histogram
	for _, v := range []float64{0.0005, 0.001, 0.003, 100} {
		h.observe(v)
	}
	if h.counts[0].Load() != 2 || h.counts[2].Load() != 1 || h.counts[len(latencyBuckets)].Load() != 1 || h.count.Load() != 4 {
		t.Fatalf("bucket counts wrong: le=0.001 %d, le=0.005 %d, +Inf %d", h.counts[0].Load(), h.counts[2].Load(), h.counts[len(latencyBuckets)].Load())
	}
}

func BenchmarkObserveRequest(b *testing.B) {
	r, _ := New(&Config{})
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r.ObserveRequest("http", "get", nil)
		}
	})
}
