package cache

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/blockstore"
	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/origin"
)

// TestSmallMissCostsOpenAndRead (issue 35 item 1): a file read whole in
// one origin request costs the origin its open and its read, nothing
// more: no stat confirming the block, no whole-file checksum query (its
// copy is the snapshot a direct read would get). A file of two blocks is
// still confirmed and verified. Both are recorded durable at the next
// group sync, with their checksums computed from the bytes.
func TestSmallMissCostsOpenAndRead(t *testing.T) {
	for _, tc := range []struct {
		size              int
		lookups, checksum int64
	}{
		{size: 4096, lookups: 1, checksum: 0},
		{size: testBlock, lookups: 1, checksum: 0},
		{size: testBlock + 1, lookups: 2, checksum: 1}, // open + at least one confirming stat
	} {
		t.Run(fmt.Sprint(tc.size), func(t *testing.T) {
			dir := t.TempDir()
			m := origin.NewMem("mem://o")
			data := randomData(uint64(tc.size), tc.size)
			m.Put("/f", data, time.Unix(1700000000, 0))
			c := newTestCache(t, dir, m, nil)
			if got := readAllVia(t, c, "/f"); !bytes.Equal(got, data) {
				t.Fatal("bytes differ")
			}
			k := Key{Origin: m.String(), Path: "/f"}
			c.mu.Lock()
			id := c.files[k].id
			c.mu.Unlock()
			// Once the block is published (after its disk write):
			s := c.storeFor(int64(min(tc.size, testBlock)))
			eventually.True(t, func() bool { return s.Has(blockKeyOf(id, 0)) }, "the block to be published in its store")
			if small := s != c.store; small != (tc.size <= int(smallClasses[len(c.small)-1].max)) {
				t.Errorf("block 0 of %d bytes in a small-block store: %v", tc.size, small)
			}
			waitIdle(t, c)
			if m.Lookups.Load() < tc.lookups || (tc.lookups == 1 && m.Lookups.Load() != 1) {
				t.Errorf("%d origin lookups (open and stats), want %d", m.Lookups.Load(), tc.lookups)
			}
			if m.Checksums.Load() != tc.checksum {
				t.Errorf("%d origin checksum queries, want %d", m.Checksums.Load(), tc.checksum)
			}
			if m.Reads.Load() != int64((tc.size+testBlock-1)/testBlock) {
				t.Errorf("%d origin reads", m.Reads.Load())
			}
			c.Close()
			c2 := newTestCache(t, dir, m, nil)
			m.Fail(origin.ErrUnavailable)
			if got := readAllVia(t, c2, "/f"); !bytes.Equal(got, data) {
				t.Fatal("bytes differ after a restart")
			}
			if s, ok := c2.cachedChecksum(Key{Origin: m.String(), Path: "/f"}); !ok || s.Len != int64(tc.size) {
				t.Errorf("no checksum recorded for the complete file: %+v %v", s, ok)
			}
		})
	}
}

func blockKeyOf(id uint64, b int) blockstore.Key { return blockstore.Key{File: id, Block: int64(b)} }
