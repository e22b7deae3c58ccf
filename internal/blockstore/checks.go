package blockstore

import (
	"sync"

	"github.com/hepcache/hepcache/internal/bitmap"
)

// Checks are the CRC32C recorded for the blocks of one cached copy of a
// file: what a block read back from disk must match before a byte of it is
// handed out (Load). The cache records a block's CRC when the block is
// written (from the bytes as they arrived) and forgets it when the block
// is dropped; Load checks against it, and for a block stored before
// per-block CRCs (none recorded) takes the CRC of what it read and keeps it
// (learnt: the cache writes it to the sidecar). Safe for concurrent use.
//
// Each block has an epoch, bumped whenever its CRC is recorded or
// forgotten: a read that fails its check names the epoch it checked
// against, so that a stale read drops nothing newer (ForgetAt), and a CRC
// learnt by a read that raced with a new write is not kept.
//
// A block whose CRC was forgotten (it failed a check) is dropped until it
// is recorded again: a read that raced with the drop must not take the bad
// bytes still on disk for a block stored before per-block CRCs (Load
// returns ErrDropped).
type Checks struct {
	mu      sync.Mutex
	crc     []uint32
	known   *bitmap.Bitmap
	dropped *bitmap.Bitmap
	epoch   []uint32
	// learnt marks CRCs learnt by reads since TakeLearnt.
	learnt bool
}

// NewChecks returns the checks of a copy of n blocks with the CRCs
// recorded so far (crc and known as a sidecar keeps them; nil, or of
// another length: none known).
func NewChecks(n int, crc []uint32, known *bitmap.Bitmap) *Checks {
	c := &Checks{crc: make([]uint32, n), known: bitmap.New(n), dropped: bitmap.New(n), epoch: make([]uint32, n)}
	if known != nil && known.Len() == n && len(crc) == n {
		copy(c.crc, crc)
		c.known = known.Clone()
	}
	return c
}

// Record keeps crc as block b's CRC32C (the block was just written).
func (c *Checks) Record(b int, crc uint32) {
	c.mu.Lock()
	c.crc[b] = crc
	c.known.Set(b)
	c.dropped.Clear(b)
	c.epoch[b]++
	c.mu.Unlock()
}

// ForgetAt forgets block b's CRC if it is still the one of epoch (the
// block failed a check against it) and reports whether it did.
func (c *Checks) ForgetAt(b int, epoch uint32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch[b] != epoch {
		return false
	}
	c.crc[b] = 0
	c.known.Clear(b)
	c.dropped.Set(b)
	c.epoch[b]++
	return true
}

// Known returns block b's CRC, if one is recorded.
func (c *Checks) Known(b int) (uint32, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.crc[b], c.known.Test(b)
}

// TakeLearnt reports whether reads learnt CRCs since the last call.
func (c *Checks) TakeLearnt() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.learnt
	c.learnt = false
	return l
}

// get returns what a read of block b checks against; dropped: the block
// failed a check and was not written again since.
func (c *Checks) get(b int) (crc uint32, known, dropped bool, epoch uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.crc[b], c.known.Test(b), c.dropped.Test(b), c.epoch[b]
}

// learn keeps crc, computed from block b as read, when none was recorded
// and nothing changed since the read began (epoch).
func (c *Checks) learn(b int, crc uint32, epoch uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch[b] == epoch && !c.known.Test(b) {
		c.crc[b] = crc
		c.known.Set(b)
		c.learnt = true
	}
}
