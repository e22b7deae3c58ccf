package cache

import (
	"fmt"

	"github.com/hepcache/hepcache/internal/blockstore"
)

// Small blocks (a small file's only block, a large file's short last one)
// live in stores of their own, in slots of their size class off huge
// pages, instead of taking a block-sized slot each: a 4 KiB file then
// holds 4 KiB of RAM, not 1 MiB (a 2 MiB huge page the kernel zeroes
// first), and the RAM holds hundreds of times as many of them. A block's
// length never changes, so each block has its one store.

// smallClasses are the small-block stores: blocks up to max bytes, in a
// share of the RAM (1/share): 4 KiB blocks in a thirty-second (174,000 of
// them in a 21.8 GiB RAM: a node of small objects keeps them hot), up to
// 32 KiB in a sixty-fourth. Together under 5 % of the RAM, which a node of
// large files does not use.
var smallClasses = []struct{ max, share int64 }{
	{4 << 10, 32},
	{32 << 10, 64},
}

// newStores makes the block store and, when blocks are much larger than
// small ones and the RAM allows, the small-block stores.
func newStores(c *Config) (store *blockstore.Store, small []*blockstore.Store, err error) {
	fail := func(err error) (*blockstore.Store, []*blockstore.Store, error) {
		for _, s := range small {
			s.Close()
		}
		return nil, nil, err
	}
	bigRAM := c.RAM
	for _, cl := range smallClasses {
		n := c.RAM / cl.share
		if c.BlockSize < 4*cl.max || n/cl.max < blockstore.MinSlots || (bigRAM-n)/c.BlockSize < blockstore.MinSlots {
			break
		}
		s, err := blockstore.New(blockstore.Config{Size: n, SlotSize: cl.max, NoHugePages: true})
		if err != nil {
			return fail(fmt.Errorf("cache ram (blocks of %d bytes): %w", cl.max, err))
		}
		small = append(small, s)
		bigRAM -= n
	}
	if store, err = blockstore.New(blockstore.Config{Size: bigRAM, SlotSize: c.BlockSize, NoHugePages: c.NoHugePages}); err != nil {
		return fail(fmt.Errorf("cache ram: %w", err))
	}
	return store, small, nil
}

// storeFor is the store that holds blocks of n bytes.
func (c *Cache) storeFor(n int64) *blockstore.Store {
	for i, s := range c.small {
		if n <= smallClasses[i].max {
			return s
		}
	}
	return c.store
}

// stores are every block store: the block store first, then the small.
func (c *Cache) stores() []*blockstore.Store { return append([]*blockstore.Store{c.store}, c.small...) }

// setRAMLimit lets slots slots of the block store hold memory, and the
// same share of each small-block store's (pressure.go); it returns the
// bytes handed back.
func (c *Cache) setRAMLimit(slots int) int64 {
	back := c.store.SetLimit(slots)
	total := c.store.Usage().Slots
	for _, s := range c.small {
		n := s.Usage().Slots
		back += s.SetLimit(int(int64(n) * int64(slots) / int64(max(total, 1))))
	}
	return back
}

// RAMUsage is the RAM's use in bytes, every store together.
type RAMUsage struct {
	// Size is the RAM; Limit what it may use now (memory pressure).
	Size, Limit int64
	// Cached, Filling, Pinned and Touched are blocks held for reuse,
	// being filled, in use, and memory ever used (see blockstore.Usage).
	Cached, Filling, Pinned, Touched int64
	HugePages                        bool
	// Counters of every store (blockstore.Stats).
	Hits, Misses, Evictions, DiskReads, DiskReadBytes, HandedBack int64
}

// RAM returns the RAM's use now.
func (c *Cache) RAM() RAMUsage {
	var r RAMUsage
	for i, s := range c.stores() {
		u, st := s.Usage(), s.Stats()
		slot := int64(u.SlotSize)
		r.Size += int64(u.Slots) * slot
		r.Limit += int64(u.Limit) * slot
		r.Cached += int64(u.Cached) * slot
		r.Filling += int64(u.Filling) * slot
		r.Pinned += int64(u.Pinned) * slot
		r.Touched += int64(u.Touched) * slot
		if i == 0 {
			r.HugePages = u.HugePages
		}
		r.Hits += st.Hits.Load()
		r.Misses += st.Misses.Load()
		r.Evictions += st.Evictions.Load()
		r.DiskReads += st.DiskReads.Load()
		r.DiskReadBytes += st.DiskReadBytes.Load()
		r.HandedBack += st.HandedBack.Load()
	}
	return r
}

// RAMResident returns how much of the RAM is in memory (every store; -1:
// unknown).
func (c *Cache) RAMResident() int64 {
	var n int64
	for _, s := range c.stores() {
		m := s.Resident()
		if m < 0 {
			return -1
		}
		n += m
	}
	return n
}
