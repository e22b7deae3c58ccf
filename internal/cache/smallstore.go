package cache

import (
	"fmt"

	"github.com/hepcache/hepcache/internal/blockstore"
)

// Small blocks (a small file's only block, a large file's short last one)
// live in a store of their own, in slots of smallBlockSize off huge pages,
// instead of taking a block-sized slot each: a 4 KiB file then holds 16
// KiB of RAM, not 1 MiB (a 2 MiB huge page the kernel zeroes first), and
// the RAM holds sixty-four times as many of them. A block's length never
// changes, so each block has its one store.

const (
	// smallBlockSize is the largest block the small-block store holds.
	smallBlockSize = 16 << 10
	// smallShare is the part of the RAM the small-block store takes: a
	// thirty-second (680 MiB, 43,000 small blocks, of a 21.8 GiB RAM),
	// a small part taken from large blocks on a node that has none.
	smallShare = 32
)

// newStores makes the block store and, when blocks are much larger than
// small ones and the RAM allows, the small-block store.
func newStores(c *Config) (store, small *blockstore.Store, err error) {
	bigRAM := c.RAM
	smallRAM := c.RAM / smallShare
	if c.BlockSize < 4*smallBlockSize || smallRAM/smallBlockSize < blockstore.MinSlots ||
		(bigRAM-smallRAM)/c.BlockSize < blockstore.MinSlots {
		smallRAM = 0
	}
	if smallRAM > 0 {
		if small, err = blockstore.New(blockstore.Config{Size: smallRAM, SlotSize: smallBlockSize, NoHugePages: true}); err != nil {
			return nil, nil, fmt.Errorf("cache ram (small blocks): %w", err)
		}
		bigRAM -= smallRAM
	}
	if store, err = blockstore.New(blockstore.Config{Size: bigRAM, SlotSize: c.BlockSize, NoHugePages: c.NoHugePages}); err != nil {
		if small != nil {
			small.Close()
		}
		return nil, nil, fmt.Errorf("cache ram: %w", err)
	}
	return store, small, nil
}

// storeFor is the store that holds blocks of n bytes.
func (c *Cache) storeFor(n int64) *blockstore.Store {
	if c.small != nil && n <= smallBlockSize {
		return c.small
	}
	return c.store
}

// setRAMLimit lets slots slots of the block store hold memory, and the
// same share of the small-block store's (pressure.go); it returns the
// bytes handed back.
func (c *Cache) setRAMLimit(slots int) int64 {
	back := c.store.SetLimit(slots)
	if c.small != nil {
		total := c.store.Usage().Slots
		n := c.small.Usage().Slots
		back += c.small.SetLimit(int(int64(n) * int64(slots) / int64(max(total, 1))))
	}
	return back
}

// RAMUsage is the RAM's use in bytes, both stores together.
type RAMUsage struct {
	// Size is the RAM; Limit what it may use now (memory pressure).
	Size, Limit int64
	// Cached, Filling, Pinned and Touched are blocks held for reuse,
	// being filled, in use, and memory ever used (see blockstore.Usage).
	Cached, Filling, Pinned, Touched int64
	HugePages                        bool
	// Counters of both stores (blockstore.Stats).
	Hits, Misses, Evictions, DiskReads, DiskReadBytes, HandedBack int64
}

// RAM returns the RAM's use now.
func (c *Cache) RAM() RAMUsage {
	var r RAMUsage
	for i, s := range []*blockstore.Store{c.store, c.small} {
		if s == nil {
			continue
		}
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

// RAMResident returns how much of the RAM is in memory (both stores).
func (c *Cache) RAMResident() int64 {
	n := c.store.Resident()
	if c.small != nil && n >= 0 {
		if m := c.small.Resident(); m >= 0 {
			n += m
		}
	}
	return n
}
