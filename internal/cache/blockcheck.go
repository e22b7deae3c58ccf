package cache

import (
	"context"
	"errors"
	"fmt"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/blockstore"
)

// Data at rest: every block's CRC32C is recorded when the block is fetched
// (from the bytes as they arrived from the origin) and kept in the sidecar
// once the block is durable, as XCache's pfc.cschk cache does. Every read
// of a block from disk, on every read path (kXR_read, readv, pgread, HTTP,
// a peer's request), goes through the block store, which reads the whole
// block into RAM and compares it with the recorded CRC before any byte of
// it is handed out; a block that fails is dropped, counted, logged and
// fetched again, never served. Blocks in RAM were checked (or came from the
// origin) when they got there. Blocks stored by versions without per-block
// CRCs are checksummed when first read and trusted (recorded from then on).
// Config.NoBlockChecksums turns the comparison off. Local redirect, where
// clients read the data file themselves, is the one path without the check.

// errBadBlock: a block failed its check and was dropped.
var errBadBlock = errors.New("cache: block failed its CRC32C check")

// blockKey names block b of this copy in the block store.
func (e *entry) blockKey(b int) blockstore.Key {
	return blockstore.Key{File: e.id, Block: int64(b)}
}

// block returns present block b pinned: from the RAM block cache, or read
// back from the data file by the block store, which checks it against the
// CRC32C recorded in e.checks first. A block that fails its check is
// dropped and errBadBlock returned (also for a block dropped meanwhile); a
// disk that fails to read gives an error wrapping errDiskRead.
func (e *entry) block(ctx context.Context, b int, r blockstore.Reader) (*blockstore.Block, error) {
	off, n := e.blockRange(b)
	e.mu.Lock()
	present := e.st.has(b)
	e.mu.Unlock()
	if !present {
		// Dropped since the caller saw it (found bad by another reader):
		// what is on disk must not be trusted as a legacy block.
		return nil, errBadBlock
	}
	blk, got, err := e.c.storeFor(n).Load(ctx, e.blockKey(b), r, blockstore.Source{File: e.data, Off: off, N: int(n),
		Block: b, Checks: e.checks, Unchecked: e.c.cfg.NoBlockChecksums})
	var ce *blockstore.CorruptError
	switch {
	case err == nil:
		if r != blockstore.Internal && (got.FromDisk || got.Ahead) {
			e.readAheadFromDisk(b)
		}
		if got.FromDisk {
			e.c.stats.BlocksChecked.Add(1)
		}
		return blk, nil
	case errors.As(err, &ce):
		e.badBlock(b, ce.Epoch, ce.Got, ce.Want)
		return nil, errBadBlock
	case errors.Is(err, blockstore.ErrDropped):
		return nil, errBadBlock // dropped by another reader since we saw it
	case ctx.Err() != nil || errors.Is(err, blockstore.ErrClosed):
		return nil, fmt.Errorf("read %s block %d: %w", e.key, b, err)
	default:
		e.c.diskError(e.disk, err)
		return nil, fmt.Errorf("read cache file %s block %d: %w: %w", e.key, b, errDiskRead, err)
	}
}

// readAheadFromDisk starts reading into RAM the present blocks after b
// that are not there yet, up to the disk's read depth (blockstore.Internal:
// no access counted; they stay until their reader comes, as blocks read
// ahead from the origin): a reader going through a cached file finds them
// in RAM, read from disk several at a time, as the device's bandwidth
// needs. When the disk's pool of reads ahead is full, the rest waits for
// its reader.
func (e *entry) readAheadFromDisk(b int) {
	d := e.c.disks[e.disk]
	for nb := b + 1; nb <= b+d.depth && nb < e.nblocks; nb++ {
		e.mu.Lock()
		present := e.st.has(nb)
		e.mu.Unlock()
		if _, n := e.blockRange(nb); !present || e.c.storeFor(n).Has(e.blockKey(nb)) {
			continue
		}
		select {
		case d.reads <- struct{}{}:
		default:
			return
		}
		e.fetchWG.Add(1)
		go func() {
			defer e.fetchWG.Done()
			defer func() { <-d.reads }()
			if blk, err := e.block(e.ctx, nb, blockstore.Internal); err == nil {
				blk.Release()
			}
		}()
	}
}

// readPresent delivers [off, off+n), within present blocks, to out, block
// by block from the block store.
func (e *entry) readPresent(ctx context.Context, r blockstore.Reader, off, n int64, out func([]byte) error) (int64, error) {
	bs := e.c.cfg.BlockSize
	var done int64
	for pos, end := off, off+n; pos < end; {
		b := int(pos / bs)
		// The client must have taken what was sent before a block is
		// pinned for it (backend.Pacer).
		paced, err := backend.Pace(ctx)
		if err != nil {
			return done, err
		}
		blk, err := e.block(ctx, b, r)
		if err != nil {
			paced()
			return done, err
		}
		bstart := int64(b) * bs
		segEnd := min(end, bstart+int64(len(blk.Bytes())))
		err = out(blk.Bytes()[pos-bstart : segEnd-bstart])
		blk.Release()
		paced()
		if err != nil {
			return done, err
		}
		done += segEnd - pos
		pos = segEnd
	}
	return done, nil
}

// badBlock drops block b, found corrupt on disk.
// Readers that waited for the same read of it all come here; the first
// does the work, and none if the block was fetched again since epoch (the
// read that failed was of the bad copy, the good one stays).
func (e *entry) badBlock(b int, epoch, got, want uint32) {
	c := e.c
	_, n := e.blockRange(b)
	e.syncMu.Lock()
	e.mu.Lock()
	had := e.st.has(b) && e.checks.ForgetAt(b, epoch)
	if had {
		// Counted before the block is seen missing, so that whoever
		// fetches it again finds it counted.
		c.stats.BlocksCorrupt.Add(1)
		_, n := e.blockRange(b)
		c.storeFor(n).Drop(e.blockKey(b))
		e.st.drop(b)
	}
	e.mu.Unlock()
	if had {
		e.side.ForgetBlock(b)
		e.writeSidecarLocked()
	}
	e.syncMu.Unlock()
	if !had {
		return
	}
	c.warn("cached block failed its CRC32C check: dropped, fetched again", "key", e.key.String(), "block", b,
		"crc", fmt.Sprintf("%08x", got), "recorded", fmt.Sprintf("%08x", want))
	c.catalog.Grow(e.key, -n)
}
