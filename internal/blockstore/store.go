package blockstore

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"
	"sync/atomic"
)

// Reader identifies the client on whose behalf a block is used: accesses
// by one reader count once (S3-FIFO's frequency counts clients coming
// back, not the pieces of one read). Internal is none (verification, a
// fill nobody waits for): no access at all.
type Reader uint64

// Internal is the Reader of work that is not a client's access.
const Internal Reader = 0

// Key names the bytes of one block of one cached copy of a file. File is an
// id the cache gives each copy: a copy replaced by another version gets a
// new id, so a block of the old version can never be found under the new.
type Key struct {
	File  uint64
	Block int64
}

// ErrCorrupt is returned by Load when the bytes on disk do not match the
// block's recorded CRC32C.
var ErrCorrupt = errors.New("blockstore: block failed its CRC32C check")

// ErrDropped is returned by Load for a block that failed its check and was
// not written again since (Checks.ForgetAt): the bytes on disk are the bad
// ones, or a new write in progress.
var ErrDropped = errors.New("blockstore: block dropped after failing its CRC32C check")

// castagnoli is the CRC32C table (hardware-accelerated where available).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC32C returns the CRC32C of b, the per-block check sum.
func CRC32C(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// Config sizes a Store.
type Config struct {
	// Size is the arena's size in bytes: the RAM that holds blocks in
	// flight and recently used blocks. Rounded down to whole slots; at
	// least MinSlots slots.
	Size int64
	// SlotSize is the size of one block in bytes, a multiple of Align.
	SlotSize int64
	// NoHugePages does not ask for transparent huge pages for the arena.
	// Default false: asked for (where the kernel's setting is "madvise" or
	// "always"), making a first touch of the arena several times cheaper
	// (bench floor).
	NoHugePages bool
}

// MinSlots is the fewest slots a store has: enough for a few fetches and
// readers at once.
const MinSlots = 16

// smallShare is the part of the cached blocks S3-FIFO's probation queue
// holds (the paper's 10 %) once the arena is full, and minSmall the fewest
// it holds (or a tenth of the slots, if less). While a slot is free (or
// handed back to the kernel and not needed back by the node) a block
// takes it rather than another block's: free memory holds what was read,
// as the page cache would, and probation and ghosts only decide what goes
// once RAM is full.
const (
	smallShare = 10
	minSmall   = 32
)

// Store is the arena and the RAM block cache over it. Safe for concurrent
// use.
type Store struct {
	arena *arena
	slots []slot
	// minSmall is the probation queue's floor for this arena, in slots.
	minSmall int

	// mu protects everything below and every slot's fields but buf.
	mu sync.Mutex
	// free are slots whose memory is resident, most recently freed
	// first; cold and coldSmall are slots without memory (never used, or
	// handed back under pressure), the lowest index first, cold on huge
	// pages and coldSmall in the arena's region kept off them.
	free, cold, coldSmall []*slot
	// limit is how many slots may hold blocks (SetLimit: the node's
	// memory pressure lowers it); handing is the slots being handed back.
	limit, handing int
	cached         map[Key]*slot
	small, main    queue
	ghost          ghost
	loading        map[Key]*load
	// changed is closed and replaced whenever a slot may have become
	// available, waking acquirers.
	changed chan struct{}
	touched int // slots ever handed out: the arena's resident part
	filling int
	pinned  int
	// unread counts cached blocks read ahead that no reader has read yet:
	// evicting them would only make their reader read them back from disk,
	// so probation keeps them on top of its share, up to half the slots.
	unread int
	// closed: Close was called; the arena goes when the last pin does.
	closed bool
	// mincore is Resident's scratch space.
	mincore []byte

	stats Stats
}

// Stats are the store's counters. Read them with the atomic methods.
type Stats struct {
	Hits, Misses     atomic.Int64 // Get and Load lookups that found / did not find the block in RAM
	DiskReads        atomic.Int64 // blocks read back from a data file
	DiskReadBytes    atomic.Int64
	Corrupt          atomic.Int64 // blocks read back that failed their check
	Evictions        atomic.Int64
	PromotedFromS    atomic.Int64 // probation blocks read again, moved to the main queue
	GhostHits        atomic.Int64 // blocks loaded again soon after eviction from probation: into the main queue
	AcquireWaits     atomic.Int64 // slot requests that had to wait for a slot
	UncheckedLoads   atomic.Int64 // blocks read back with no recorded CRC (checksummed, trusted on first use)
	HandedBack       atomic.Int64 // bytes of slots whose memory went back to the kernel (SetLimit)
	FallbackWrites   atomic.Int64 // block writes without direct I/O
	DirectWrites     atomic.Int64
	DirectWriteBytes atomic.Int64
}

type slotState uint8

const (
	slotFree    slotState = iota
	slotFilling           // owned by a fill, not findable
	slotCached            // in cached and in a queue
	slotDropped           // was cached, forgotten while pinned: freed at last release
)

type slot struct {
	idx   int
	buf   []byte
	key   Key
	n     int
	state slotState
	refs  int32
	freq  uint8 // S3-FIFO's access count, 0..3
	// unread: read ahead, not read by any client yet (Store.unread).
	unread bool
	// reader is the last client (Reader) that read the block: its reads
	// of it count as one access, so a client reading a block in many
	// small pieces (TTreeCache, uproot) does not make it look hot. 0: none
	// yet (a block read ahead of its readers).
	reader Reader
	q      *queue
	prev   *slot
	next   *slot
}

// New maps the arena and returns an empty store.
func New(cfg Config) (*Store, error) {
	if cfg.SlotSize <= 0 || cfg.SlotSize%Align != 0 {
		return nil, fmt.Errorf("blockstore: slot size %d is not a positive multiple of %d", cfg.SlotSize, Align)
	}
	n := int(cfg.Size / cfg.SlotSize)
	if n < MinSlots {
		return nil, fmt.Errorf("blockstore: %d bytes hold %d blocks of %d bytes, want at least %d", cfg.Size, n, cfg.SlotSize, MinSlots)
	}
	a, err := newArena(n, int(cfg.SlotSize), !cfg.NoHugePages)
	if err != nil {
		return nil, err
	}
	s := &Store{
		arena:    a,
		slots:    make([]slot, n),
		minSmall: max(1, min(minSmall, n*smallShare/100)),
		limit:    n,
		cached:   map[Key]*slot{},
		loading:  map[Key]*load{},
		changed:  make(chan struct{}),
	}
	s.ghost.init(n)
	for i := n - 1; i >= 0; i-- { // slot 0 on top: slots are touched in order
		s.slots[i].idx, s.slots[i].buf = i, a.slot(i)
		s.pushColdLocked(&s.slots[i])
	}
	return s, nil
}

// ErrClosed is returned by Fill and Load after Close.
var ErrClosed = errors.New("blockstore: closed")

// Close ends the store: Fill and Load fail, Get finds nothing, and the
// arena is unmapped once the last pinned block is released.
func (s *Store) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.wakeLocked()
	if s.pinned == 0 {
		s.arena.close()
	}
}

// Stats returns the live counters.
func (s *Store) Stats() *Stats { return &s.stats }

// Usage is the store's occupancy.
type Usage struct {
	Slots, SlotSize int
	// Limit is how many slots may hold blocks now (SetLimit); Cold counts
	// the slots without memory (never used, or handed back).
	Limit, Cold int
	// HugePages: the arena asked for transparent huge pages and the
	// kernel took the request.
	HugePages bool
	// Cached counts the blocks held for reuse (probation and main),
	// Filling the slots being filled, Pinned the slots in use by readers
	// or fills, Touched the slots ever used (the arena's resident part).
	Cached, Small, Main, Filling, Pinned, Touched int
	// Unread counts the blocks read ahead that no client has read yet.
	Unread int
}

// Usage returns the store's occupancy now.
func (s *Store) Usage() Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Usage{Slots: len(s.slots), SlotSize: s.arena.slotSize, Limit: s.limit, Cold: len(s.cold) + len(s.coldSmall), HugePages: s.arena.huge, Cached: len(s.cached),
		Small: s.small.len, Main: s.main.len, Filling: s.filling, Pinned: s.pinned, Touched: s.touched, Unread: s.unread}
}

// Hot returns how many blocks more than one client read (the main queue,
// and the probation blocks read again): the hot set, which the cache keeps
// when tasks stall on memory. It walks the probation queue: for the
// pressure watch, not the data path.
func (s *Store) Hot() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.main.len
	for sl := s.small.head; sl != nil; sl = sl.next {
		if sl.freq > 0 {
			n++
		}
	}
	return n
}

// Resident returns how many bytes of the arena are in memory now (its
// share of the process's RSS), or -1 if that cannot be told. It costs a
// system call over the arena (about 0.6 ms for 3 GiB): for metrics, not
// for the data path.
func (s *Store) Resident() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0
	}
	var n int64
	n, s.mincore = s.arena.resident(s.mincore)
	return n
}

// Block is a pinned slot: its bytes stay put until Release. Each Block
// value is released exactly once.
type Block struct {
	s  *Store
	sl *slot
}

// Bytes returns the block's bytes (for a block being filled, the bytes
// recorded so far by Publish; use Buf while filling). Valid until Release.
func (b *Block) Bytes() []byte { return b.sl.buf[:b.sl.n] }

// Buf returns the whole slot, for a fill to write into.
func (b *Block) Buf() []byte { return b.sl.buf }

// Pin returns another pin of the same slot, for a reader that joins a
// fill. The caller must hold b.
func (b *Block) Pin() *Block {
	b.s.mu.Lock()
	b.s.pinLocked(b.sl)
	b.s.mu.Unlock()
	return &Block{s: b.s, sl: b.sl}
}

// Release drops the pin. A slot no longer pinned is free again if it was
// never published or was dropped, and evictable otherwise.
func (b *Block) Release() {
	s := b.s
	s.mu.Lock()
	sl := b.sl
	b.sl = nil
	if sl == nil {
		s.mu.Unlock()
		panic("blockstore: Block released twice")
	}
	sl.refs--
	if sl.refs < 0 {
		s.mu.Unlock()
		panic("blockstore: negative pin count")
	}
	if sl.refs == 0 {
		s.pinned--
		switch sl.state {
		case slotFilling:
			s.filling--
			s.freeLocked(sl)
		case slotDropped:
			s.freeLocked(sl)
		}
		s.wakeLocked()
		if s.closed && s.pinned == 0 {
			s.arena.close()
		}
	}
	s.mu.Unlock()
}

func (s *Store) pinLocked(sl *slot) {
	if sl.refs == 0 {
		s.pinned++
	}
	sl.refs++
}

// freeLocked returns sl to the free slots. Under a lowered limit its
// memory stays until the next SetLimit hands it back (the pressure watch
// calls it again while memory is short).
func (s *Store) freeLocked(sl *slot) {
	sl.state, sl.n, sl.freq, sl.key, sl.reader = slotFree, 0, 0, Key{}, Internal
	s.free = append(s.free, sl)
}

// inUseLocked counts the slots holding memory for blocks: not free, not
// cold, not being handed back.
func (s *Store) inUseLocked() int {
	return len(s.slots) - len(s.free) - len(s.cold) - len(s.coldSmall) - s.handing
}

// pushColdLocked keeps sl, whose memory is not resident, for a later
// first use, on the stack of its region of the arena.
func (s *Store) pushColdLocked(sl *slot) {
	if sl.idx >= s.arena.smallFrom {
		s.coldSmall = append(s.coldSmall, sl)
	} else {
		s.cold = append(s.cold, sl)
	}
}

// popColdLocked takes a slot without resident memory: for a small block
// from the region off huge pages only (a fresh huge page would cost the
// kernel 2 MiB of zeroing for a few KiB: a small block rather evicts),
// for a large one from the rest first; nil when there is none.
func (s *Store) popColdLocked(small bool) *slot {
	stacks := []*[]*slot{&s.cold, &s.coldSmall}
	if small {
		stacks = stacks[1:]
	}
	for _, st := range stacks {
		if n := len(*st); n > 0 {
			sl := (*st)[n-1]
			(*st)[n-1] = nil
			*st = (*st)[:n-1]
			s.touched = max(s.touched, sl.idx+1)
			return sl
		}
	}
	return nil
}

// smallBlock says whether a block of n bytes is small enough for the
// region off huge pages.
func (s *Store) smallBlock(n int) bool { return n <= s.arena.slotSize/smallRegion }

func (s *Store) wakeLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Get returns the cached block k pinned for r, or nil.
func (s *Store) Get(k Key, r Reader) *Block {
	s.mu.Lock()
	defer s.mu.Unlock()
	sl := s.cached[k]
	if sl == nil || s.closed {
		s.stats.Misses.Add(1)
		return nil
	}
	s.stats.Hits.Add(1)
	s.accessLocked(sl, r)
	s.pinLocked(sl)
	return &Block{s: s, sl: sl}
}

// accessLocked counts r's read of sl: a reader other than the last one
// is a new access; the first reader of a block read ahead is the one it
// was read ahead for.
func (s *Store) accessLocked(sl *slot, r Reader) {
	if r != Internal {
		s.readLocked(sl)
	}
	switch {
	case r == Internal || r == sl.reader:
	case sl.reader == Internal:
		sl.reader = r
	default:
		sl.reader = r
		sl.freq = min(sl.freq+1, 3)
	}
}

// Has reports whether block k is in RAM or being read into it.
func (s *Store) Has(k Key) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cached[k] != nil || s.loading[k] != nil
}

// Fill returns a pinned, unfindable slot for a block of n bytes being
// fetched. It waits for a slot while every one is pinned, until ctx ends.
func (s *Store) Fill(ctx context.Context, n int) (*Block, error) {
	sl, err := s.acquire(ctx, n)
	if err != nil {
		return nil, err
	}
	return &Block{s: s, sl: sl}, nil
}

// acquire takes a slot for a fill or a load of n bytes, pinned once.
func (s *Store) acquire(ctx context.Context, n int) (*slot, error) {
	s.mu.Lock()
	waited := false
	for {
		if s.closed {
			s.mu.Unlock()
			return nil, ErrClosed
		}
		if sl := s.takeLocked(s.smallBlock(n)); sl != nil {
			sl.state = slotFilling
			s.filling++
			s.pinLocked(sl)
			s.mu.Unlock()
			return sl, nil
		}
		if !waited {
			waited = true
			s.stats.AcquireWaits.Add(1)
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for a RAM block (every one in use): %w", ctx.Err())
		}
		s.mu.Lock()
	}
}

// takeLocked finds a slot: a free one (resident first, then one without
// memory, popColdLocked) while the limit allows another, else an evicted
// one.
func (s *Store) takeLocked(small bool) *slot {
	if s.inUseLocked() < s.limit {
		if len(s.free) > 0 {
			return s.popFreeLocked()
		}
		if sl := s.popColdLocked(small); sl != nil {
			return sl
		}
	}
	if sl := s.evictLocked(); sl != nil || !small || s.inUseLocked() >= s.limit {
		return sl
	}
	// Nothing to evict: a huge page it is.
	return s.popColdLocked(false)
}

// smallTargetLocked is the probation queue's share now: a tenth of the
// cached blocks, at least minSmall, plus the blocks read ahead and not
// read yet.
func (s *Store) smallTargetLocked() int {
	return max(s.minSmall, (s.small.len+s.main.len)*smallShare/100) + s.unread
}

// readLocked records that sl has been read (no longer unread).
func (s *Store) readLocked(sl *slot) {
	if sl.unread {
		sl.unread = false
		s.unread--
	}
}

func (s *Store) popFreeLocked() *slot {
	sl := s.free[len(s.free)-1]
	s.free[len(s.free)-1] = nil
	s.free = s.free[:len(s.free)-1]
	s.touched = max(s.touched, sl.idx+1)
	return sl
}

// evictLocked frees a cached, unpinned block's slot (S3-FIFO): from the
// probation queue while it holds its share (a block read again there
// moves to the main queue instead), else from the main queue (a block
// read since it was last considered gets another round). Pinned blocks
// are passed over.
func (s *Store) evictLocked() *slot {
	first, second := &s.small, &s.main
	if s.small.len < s.smallTargetLocked() && s.main.len > 0 {
		first, second = second, first
	}
	for _, q := range []*queue{first, second} {
		if sl := s.evictFromLocked(q); sl != nil {
			return sl
		}
	}
	return nil
}

func (s *Store) evictFromLocked(q *queue) *slot {
	for tries := 2*q.len + 1; tries > 0 && q.tail != nil; tries-- {
		sl := q.tail
		switch {
		case sl.refs > 0, sl.unread && s.unread <= s.limit/2:
			q.moveToHead(sl)
		case q == &s.small && sl.freq > 0:
			q.remove(sl)
			sl.freq = 0
			s.main.pushHead(sl)
			s.stats.PromotedFromS.Add(1)
		case q == &s.main && sl.freq > 0:
			sl.freq--
			q.moveToHead(sl)
		default:
			q.remove(sl)
			s.readLocked(sl)
			delete(s.cached, sl.key)
			if q == &s.small {
				s.ghost.add(sl.key)
			}
			s.stats.Evictions.Add(1)
			sl.state, sl.n, sl.freq, sl.key, sl.reader = slotFree, 0, 0, Key{}, Internal
			return sl
		}
	}
	return nil
}

// SetLimit bounds the slots that hold memory to n (at least MinSlots):
// unpinned blocks beyond it are evicted, least useful first, and the
// memory of every free slot is handed back to the kernel until as many
// slots hold memory as n allows (pinned blocks and fills in progress are
// waited for: they count until released). Raising the limit lets slots
// take memory again as blocks need it. It returns the bytes handed back.
func (s *Store) SetLimit(n int) int64 {
	n = max(MinSlots, min(n, len(s.slots)))
	s.mu.Lock()
	s.limit = n
	var back []*slot
	for s.inUseLocked()+len(s.free) > n {
		var sl *slot
		if len(s.free) > 0 {
			sl = s.popFreeLocked()
		} else if sl = s.evictLocked(); sl == nil {
			break // the rest is pinned
		}
		back = append(back, sl)
		s.handing++
	}
	s.mu.Unlock()
	// The memory goes back outside the lock (a system call per slot).
	for _, sl := range back {
		s.arena.handBack(sl.idx)
	}
	s.mu.Lock()
	s.handing -= len(back)
	for _, sl := range back {
		s.pushColdLocked(sl)
	}
	s.stats.HandedBack.Add(int64(len(back)) * int64(s.arena.slotSize))
	s.wakeLocked()
	s.mu.Unlock()
	return int64(len(back)) * int64(s.arena.slotSize)
}

// Publish makes the filled block b findable as k with its first n bytes,
// replacing any block cached under k. r is the reader it was filled for
// (Internal: read ahead, nobody yet) and shared says other readers waited
// for it too (a second access). The caller keeps its pin.
func (s *Store) Publish(k Key, b *Block, n int, r Reader, shared bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.publishLocked(k, b.sl, n, r, shared)
}

func (s *Store) publishLocked(k Key, sl *slot, n int, r Reader, shared bool) {
	if sl.state != slotFilling {
		panic("blockstore: publish of a slot that is not being filled")
	}
	s.dropLocked(k)
	s.filling--
	sl.key, sl.n, sl.state, sl.freq, sl.reader = k, n, slotCached, 0, r
	if shared {
		sl.freq = 1
	}
	if r == Internal {
		sl.unread = true
		s.unread++
	}
	s.cached[k] = sl
	if s.ghost.take(k) {
		s.stats.GhostHits.Add(1)
		s.main.pushHead(sl)
	} else {
		s.small.pushHead(sl)
	}
}

// Drop forgets block k (found corrupt, or of a copy that is gone). A
// reader holding it keeps its bytes until it releases them.
func (s *Store) Drop(k Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropLocked(k)
}

func (s *Store) dropLocked(k Key) {
	sl := s.cached[k]
	if sl == nil {
		return
	}
	delete(s.cached, k)
	sl.q.remove(sl)
	s.readLocked(sl)
	if sl.refs > 0 {
		sl.state = slotDropped
		return
	}
	s.freeLocked(sl)
	s.wakeLocked()
}

// Source is where Load finds a block that is not in RAM: N bytes at Off
// of File, block Block of the copy whose CRCs are Checks. Unchecked reads
// the block without comparing its CRC (the cache's block checksums off).
type Source struct {
	File      *File
	Off       int64
	N         int
	Block     int
	Checks    *Checks
	Unchecked bool
}

// load is a read of one block from disk in progress; others wanting the
// block wait for it.
type load struct {
	done    chan struct{}
	waiters int
	sl      *slot
	err     error
}

// Loaded says where a block Load returned came from.
type Loaded struct {
	// FromDisk is set when this Load read the block from its file (not
	// when it waited for another Load that did), checked.
	FromDisk bool
	// Ahead is set when the block had been read ahead of its reader (a
	// Load by Internal, or one this Load waited for): a reader going
	// through a file in order, for whom the reading ahead goes on.
	Ahead bool
}

// Load returns block k pinned: from RAM if it is there, else read from
// src into a slot, checked against the CRC its Checks record, and kept in
// RAM. Concurrent Loads of one block read the disk once. A block whose
// bytes do not match is not kept, and ErrCorrupt (wrapped in a
// *CorruptError naming the epoch checked against) is returned; a block
// with no CRC recorded (stored before per-block checksums) is trusted and
// its CRC learnt.
func (s *Store) Load(ctx context.Context, k Key, r Reader, src Source) (*Block, Loaded, error) {
	for {
		b, crc, err := s.load(ctx, k, r, src)
		// A waiter whose loader gave up (its ctx ended) loads itself.
		if err != nil && ctx.Err() == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			continue
		}
		return b, crc, err
	}
}

func (s *Store) load(ctx context.Context, k Key, r Reader, src Source) (*Block, Loaded, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, Loaded{}, ErrClosed
	}
	if sl := s.cached[k]; sl != nil {
		s.stats.Hits.Add(1)
		ahead := sl.unread
		s.accessLocked(sl, r)
		s.pinLocked(sl)
		s.mu.Unlock()
		return &Block{s: s, sl: sl}, Loaded{Ahead: ahead}, nil
	}
	s.stats.Misses.Add(1)
	if l := s.loading[k]; l != nil {
		l.waiters++
		s.mu.Unlock()
		select {
		case <-l.done:
		case <-ctx.Done():
			s.mu.Lock()
			select {
			case <-l.done: // finished meanwhile: its pin for us is taken
				s.mu.Unlock()
				if l.err == nil {
					(&Block{s: s, sl: l.sl}).Release()
				}
			default:
				l.waiters--
				s.mu.Unlock()
			}
			return nil, Loaded{}, ctx.Err()
		}
		if l.err != nil {
			return nil, Loaded{}, l.err
		}
		return &Block{s: s, sl: l.sl}, Loaded{Ahead: true}, nil // the loader reports the read
	}
	l := &load{done: make(chan struct{})}
	s.loading[k] = l
	s.mu.Unlock()

	sl, err := s.acquire(ctx, src.N)
	if err == nil {
		err = s.read(sl, src)
	}
	s.mu.Lock()
	delete(s.loading, k)
	l.err = err
	if err == nil {
		s.publishLocked(k, sl, src.N, r, l.waiters > 0)
		sl.refs += int32(l.waiters) // one pin per waiter, taken for them
		l.sl = sl
	} else if sl != nil {
		sl.refs--
		s.pinned--
		s.filling--
		s.freeLocked(sl)
		s.wakeLocked()
	}
	s.mu.Unlock()
	close(l.done)
	if err != nil {
		return nil, Loaded{}, err
	}
	return &Block{s: s, sl: sl}, Loaded{FromDisk: true}, nil
}

// read fills sl from src and checks it.
func (s *Store) read(sl *slot, src Source) error {
	if src.N > len(sl.buf) {
		return fmt.Errorf("blockstore: block of %d bytes in a %d-byte slot", src.N, len(sl.buf))
	}
	want, known, dropped, epoch := src.Checks.get(src.Block)
	if dropped && !src.Unchecked {
		return ErrDropped
	}
	if err := src.File.ReadBlock(sl.buf, src.Off, src.N); err != nil {
		return err
	}
	s.stats.DiskReads.Add(1)
	s.stats.DiskReadBytes.Add(int64(src.N))
	if src.Unchecked {
		return nil
	}
	crc := CRC32C(sl.buf[:src.N])
	if !known {
		s.stats.UncheckedLoads.Add(1)
		src.Checks.learn(src.Block, crc, epoch)
		return nil
	}
	if crc != want {
		s.stats.Corrupt.Add(1)
		return &CorruptError{Off: src.Off, N: src.N, Got: crc, Want: want, Epoch: epoch}
	}
	return nil
}

// CorruptError describes a block whose bytes on disk failed their check:
// Epoch is the epoch of the CRC checked against (Checks.ForgetAt).
type CorruptError struct {
	Off       int64
	N         int
	Got, Want uint32
	Epoch     uint32
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("%d bytes at %d: CRC32C %08x, recorded %08x: %v", e.N, e.Off, e.Got, e.Want, ErrCorrupt)
}

func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// queue is a doubly linked list of cached slots, head most recent.
type queue struct {
	head, tail *slot
	len        int
}

func (q *queue) pushHead(sl *slot) {
	sl.q, sl.prev, sl.next = q, nil, q.head
	if q.head != nil {
		q.head.prev = sl
	}
	q.head = sl
	if q.tail == nil {
		q.tail = sl
	}
	q.len++
}

func (q *queue) remove(sl *slot) {
	if sl.prev != nil {
		sl.prev.next = sl.next
	} else {
		q.head = sl.next
	}
	if sl.next != nil {
		sl.next.prev = sl.prev
	} else {
		q.tail = sl.prev
	}
	sl.q, sl.prev, sl.next = nil, nil, nil
	q.len--
}

func (q *queue) moveToHead(sl *slot) {
	if q.head == sl {
		return
	}
	q.remove(sl)
	q.pushHead(sl)
}

// ghost remembers the keys last evicted from probation (a FIFO of at most
// cap keys): a block loaded again while remembered was evicted too early
// and goes to the main queue.
type ghost struct {
	keys []Key
	next int
	set  map[Key]int // key -> how many times it is in keys
}

func (g *ghost) init(n int) {
	g.keys = make([]Key, 0, n)
	g.set = make(map[Key]int, n)
}

func (g *ghost) add(k Key) {
	if len(g.keys) < cap(g.keys) {
		g.keys = append(g.keys, k)
	} else {
		old := g.keys[g.next]
		if g.set[old]--; g.set[old] <= 0 {
			delete(g.set, old)
		}
		g.keys[g.next] = k
		g.next = (g.next + 1) % len(g.keys)
	}
	g.set[k]++
}

// take reports whether k is remembered and forgets it.
func (g *ghost) take(k Key) bool {
	if g.set[k] == 0 {
		return false
	}
	delete(g.set, k) // its ring entries age out harmlessly
	return true
}
