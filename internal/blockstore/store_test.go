package blockstore

import (
	"bytes"
	"context"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hepcache/hepcache/disk"
)

const testSlot = 64 << 10

func newStore(t *testing.T, slots int) *Store {
	t.Helper()
	s, err := New(Config{Size: int64(slots) * testSlot, SlotSize: testSlot})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// fill publishes block k with bytes derived from k, fetched for client 1,
// and releases it.
func fill(t *testing.T, s *Store, k Key) { fillFor(t, s, k, 1) }

// fillFor is fill for client r (Internal: read ahead).
func fillFor(t *testing.T, s *Store, k Key, r Reader) {
	t.Helper()
	b, err := s.Fill(context.Background(), testSlot)
	if err != nil {
		t.Fatal(err)
	}
	copy(b.Buf(), pattern(k))
	s.Publish(k, b, testSlot, r, false)
	b.Release()
}

func pattern(k Key) []byte {
	b := make([]byte, testSlot)
	rand.New(rand.NewSource(int64(k.File)<<20 + k.Block)).Read(b)
	return b
}

func TestSlotsAreAlignedAndDistinct(t *testing.T) {
	s := newStore(t, MinSlots)
	seen := map[*byte]bool{}
	var held []*Block
	for i := 0; i < MinSlots; i++ {
		b, err := s.Fill(context.Background(), testSlot)
		if err != nil {
			t.Fatal(err)
		}
		p := &b.Buf()[0]
		if seen[p] || len(b.Buf()) != testSlot {
			t.Fatalf("slot %d reused or wrong size", i)
		}
		seen[p] = true
		if addr := uintptrOf(b.Buf()); addr%Align != 0 {
			t.Fatalf("slot at %#x is not aligned", addr)
		}
		held = append(held, b)
	}
	for _, b := range held {
		b.Release()
	}
	if u := s.Usage(); u.Pinned != 0 || u.Filling != 0 || u.Cached != 0 {
		t.Fatalf("after release: %+v", u)
	}
}

// TestScanDoesNotEvictHotBlocks: blocks used twice live in the main queue
// (read again while on probation, or back soon after eviction from it); a
// one-time scan of many more blocks than the store holds cycles through
// the probation queue and leaves them there.
func TestScanDoesNotEvictHotBlocks(t *testing.T) {
	s := newStore(t, 40)
	var hot []Key
	for i := 0; i < 3; i++ { // fit in probation: read by two clients there
		k := Key{File: 1, Block: int64(i)}
		fill(t, s, k)
		s.Get(k, 1).Release()
		s.Get(k, 2).Release()
		hot = append(hot, k)
	}
	for i := 0; i < 40; i++ { // RAM full: probation and ghosts apply
		fill(t, s, Key{File: 4, Block: int64(i)})
	}
	var back []Key
	for i := 0; i < 10; i++ { // evicted by what follows, then back
		back = append(back, Key{File: 3, Block: int64(i)})
		fill(t, s, back[i])
	}
	for i := 0; i < 40; i++ {
		fill(t, s, Key{File: 5, Block: int64(i)})
	}
	for _, k := range back { // used again: a hit, or a fill after eviction
		s.Get(k, 1) // the client it was read ahead for
		if b := s.Get(k, 2); b != nil {
			b.Release()
		} else {
			fill(t, s, k)
		}
	}
	hot = append(hot, back...)
	for i := 0; i < 500; i++ {
		fill(t, s, Key{File: 2, Block: int64(i)})
	}
	for _, k := range hot {
		b := s.Get(k, 1)
		if b == nil {
			t.Fatalf("hot block %v evicted by a scan", k)
		}
		if !bytes.Equal(b.Bytes(), pattern(k)) {
			t.Fatalf("block %v has wrong bytes", k)
		}
		b.Release()
	}
	st := s.Stats()
	if st.PromotedFromS.Load() < 3 || st.GhostHits.Load() < 6 {
		t.Fatalf("%d promotions, %d ghost hits", st.PromotedFromS.Load(), st.GhostHits.Load())
	}
}

// TestFreeSlotsHoldBlocks: while slots are free, a block read once stays
// in RAM (it is not recycled through probation): a file read twice in a
// row comes from RAM the second time. Probation applies once RAM is full.
func TestFreeSlotsHoldBlocks(t *testing.T) {
	s := newStore(t, 40)
	for i := range 38 {
		fill(t, s, Key{File: 1, Block: int64(i)})
	}
	for i := range 38 {
		b := s.Get(Key{File: 1, Block: int64(i)}, 2)
		if b == nil {
			t.Fatalf("block %d of a file read once was dropped while slots were free (usage %+v)", i, s.Usage())
		}
		b.Release()
	}
	if st := s.Stats(); st.Evictions.Load() != 0 {
		t.Fatalf("%d evictions while slots were free", st.Evictions.Load())
	}
}

// TestSetLimitHandsMemoryBack: lowering the limit evicts and hands the
// memory of the freed slots back to the kernel (the arena's resident part
// falls); blocks kept still read right; raising it lets slots fill again.
func TestSetLimitHandsMemoryBack(t *testing.T) {
	s := newStore(t, 64)
	for i := range 64 {
		fill(t, s, Key{File: 1, Block: int64(i)})
	}
	hot := Key{File: 1, Block: 63}
	s.Get(hot, 2).Release() // read by a second client: kept first
	before := s.Resident()
	pinned := s.Get(Key{File: 1, Block: 0}, 3)
	back := s.SetLimit(MinSlots)
	u := s.Usage()
	if back < int64(64-MinSlots)*testSlot || u.Cached > MinSlots || u.Cold < 64-MinSlots {
		t.Fatalf("handed back %d bytes, usage %+v", back, u)
	}
	if after := s.Resident(); before >= 0 && after > before-int64(64-MinSlots)*testSlot {
		t.Fatalf("resident %d before, %d after handing back %d", before, after, back)
	}
	if !bytes.Equal(pinned.Bytes(), pattern(Key{File: 1, Block: 0})) {
		t.Fatal("a pinned block changed while memory was handed back")
	}
	pinned.Release()
	if b := s.Get(hot, 4); b == nil || !bytes.Equal(b.Bytes(), pattern(hot)) {
		t.Fatal("the hot block did not survive the shrink")
	} else {
		b.Release()
	}
	// Under the limit, a fill takes an evicted slot, not a cold one.
	for i := range 32 {
		fill(t, s, Key{File: 2, Block: int64(i)})
	}
	if u := s.Usage(); u.Cold < 64-MinSlots {
		t.Fatalf("slots took memory beyond the limit: %+v", u)
	}
	s.SetLimit(64)
	for i := range 40 {
		fill(t, s, Key{File: 3, Block: int64(i)})
	}
	if u := s.Usage(); u.Cached < 56 {
		t.Fatalf("the limit raised, slots did not fill again: %+v", u)
	}
}

// TestOneClientIsOneAccess: a client reading a block in many small pieces
// (TTreeCache, uproot) is one access: the block stays on probation and a
// scan evicts it; a second client's read is what makes it hot.
func TestOneClientIsOneAccess(t *testing.T) {
	s := newStore(t, 40)
	one, two := Key{File: 1, Block: 1}, Key{File: 1, Block: 2}
	fillFor(t, s, one, 7)
	fillFor(t, s, two, 7)
	for range 10 {
		s.Get(one, 7).Release()
		s.Get(two, 7).Release()
	}
	s.Get(two, 8).Release()
	for i := 0; i < 100; i++ {
		fill(t, s, Key{File: 2, Block: int64(i)})
	}
	if b := s.Get(one, 9); b != nil {
		t.Fatal("a block read by one client only survived a scan")
	}
	b := s.Get(two, 9)
	if b == nil {
		t.Fatal("a block read by two clients was evicted by a scan")
	}
	b.Release()
}

// TestReadAheadWaitsForItsReader: blocks read ahead stay in RAM until their
// reader has read them, even while a scan goes on (else the reader would
// read them back from disk); once read they are on probation like any.
func TestReadAheadWaitsForItsReader(t *testing.T) {
	s := newStore(t, 40)
	var ahead []Key
	for i := 0; i < 12; i++ {
		ahead = append(ahead, Key{File: 5, Block: int64(i)})
		fillFor(t, s, ahead[i], Internal)
	}
	for i := 0; i < 200; i++ {
		fill(t, s, Key{File: 6, Block: int64(i)})
	}
	for _, k := range ahead {
		b := s.Get(k, 3)
		if b == nil {
			t.Fatalf("block %v read ahead was evicted before its reader came", k)
		}
		b.Release()
	}
	if n := s.Usage().Unread; n != 0 {
		t.Fatalf("%d blocks still counted unread", n)
	}
	for i := 200; i < 400; i++ {
		fill(t, s, Key{File: 6, Block: int64(i)})
	}
	if s.Get(ahead[0], 4) != nil {
		t.Fatal("a block read once, by its reader, survived a long scan")
	}
}

// TestGhostHitGoesToMain: a block evicted from probation and loaded again
// soon enters the main queue.
func TestGhostHitGoesToMain(t *testing.T) {
	s := newStore(t, 20)
	k := Key{File: 7, Block: 3}
	fill(t, s, k)
	for i := 0; i < 35; i++ {
		fill(t, s, Key{File: 8, Block: int64(i)})
	}
	if b := s.Get(k, 1); b != nil {
		t.Fatal("a block read once survived a scan of more than the store")
	}
	fill(t, s, k)
	if s.Stats().GhostHits.Load() != 1 {
		t.Fatal("the block's return was not seen as a ghost hit")
	}
	for i := 0; i < 100; i++ { // a scan of blocks never seen
		fill(t, s, Key{File: 9, Block: int64(i)})
	}
	b := s.Get(k, 1)
	if b == nil {
		t.Fatal("a block back from the ghost list was evicted by a scan")
	}
	b.Release()
}

// TestPinnedBlocksStayAndFillWaits: pinned blocks are never evicted; with
// every slot pinned a fill waits until one is released or its ctx ends.
func TestPinnedBlocksStayAndFillWaits(t *testing.T) {
	s := newStore(t, MinSlots)
	var pins []*Block
	for i := 0; i < MinSlots; i++ {
		k := Key{File: 1, Block: int64(i)}
		fill(t, s, k)
		pins = append(pins, s.Get(k, 1))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.Fill(ctx, testSlot); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("fill with every slot pinned: %v", err)
	}
	got := make(chan *Block)
	go func() {
		b, err := s.Fill(context.Background(), testSlot)
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()
	time.Sleep(20 * time.Millisecond)
	pins[5].Release()
	b := <-got
	for i, p := range pins {
		if i == 5 {
			continue
		}
		if !bytes.Equal(p.Bytes(), pattern(Key{File: 1, Block: int64(i)})) {
			t.Fatalf("pinned block %d was overwritten", i)
		}
		p.Release()
	}
	b.Release()
	if s.Get(Key{File: 1, Block: 5}, 1) != nil {
		t.Fatal("the evicted block is still findable")
	}
}

// TestDropWhilePinned: a dropped block is no longer found; its reader keeps
// the bytes until release, then the slot is free.
func TestDropWhilePinned(t *testing.T) {
	s := newStore(t, MinSlots)
	k := Key{File: 3, Block: 1}
	fill(t, s, k)
	b := s.Get(k, 1)
	s.Drop(k)
	if s.Get(k, 1) != nil {
		t.Fatal("dropped block still found")
	}
	if !bytes.Equal(b.Bytes(), pattern(k)) {
		t.Fatal("a reader's bytes changed under its pin")
	}
	b.Release()
	if u := s.Usage(); u.Cached != 0 || u.Pinned != 0 {
		t.Fatalf("after release: %+v", u)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a second Release did not panic")
		}
	}()
	b.Release()
}

func writeTestFile(t *testing.T, dir string, data []byte) *File {
	t.Helper()
	name := filepath.Join(dir, "data")
	f, err := Open(disk.OS{}, name, os.O_RDWR|os.O_CREATE, 0o644, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := f.Truncate(int64(len(data))); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, MinSlots)
	for off := 0; off < len(data); off += testSlot {
		n := min(testSlot, len(data)-off)
		b, _ := s.Fill(context.Background(), testSlot)
		copy(b.Buf(), data[off:off+n])
		if err := f.WriteBlock(b.Buf(), int64(off), n); err != nil {
			t.Fatal(err)
		}
		b.Release()
	}
	return f
}

// TestLoadChecksAndCoalesces: concurrent loads of one block read the disk
// once and get the right bytes; a block whose bytes changed on disk is
// refused with ErrCorrupt and not kept.
func TestLoadChecksAndCoalesces(t *testing.T) {
	dir := t.TempDir()
	data := make([]byte, 3*testSlot+1000) // a short last block
	rand.New(rand.NewSource(5)).Read(data)
	f := writeTestFile(t, dir, data)
	if !f.Direct() {
		t.Fatalf("%s refuses O_DIRECT", dir)
	}
	if st, _ := f.Stat(); st.Size() != int64(len(data)) {
		t.Fatalf("file size %d after padded tail write, want %d", st.Size(), len(data))
	}
	s := newStore(t, MinSlots)
	checks := checksOf(data)
	src := func(b int) Source {
		off := b * testSlot
		return Source{File: f, Off: int64(off), N: min(testSlot, len(data)-off), Block: b, Checks: checks}
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, _, err := s.Load(context.Background(), Key{File: 1, Block: 3}, 1, src(3))
			if err != nil {
				t.Error(err)
				return
			}
			if !bytes.Equal(b.Bytes(), data[3*testSlot:]) {
				t.Error("wrong bytes of the short last block")
			}
			b.Release()
		}()
	}
	wg.Wait()
	if n := s.Stats().DiskReads.Load(); n != 1 {
		t.Fatalf("%d disk reads for one block loaded by 8 readers", n)
	}

	// Corrupt block 1 behind the store's back, through the page cache.
	raw, err := os.OpenFile(filepath.Join(dir, "data"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	raw.WriteAt([]byte("corrupted bytes"), testSlot+123)
	raw.Close()
	_, _, err = s.Load(context.Background(), Key{File: 1, Block: 1}, 1, src(1))
	var ce *CorruptError
	if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || ce.Off != testSlot {
		t.Fatalf("load of a corrupted block: %v", err)
	}
	if s.Get(Key{File: 1, Block: 1}, 1) != nil || s.Stats().Corrupt.Load() != 1 {
		t.Fatal("a corrupted block was kept")
	}
	// The failed check names its epoch: forgetting at it works once; a
	// CRC recorded since (the block written again) is kept.
	checks.Record(2, CRC32C(data[2*testSlot:3*testSlot]))
	if !checks.ForgetAt(1, ce.Epoch) || checks.ForgetAt(1, ce.Epoch) {
		t.Fatal("forget at the failed check's epoch")
	}
	// Dropped, its bad bytes are not taken for a block stored before
	// per-block CRCs (a read racing with the drop), nor is a CRC learnt,
	// until the block is written and recorded again.
	if _, _, err := s.Load(context.Background(), Key{File: 1, Block: 1}, 1, src(1)); !errors.Is(err, ErrDropped) {
		t.Fatalf("load of a dropped block: %v", err)
	}
	if _, known := checks.Known(1); known || s.Get(Key{File: 1, Block: 1}, 1) != nil {
		t.Fatal("a dropped block was learnt or kept")
	}
	raw, _ = os.OpenFile(filepath.Join(dir, "data"), os.O_RDWR, 0)
	raw.WriteAt(data[testSlot:2*testSlot], testSlot)
	raw.Close()
	checks.Record(1, CRC32C(data[testSlot:2*testSlot]))
	if b, _, err := s.Load(context.Background(), Key{File: 1, Block: 1}, 1, src(1)); err != nil || !bytes.Equal(b.Bytes(), data[testSlot:2*testSlot]) {
		t.Fatalf("load of a block written again: %v", err)
	} else {
		b.Release()
	}
	// A block with no recorded CRC is trusted, and its CRC learnt.
	legacy := NewChecks(4, nil, nil)
	u := src(0)
	u.Checks = legacy
	b, got, err := s.Load(context.Background(), Key{File: 2, Block: 0}, 1, u)
	if err != nil || !got.FromDisk {
		t.Fatalf("unchecked load: %v, %+v", err, got)
	}
	b.Release()
	if crc, ok := legacy.Known(0); !ok || crc != CRC32C(data[:testSlot]) || !legacy.TakeLearnt() || legacy.TakeLearnt() {
		t.Fatalf("learnt CRC %08x %v", crc, ok)
	}
}

// checksOf records the CRC of each block of data.
func checksOf(data []byte) *Checks {
	n := (len(data) + testSlot - 1) / testSlot
	c := NewChecks(n, nil, nil)
	for b := range n {
		c.Record(b, CRC32C(data[b*testSlot:min(len(data), (b+1)*testSlot)]))
	}
	return c
}

func uintptrOf(b []byte) uintptr { return uintptr(unsafePointer(b)) }

// TestSmallBlocksTouchSmallPages: a small block (a small file's only
// block) takes a slot in the arena's region kept off transparent huge
// pages, so that filling it touches its own 4 KiB page, not a 2 MiB huge
// page the kernel zeroes first (bench files: that zeroing was 43 % of a
// 4 KiB miss's CPU). Large blocks take the huge-page slots first.
func TestSmallBlocksTouchSmallPages(t *testing.T) {
	const slotSize = 1 << 20
	s, err := New(Config{Size: 64 * slotSize, SlotSize: slotSize})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.arena.huge {
		t.Log("no transparent huge pages here: only the slot placement is checked")
	}
	before := s.Resident()
	small, err := s.Fill(context.Background(), 4096)
	if err != nil {
		t.Fatal(err)
	}
	copy(small.Buf()[:4096], bytes.Repeat([]byte{7}, 4096))
	if got := s.Resident() - before; got > 64<<10 {
		t.Errorf("a 4 KiB block made %d bytes resident", got)
	}
	big, err := s.Fill(context.Background(), slotSize)
	if err != nil {
		t.Fatal(err)
	}
	if s.arena.huge && (small.sl.idx < s.arena.smallFrom || big.sl.idx >= s.arena.smallFrom) {
		t.Errorf("small block in slot %d, large in %d; the small region starts at %d", small.sl.idx, big.sl.idx, s.arena.smallFrom)
	}
	bigIdx := big.sl.idx
	small.Release()
	big.Release()
	// Once the small region is used up, a small block takes an evicted
	// slot rather than a fresh huge page.
	if !s.arena.huge {
		return
	}
	for i := 0; i < 64; i++ {
		b, err := s.Fill(context.Background(), 4096)
		if err != nil {
			t.Fatal(err)
		}
		if b.sl.idx < s.arena.smallFrom && b.sl.idx != bigIdx {
			t.Fatalf("small block %d took slot %d on huge pages (%d cold ones there)", i, b.sl.idx, len(s.cold))
		}
		s.Publish(Key{File: 1, Block: int64(i)}, b, 4096, 1, false)
		b.Release()
	}
}
