package cache

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/origin"
)

// TestFailedReadsReuseTheirPieceBuffers: a read that fails at the origin
// gives its piece buffer back, so an origin that keeps failing (or clients
// that keep cancelling) does not make the cache map buffer after buffer.
func TestFailedReadsReuseTheirPieceBuffers(t *testing.T) {
	m := origin.NewMem("mem://o")
	m.Put("/f", randomData(7, 4*testBlock), time.Now())
	broken := errors.New("origin disk error")
	m.OnRead(func(context.Context, string, int64, int) error { return broken })
	c := newTestCache(t, t.TempDir(), m, nil)
	const reads = 50
	for i := 0; i < reads; i++ {
		f, err := c.Open(context.Background(), backend.Request{Path: "/f"})
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, testPiece)
		if _, err := f.ReadAt(context.Background(), buf, int64(i%4)*testBlock); err == nil {
			t.Fatal("a read from a failing origin succeeded")
		}
		f.Close()
	}
	// One fetch at a time: a handful of buffers serve all the failed reads.
	if n := c.pieces.Mapped(); n == 0 || n > 8 {
		t.Fatalf("%d piece buffers mapped for %d failed reads one after the other, want 1 to 8", n, reads)
	}
}
