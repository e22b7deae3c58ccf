package cache

import (
	"context"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/origin"
)

// TestReadAheadFollowsReaders (issue 35 item 4): a 1-byte read (a probe)
// fetches its block only; a reader that moves on gets a bounded window
// read ahead; once the last client closed, nothing more is fetched while
// the file lingers (with the default linger: a 1 GiB file used to come
// whole within the linger's 5 s).
func TestReadAheadFollowsReaders(t *testing.T) {
	const blocks = 400
	for _, tc := range []struct {
		name    string
		reads   []int64 // offsets read, 1 byte each
		maxKept int     // blocks fetched at most
	}{
		{name: "probe", reads: []int64{0}, maxKept: 1},
		{name: "probe at the end", reads: []int64{(blocks - 1) * testBlock}, maxKept: 1},
		{name: "short sequential read", reads: []int64{0, testBlock, 2 * testBlock}, maxKept: 3 + 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := origin.NewMem("mem://o")
			m.Put("/f", randomData(5, blocks*testBlock), time.Now())
			// A slow origin: read-ahead still in flight at the close.
			m.OnRead(func(ctx context.Context, _ string, _ int64, _ int) error {
				select {
				case <-time.After(20 * time.Millisecond):
				case <-ctx.Done():
				}
				return nil
			})
			c := newTestCache(t, t.TempDir(), m, func(cfg *Config) {
				cfg.Prefetch = 4
				cfg.PrefetchMax = 8
				cfg.CloseLinger = time.Hour // lingers for the whole test
			})
			f := openTest(t, c, "/f")
			for _, off := range tc.reads {
				if _, err := f.ReadAt(context.Background(), make([]byte, 1), off); err != nil {
					t.Fatal(err)
				}
			}
			f.Close()
			c.mu.Lock()
			e := c.files[Key{Origin: m.String(), Path: "/f"}]
			c.mu.Unlock()
			if e == nil {
				t.Fatal("the file does not linger")
			}
			// Whatever was on its way lands or is cancelled.
			inflight := func() int {
				e.mu.Lock()
				defer e.mu.Unlock()
				return len(e.fetches)
			}
			eventually.True(t, func() bool { return inflight() == 0 }, "the fetches in flight at the close to end")
			got := c.Stats().BlocksFetched.Load()
			t.Logf("%d blocks fetched, %d bytes from the origin", got, m.BytesRead.Load())
			if got > int64(tc.maxKept) {
				t.Errorf("%s: %d blocks fetched, want at most %d", tc.name, got, tc.maxKept)
			}
			if int64(tc.maxKept) < blocks && m.BytesRead.Load() > int64(tc.maxKept)*testBlock {
				t.Errorf("%s: %d bytes read from the origin", tc.name, m.BytesRead.Load())
			}
		})
	}
}
