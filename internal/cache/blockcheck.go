package cache

import (
	"context"
	"errors"
	"fmt"
	"github.com/hepcache/hepcache/internal/readat"
	"hash/crc32"
	"io"

	"github.com/hepcache/hepcache/internal/bitmap"
	"github.com/hepcache/hepcache/internal/checksum"
	"github.com/hepcache/hepcache/internal/sidecar"
)

// Data at rest: every block's CRC32C is recorded in the sidecar when the
// block becomes durable (as XCache's pfc.cschk cache), computed from the
// bytes as they arrived from the origin. A block found on disk when a file
// is opened is checked against it the first time a client reads it in
// this process (the check is remembered in the index, so later opens pay
// nothing); a block that fails is dropped and fetched again, never served.
// Blocks fetched in this process need no check. The sendfile path hands
// out only checked blocks. `hepcache verify` checks whole files or the
// whole cache offline. Config.NoBlockChecksums turns the checks off.

// errBadBlock: a block failed its check and was dropped.
var errBadBlock = errors.New("cache: block failed its CRC32C check")

// blockCRCs are the recorded CRCs of the blocks on disk at open and which of
// them still need a check. Guarded by entry.mu.
type blockCRCs struct {
	crc  []uint32
	todo *bitmap.Bitmap // nil: nothing to check
}

// unchecked reports whether block b still needs its check.
func (a *blockCRCs) unchecked(b int) bool { return a.todo != nil && a.todo.Test(b) }

// fresh records that block b was just written: nothing to check.
func (a *blockCRCs) fresh(b int) {
	if a.todo != nil {
		a.todo.Clear(b)
	}
}

// atRestCRCs returns what to check of a file opened from side: its durable
// blocks with a recorded CRC, less those checked earlier in this process.
func (c *Cache) atRestCRCs(k Key, side *sidecar.Info) blockCRCs {
	if c.cfg.NoBlockChecksums || side.CRCKnown.Count() == 0 {
		return blockCRCs{}
	}
	todo := side.CRCKnown.Clone()
	c.index.forChecked(k, func(done *bitmap.Bitmap) {
		if done.Len() != todo.Len() {
			return
		}
		for b := 0; b < todo.Len(); b++ {
			if done.Test(b) {
				todo.Clear(b)
			}
		}
	})
	return blockCRCs{crc: append([]uint32(nil), side.BlockCRC...), todo: todo}
}

// maxCheckedBlock is the largest block read whole into memory to be
// checked and delivered in one read; larger blocks are read twice.
const maxCheckedBlock = 16 << 20

// readChecked delivers [off, off+n) of present blocks to fn like readData,
// checking the blocks that need it on the way: such a block is read whole
// into memory, checked, and the part asked for delivered from there (one
// read of the disk, not two). A block that fails is dropped and
// errBadBlock returned with the bytes delivered before it.
func (e *entry) readChecked(off, n int64, fn func([]byte) error) (int64, error) {
	bs := e.c.cfg.BlockSize
	end := off + n
	var done int64
	for pos := off; pos < end; {
		b := int(pos / bs)
		e.mu.Lock()
		need := e.atRest.unchecked(b)
		var want uint32
		if need {
			want = e.atRest.crc[b]
		}
		segEnd := min(end, int64(b+1)*bs)
		for !need && segEnd < end && !e.atRest.unchecked(int(segEnd/bs)) {
			segEnd = min(end, segEnd+bs)
		}
		e.mu.Unlock()
		if !need {
			k, err := e.readData(pos, segEnd-pos, fn)
			done += k
			if err != nil {
				return done, err
			}
			pos = segEnd
			continue
		}
		k, err := e.checkBlock(b, want, pos, segEnd, fn)
		done += k
		if err != nil {
			return done, err
		}
		pos = segEnd
	}
	return done, nil
}

// checkBlock reads block b, compares its CRC32C with want and, if equal,
// delivers [pos, end) of it to fn.
func (e *entry) checkBlock(b int, want uint32, pos, end int64, fn func([]byte) error) (int64, error) {
	bstart, blen := e.blockRange(b)
	if blen > maxCheckedBlock {
		got, err := e.blockCRC(b)
		if err != nil {
			return 0, err
		}
		if got != want {
			e.badBlock(b, got, want)
			return 0, errBadBlock
		}
		e.checkedOK(b)
		return e.readData(pos, end-pos, fn)
	}
	bp := e.c.blockBuf(blen)
	defer e.c.blockBufs.Put(bp)
	buf := (*bp)[:blen]
	if k, err := e.data.ReadAt(buf, bstart); int64(k) < blen {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		e.c.diskError(e.disk, err)
		return 0, fmt.Errorf("check block %d of %s: %w: %w", b, e.key, errDiskRead, err)
	}
	if got := crc32.Checksum(buf, checksum.Castagnoli); got != want {
		e.badBlock(b, got, want)
		return 0, errBadBlock
	}
	e.checkedOK(b)
	var done int64
	for p := pos; p < end; {
		l := min(int64(readBufSize), end-p)
		if err := fn(buf[p-bstart : p-bstart+l]); err != nil {
			return done, err
		}
		done += l
		p += l
	}
	return done, nil
}

// checkedOK records that block b passed its check.
func (e *entry) checkedOK(b int) {
	e.mu.Lock()
	e.atRest.fresh(b)
	e.mu.Unlock()
	e.c.index.checked(e.key, b, e.nblocks)
	e.c.stats.BlocksChecked.Add(1)
}

// blockBuf returns a pooled buffer of at least n bytes.
func (c *Cache) blockBuf(n int64) *[]byte {
	if bp, ok := c.blockBufs.Get().(*[]byte); ok && int64(cap(*bp)) >= n {
		return bp
	}
	b := make([]byte, n)
	return &b
}

// badBlock drops block b, found corrupt on disk.
func (e *entry) badBlock(b int, got, want uint32) {
	c := e.c
	c.stats.BlocksCorrupt.Add(1)
	c.warn("cached block failed its CRC32C check: dropped, fetched again", "key", e.key.String(), "block", b,
		"crc", fmt.Sprintf("%08x", got), "recorded", fmt.Sprintf("%08x", want))
	_, n := e.blockRange(b)
	e.syncMu.Lock()
	e.mu.Lock()
	e.st.drop(b)
	e.atRest.fresh(b)
	e.mu.Unlock()
	e.side.ForgetBlock(b)
	e.writeSidecarLocked()
	e.syncMu.Unlock()
	c.index.grow(e.key, -n)
}

// blockCRC reads block b back from the data file in chunks and returns its
// CRC32C (for blocks too large to hold in memory).
func (e *entry) blockCRC(b int) (uint32, error) {
	off, n := e.blockRange(b)
	bp := e.c.bufs.Get().(*[]byte)
	defer e.c.bufs.Put(bp)
	var crc uint32
	done, err := readat.Stream(context.Background(), e.data, *bp, off, n, func(p []byte) error {
		crc = crc32.Update(crc, checksum.Castagnoli, p)
		return nil
	})
	if err == nil && done < n {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		e.c.diskError(e.disk, err)
		return 0, fmt.Errorf("check block %d of %s: %w: %w", b, e.key, errDiskRead, err)
	}
	return crc, nil
}
