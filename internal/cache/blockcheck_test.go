package cache

import (
	"bytes"
	"context"
	"errors"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/hepcache/hepcache/internal/blockstore"
	"github.com/hepcache/hepcache/internal/sidecar"
	"github.com/hepcache/hepcache/origin"
)

// TestCorruptBlockOnDiskRefetched: a byte flipped in a cached data file
// (bit rot) is caught by the block's CRC32C when the block is read back:
// the block is fetched again, the client gets the origin's bytes, the
// other blocks come from disk, checked.
func TestCorruptBlockOnDiskRefetched(t *testing.T) {
	m, data := memWithFile(9, 6*testBlock)
	dir := t.TempDir()
	warm := newTestCache(t, dir, m, nil)
	readAllVia(t, warm, "/f")
	waitIdle(t, warm)
	warm.Close()

	p := DataPath(dir, Key{Origin: "mem://o", Path: "/f"})
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{data[3*testBlock+17] ^ 0xff}, 3*testBlock+17)
	f.Close()

	c := newTestCache(t, dir, m, nil)
	before := m.BytesRead.Load()
	if got := readAllVia(t, c, "/f"); !bytes.Equal(got, data) {
		t.Fatal("the corrupt block was served")
	}
	if n := m.BytesRead.Load() - before; n != testBlock {
		t.Fatalf("origin sent %d bytes, want the one bad block (%d)", n, testBlock)
	}
	if n := c.Stats().BlocksCorrupt.Load(); n != 1 {
		t.Fatalf("BlocksCorrupt = %d", n)
	}
	// The 5 good blocks; a read ahead of block 3 that missed it in RAM
	// just before the good copy was published reads that copy back from
	// disk, checked, once more.
	if n := c.Stats().BlocksChecked.Load(); n != 5 && n != 6 {
		t.Fatalf("BlocksChecked = %d, want the 5 good blocks (6 when a read ahead raced with the fetch)", n)
	}
	// The next read comes from RAM: nothing is read from disk again.
	waitIdle(t, c)
	reads := c.store.Stats().DiskReads.Load()
	readAllVia(t, c, "/f")
	if n := c.store.Stats().DiskReads.Load() - reads; n != 0 {
		t.Fatalf("%d blocks read from disk again for a file in RAM", n)
	}

	// A fresh process with the checks off serves the disk as it is.
	waitIdle(t, c)
	c.Close()
	f, _ = os.OpenFile(p, os.O_RDWR, 0)
	f.WriteAt([]byte{0}, 17)
	f.Close()
	off := newTestCache(t, dir, m, func(c *Config) { c.NoBlockChecksums = true })
	if got := readAllVia(t, off, "/f"); bytes.Equal(got, data) {
		t.Fatal("with checks off the corruption should go unnoticed (the switch does nothing?)")
	}
}

// dropRAM forgets the RAM copies of every block of k, so that the next
// read of each comes from disk.
func dropRAM(t testing.TB, c *Cache, k Key, blocks int) {
	t.Helper()
	it, ok := c.catalog.Lookup(k)
	if !ok {
		t.Fatalf("%s is not in the index", k)
	}
	for b := 0; b < blocks; b++ {
		c.store.Drop(blockstore.Key{File: it.ID, Block: int64(b)})
	}
}

// TestCorruptionWhileServing: blocks of a cached file are corrupted on the
// disk of a running cache, once through the page cache and once with
// O_DIRECT behind it; every read path that reaches them (stream, ReadAt,
// ReadV) gets the origin's bytes, each bad block is counted once and
// fetched again, and none is served.
func TestCorruptionWhileServing(t *testing.T) {
	m, data := memWithFile(19, 8*testBlock)
	dir := t.TempDir()
	c := newTestCache(t, dir, m, nil)
	readAllVia(t, c, "/f")
	waitIdle(t, c)
	k := Key{Origin: "mem://o", Path: "/f"}
	p := DataPath(dir, k)

	// Through the page cache, as dd without oflag=direct does.
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("fourteen bytes"), 5*testBlock+100)
	f.Close()
	// Behind the page cache: a whole aligned page with O_DIRECT.
	df, err := os.OpenFile(p, os.O_RDWR|syscall.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	page := alignedPage()
	copy(page, data[2*testBlock:2*testBlock+len(page)])
	page[4000] ^= 0x55
	if _, err := df.WriteAt(page, 2*testBlock); err != nil {
		t.Fatal(err)
	}
	df.Close()

	dropRAM(t, c, k, 8)
	before := m.BytesRead.Load()
	h := openTest(t, c, "/f")
	defer h.Close()
	var got []byte
	if _, err := h.Stream(context.Background(), 0, int64(len(data)), func(b []byte) error { got = append(got, b...); return nil }); err != nil || !bytes.Equal(got, data) {
		for b := 0; b < 8; b++ {
			lo, hi := b*testBlock, (b+1)*testBlock
			if hi <= len(got) && !bytes.Equal(got[lo:hi], data[lo:hi]) {
				t.Logf("block %d differs", b)
			}
		}
		t.Fatalf("stream over corrupted blocks: %v, right bytes %v (%d of %d)", err, bytes.Equal(got, data), len(got), len(data))
	}
	if n := c.Stats().BlocksCorrupt.Load(); n != 2 {
		t.Fatalf("BlocksCorrupt = %d, want 2", n)
	}
	if n := m.BytesRead.Load() - before; n != 2*testBlock {
		t.Fatalf("origin sent %d bytes, want the two bad blocks", n)
	}

	// Corrupt again, read with ReadAt and ReadV.
	f, _ = os.OpenFile(p, os.O_RDWR, 0)
	f.WriteAt([]byte("x"), 1*testBlock+5)
	f.WriteAt([]byte("y"), 6*testBlock+5)
	f.Close()
	dropRAM(t, c, k, 8)
	buf := make([]byte, 3*testBlock)
	if _, err := h.ReadAt(context.Background(), buf, 0); err != nil || !bytes.Equal(buf, data[:3*testBlock]) {
		t.Fatalf("ReadAt over a corrupted block: %v", err)
	}
	seg := make([]byte, 1000)
	if err := h.(interface {
		ReadV(context.Context, []origin.Segment) error
	}).ReadV(context.Background(), []origin.Segment{{Offset: 6*testBlock + 1, Buf: seg}}); err != nil || !bytes.Equal(seg, data[6*testBlock+1:6*testBlock+1001]) {
		t.Fatalf("ReadV over a corrupted block: %v", err)
	}
	if n := c.Stats().BlocksCorrupt.Load(); n != 4 {
		t.Fatalf("BlocksCorrupt = %d, want 4", n)
	}
}

func alignedPage() []byte {
	b := make([]byte, 2*blockstore.Align)
	off := int(uintptr(unsafe.Pointer(&b[0])) % blockstore.Align)
	if off != 0 {
		off = blockstore.Align - off
	}
	return b[off : off+blockstore.Align]
}

// BenchmarkBlockCheck measures what the per-block CRC32C check costs a hot
// read: each iteration is a fresh cache over a warm directory (a restarted
// server, whose first read of each block is checked) reading a 256 MiB file
// whole, with the check on and off. It reports process CPU seconds per GiB.
//
//	go test ./internal/cache -run '^$' -bench BlockCheck -benchtime 10x
func BenchmarkBlockCheck(b *testing.B) {
	const size = 256 << 20
	m := origin.NewMem("mem://o")
	m.Put("/f", randomData(5, size), time.Now())
	dir := b.TempDir()
	warm := newTestCache(b, dir, m, func(c *Config) { c.BlockSize, c.PieceSize = 1<<20, 128<<10 })
	readAllVia(b, warm, "/f")
	waitIdle(b, warm)
	warm.Close()
	for _, on := range []bool{false, true} {
		name := map[bool]string{false: "off", true: "on"}[on]
		b.Run(name, func(b *testing.B) {
			var cpu float64
			for range b.N {
				c := newTestCache(b, dir, m, func(c *Config) {
					c.BlockSize, c.PieceSize = 1<<20, 128<<10
					c.NoBlockChecksums = !on
				})
				t0 := cpuSeconds()
				f := openTest(b, c, "/f")
				if n, err := f.Stream(context.Background(), 0, size, func([]byte) error { return nil }); err != nil || n != size {
					b.Fatalf("read %d: %v", n, err)
				}
				f.Close()
				cpu += cpuSeconds() - t0
				waitIdle(b, c)
				if on && c.Stats().BlocksChecked.Load() != size>>20 {
					b.Fatalf("checked %d blocks", c.Stats().BlocksChecked.Load())
				}
				c.Close()
			}
			b.ReportMetric(cpu/float64(b.N)*float64(1<<30)/size, "cpu-s/GiB")
			b.SetBytes(size)
		})
	}
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// TestNoPlaceholderCRC: a block whose every byte arrived but whose origin
// read then failed (the connection broke before the request's status) is
// not kept with the CRC of no bytes. It was, as 00000000: read back from
// disk, the good block "failed its CRC32C check", was dropped and fetched
// again (seen twice in a 30-minute soak).
func TestNoPlaceholderCRC(t *testing.T) {
	dir := t.TempDir()
	m, data := memWithFile(1, 40*testBlock+123)
	var failed sync.Map
	m.OnDone(func(_ context.Context, _ string, off int64, _ int) error {
		if _, again := failed.LoadOrStore(off, true); !again {
			return errors.New("connection reset after the last byte")
		}
		return nil
	})
	// RAM for 16 blocks: the second read comes back from disk.
	c := newTestCache(t, dir, m, func(cfg *Config) { cfg.RAM, cfg.FetchMemory = 16*testBlock, 8*testBlock })
	for pass := range 2 {
		if got := readAllVia(t, c, "/f"); !bytes.Equal(got, data) {
			t.Fatalf("read %d differs from the origin", pass)
		}
		waitIdle(t, c)
	}
	if n := c.Stats().BlocksCorrupt.Load(); n != 0 {
		t.Fatalf("%d good blocks failed their check when read back (a placeholder CRC was recorded)", n)
	}
	c.Close()
	b, _ := os.ReadFile(MetaPath(dir, Key{Origin: "mem://o", Path: "/f"}))
	side, err := sidecar.Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	for blk := range side.Durable.Len() {
		if side.CRCKnown.Test(blk) && side.BlockCRC[blk] == 0 {
			t.Errorf("block %d recorded with CRC 00000000", blk)
		}
	}
}

// TestDiskReadDepth: a client reading a file back from disk has the disk's
// read depth of blocks after it read into RAM ahead of it (several reads in
// flight, as devices need), no more.
func TestDiskReadDepth(t *testing.T) {
	dir := t.TempDir()
	m, data := memWithFile(4, 40*testBlock)
	c := newTestCache(t, dir, m, nil)
	readAllVia(t, c, "/f")
	waitIdle(t, c)
	c.Close()
	const depth = 8
	c2 := newTestCache(t, dir, m, func(cfg *Config) { cfg.DiskReadDepth = depth })
	if d := c2.disks[0].depth; d != depth {
		t.Fatalf("disk read depth %d, want %d", d, depth)
	}
	f := openTest(t, c2, "/f")
	buf := make([]byte, 100)
	if _, err := f.ReadAt(context.Background(), buf, 0); err != nil || !bytes.Equal(buf, data[:100]) {
		t.Fatalf("read: %v", err)
	}
	h := f.(*handle)
	h.e.fetchWG.Wait()
	for b := 1; b < 40; b++ {
		if got, want := c2.store.Has(h.e.blockKey(b)), b <= depth; got != want {
			t.Errorf("block %d in RAM %v, want %v (read ahead to depth %d)", b, got, want, depth)
		}
	}
	f.Close()
	// Sized to the device when not given.
	if d := readDepthOf(dir); d != depthSolid && d != depthRotational {
		t.Fatalf("depth of %s: %d", dir, d)
	}
}
