package notfound

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// TestEntryMemory (issue 21, item 11): what a remembered path costs, once
// the cache is full and keeps turning over: measured on the heap, compared
// with entryOverhead + the path (the figure documented).
func TestEntryMemory(t *testing.T) {
	ctx := context.Background()
	for _, pathLen := range []int{60, 1000, 4000} {
		t.Run(fmt.Sprintf("path of %d bytes", pathLen), func(t *testing.T) {
			const max = 20000
			r, _, _ := newTest(t, func(c *Config) { c.MaxEntries = max })
			o, _ := r.Resolve(ctx, "")
			heap := func() int64 {
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				return int64(ms.HeapAlloc)
			}
			pad := strings.Repeat("p", pathLen-20)
			base := heap()
			// Three times the bound: the oldest are forgotten as new come.
			for i := range 3 * max {
				o.Stat(ctx, fmt.Sprintf("/%s/%018d", pad, i))
			}
			total := heap() - base
			no := o.(*negOrigin)
			no.mu.Lock()
			n := int64(len(no.seen))
			no.mu.Unlock()
			per := total / n
			bound := int64(entryOverhead + pathLen)
			t.Logf("%d-byte paths: %d remembered, %d bytes in all, %d an entry (documented: path + %d = %d)", pathLen, n, total, per, entryOverhead, bound)
			// The allocator rounds a path up to its size class: 5 %.
			if float64(per) > 1.05*float64(bound) {
				t.Fatalf("%d-byte paths: %d bytes an entry, more than entryOverhead + path = %d", pathLen, per, bound)
			}
			if float64(total) > 1.05*defaultMaxBytes {
				t.Fatalf("%d-byte paths: %d bytes in all, over the bound of %d", pathLen, total, defaultMaxBytes)
			}
			if got := r.Stats().Remembered.Load(); got != 3*max {
				t.Fatalf("remembered %d", got)
			}
		})
	}
}
