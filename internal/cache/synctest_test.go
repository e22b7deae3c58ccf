package cache

import (
	"bytes"
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hepcache/hepcache/origin"
)

// TestReadAheadInFakeTime runs a sequential reader of a distant origin
// (every read takes 100 ms of the bubble's fake clock) through the cache:
// the read-ahead window widens while the reader catches up with blocks in
// flight, so the file takes far fewer round trips than blocks; then
// read-ahead stops when the reader closes. Fake time makes the round trips
// countable: no wall clock is involved.
func TestReadAheadInFakeTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rtt = 100 * time.Millisecond
		m := origin.NewMem("mem://far")
		data := randomData(3, 64*testBlock)
		m.Put("/f", data, time.Now())
		m.OnRead(func(ctx context.Context, _ string, _ int64, _ int) error {
			select {
			case <-time.After(rtt):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		c := newTestCache(t, t.TempDir(), m, func(cfg *Config) {
			cfg.Prefetch, cfg.PrefetchMax = 2, 16
			cfg.FetchMemory, cfg.RAM = 64<<20, 128<<20
		})
		f := openTest(t, c, "/f")
		start := time.Now()
		buf := make([]byte, testBlock)
		for off := int64(0); off < int64(len(data)); off += testBlock {
			if _, err := f.ReadAt(context.Background(), buf, off); err != nil || !bytes.Equal(buf, data[off:off+testBlock]) {
				t.Fatalf("read at %d: %v", off, err)
			}
		}
		took := time.Since(start)
		e := c.files[Key{Origin: "mem://far", Path: "/f"}]
		e.mu.Lock()
		window := e.st.window
		e.mu.Unlock()
		if window != 16 {
			t.Errorf("window %d after a sequential read of a distant origin, want 16", window)
		}
		// One block per round trip would take 64 RTT; a widening window
		// gets there in a fraction.
		if rounds := int(took / rtt); rounds > 20 {
			t.Errorf("%d round trips for 64 blocks", rounds)
		}
		f.Close()
		synctest.Wait()
		waitIdle(t, c)
		c.Close()
	})
}
