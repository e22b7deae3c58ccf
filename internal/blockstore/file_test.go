package blockstore

import (
	"bytes"
	"context"
	"math/rand"
	"testing"

	"github.com/hepcache/hepcache/internal/realclient"
)

// TestBufferedFallback: on a file system that refuses O_DIRECT (ramfs) a
// file opens with buffered I/O and blocks, the short last one included,
// go to disk and back the same.
func TestBufferedFallback(t *testing.T) {
	dir := realclient.Ramfs(t)
	data := make([]byte, 2*testSlot+77)
	rand.New(rand.NewSource(9)).Read(data)
	f := writeTestFile(t, dir, data)
	if f.Direct() {
		t.Fatal("ramfs accepted O_DIRECT; the fallback is not tested")
	}
	s := newStore(t, MinSlots)
	checks := checksOf(data)
	for b := 0; b < 3; b++ {
		off := b * testSlot
		n := min(testSlot, len(data)-off)
		blk, _, err := s.Load(context.Background(), Key{File: 1, Block: int64(b)}, 1,
			Source{File: f, Off: int64(off), N: n, Block: b, Checks: checks})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(blk.Bytes(), data[off:off+n]) {
			t.Fatalf("block %d differs", b)
		}
		blk.Release()
	}
}
