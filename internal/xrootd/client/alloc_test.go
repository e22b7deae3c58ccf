package client

import (
	"testing"

	"github.com/hepcache/hepcache/internal/xrdtest"
	"github.com/hepcache/hepcache/origin"
)

// TestReadAllocs checks that steady-state reads allocate nothing: the call,
// its request buffer and its channels are pooled, and the payload goes
// straight into the caller's buffer.
func TestReadAllocs(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("needs a real xrootd and no race detector")
	}
	dir, _ := testData(t)
	srv := xrdtest.StartOrigin(t, dir)
	c := newClient(t)
	ctx := ctxT(t)
	f, err := c.Open(ctx, srv.Addr, "/big.bin")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(ctx)
	buf := make([]byte, 256<<10)
	segs := []origin.Segment{{Offset: 0, Buf: buf[:1000]}, {Offset: 5000, Buf: buf[1000:3000]}}
	// Warm up: open the file on every connection, learn the readv limits.
	for i := 0; i < 8; i++ {
		if _, err := f.ReadAt(ctx, buf, int64(i)<<18); err != nil {
			t.Fatal(err)
		}
		if err := f.ReadV(ctx, segs); err != nil {
			t.Fatal(err)
		}
	}
	if a := testing.AllocsPerRun(200, func() {
		if _, err := f.ReadAt(ctx, buf, 12345); err != nil {
			t.Fatal(err)
		}
	}); a > 0 {
		t.Errorf("ReadAt: %v allocations per call, want 0", a)
	}
	if a := testing.AllocsPerRun(200, func() {
		if err := f.ReadV(ctx, segs); err != nil {
			t.Fatal(err)
		}
	}); a > 1 {
		t.Errorf("ReadV: %v allocations per call, want at most 1", a)
	}
}
