package cache

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/hepcache/hepcache/disk"
	"github.com/hepcache/hepcache/internal/blockstore"
	"github.com/hepcache/hepcache/internal/checksum"
	"github.com/hepcache/hepcache/internal/sidecar"
	"github.com/hepcache/hepcache/origin"
)

// scheduleVerify starts the verification of a file that just became
// complete. The checksums of blocks fetched in an earlier session are
// computed first, from the blocks read back through the block store (so
// checked against their CRC32C: a block gone bad drops out and the file is
// verified when it completes again); this runs in the fetch that completed
// the file, which the entry's finish waits for. The rest runs apart from
// the entry: clients closing and reopening the file never wait for the
// origin's checksum (an origin may queue checksum jobs for many seconds).
func (e *entry) scheduleVerify() {
	sums := checksum.Empty
	for b := 0; b < e.nblocks; b++ {
		e.mu.Lock()
		bs := e.blockSums[b]
		e.mu.Unlock()
		if _, n := e.blockRange(b); bs.Len != n {
			blk, err := e.block(e.c.ctx, b, blockstore.Internal)
			if err != nil {
				e.c.cfg.Logger.Info("checksum of complete file postponed", "key", e.key.String(), "block", b, "err", err)
				e.ident.checkEnded()
				return
			}
			bs = checksum.Of(blk.Bytes())
			blk.Release()
		}
		sums = checksum.Append(sums, bs)
	}
	e.syncMu.Lock()
	created := e.side.Created
	e.syncMu.Unlock()
	c, o, k, cf := e.c, e.o, e.key, &e.ident
	ctx := e.withClientToken(c.ctx) // as the file was read
	ask := !e.wholeInOneRead()
	c.goBackground(func() {
		// The reads of a mutable namespace that completed the copy wait
		// for this (deliver.go).
		defer cf.checkEnded()
		c.verify(ctx, o, k, created, sums, &cf.delivered, ask)
	})
}

// verify compares the checksums of a complete file with the origin's
// checksum when the origin offers one (and askOrigin: not for a file read
// whole in one request, entry.wholeInOneRead), and records the result in
// the sidecar. On a mismatch the cached copy is dropped, so later reads fetch
// again and clients never get bytes that disagree with the origin's
// checksum. created identifies the copy: a copy replaced meanwhile is left
// alone. dl records what the copy was handed out as: on a mismatch every
// client it reached is logged (deliver.go).
func (c *Cache) verify(parent context.Context, o origin.Origin, k Key, created time.Time, sums checksum.Sums, dl *deliveries, askOrigin bool) {
	state := sidecar.ChecksumComputed
	if algo := c.rules.Load().verifyChecksum; algo != "none" && askOrigin {
		ctx, cancel := context.WithTimeout(parent, c.cfg.OriginTimeout)
		want, err := o.Checksum(ctx, k.Path, algo)
		cancel()
		switch {
		case err == nil:
			got := fmt.Sprintf("%08x", sums.Adler32)
			if algo == "crc32c" {
				got = fmt.Sprintf("%08x", sums.CRC32C)
			}
			if normalizeHex(want) != got {
				c.cfg.Logger.Error("checksum mismatch, dropping cached copy", "key", k.String(),
					"algo", algo, "cached", got, "origin", want)
				c.updateCopy(k, created, func(e *entry) {
					e.spoil(fmt.Errorf("%s: cached copy differs from the origin's %s checksum: %w", k, algo, syscall.EIO))
				}, func(in *sidecar.Info) bool { return false })
				dl.fail(c, k, fmt.Sprintf("%s %s of the copy, %s at the origin", algo, got, normalizeHex(want)))
				c.stats.ChecksumFailures.Add(1) // after the drop: a test may wait on it
				return
			}
			state = sidecar.ChecksumVerified
		case errors.Is(err, origin.ErrUnsupported):
			// Silently unverified copies were the surprise: say it once.
			// Said of this file: an origin may give the checksum for
			// most files (a Pelican federation's origins do) and not for
			// a few (the director's own test objects).
			c.warnOnce("no checksum "+algo+" "+o.String(), "origin gave no "+algo+" checksum for a completed file: it is kept unverified, as any other the origin gives none for; those it gives one for are verified (space.verify_checksum)",
				"origin", o.String(), "algo", algo, "file", k.Path, "err", err)
		case errors.Is(err, context.Canceled):
		default:
			c.cfg.Logger.Info("origin checksum unavailable, keeping computed one", "key", k.String(), "err", err)
		}
	}
	set := func(in *sidecar.Info) {
		in.ChecksumState = state
		in.Adler32, in.CRC32C = sums.Adler32, sums.CRC32C
	}
	c.updateCopy(k, created, func(e *entry) {
		e.syncMu.Lock()
		set(e.side)
		e.publishSums(e.side)
		e.sideChanged = true // written by the next group sync
		e.syncMu.Unlock()
		c.markDirty(e)
	}, func(in *sidecar.Info) bool {
		if !in.Complete() {
			return true // not ours to judge any more
		}
		set(in)
		return true
	})
}

// updateCopy applies a change to the cached copy of k made at created:
// through its entry when the file is open (open), else to the sidecar on
// disk (onDisk; returning false drops the copy), with opens of k held back
// for the few local operations that takes.
func (c *Cache) updateCopy(k Key, created time.Time, open func(*entry), onDisk func(*sidecar.Info) bool) {
	for {
		c.mu.Lock()
		if e := c.files[k]; e != nil {
			c.mu.Unlock()
			if !e.initialized() {
				// An open is loading the sidecar: let it finish first.
				select {
				case <-c.shutdownCh:
					return
				case <-time.After(10 * time.Millisecond):
				}
				continue
			}
			e.syncMu.Lock()
			same := e.side.Created.Equal(created)
			e.syncMu.Unlock()
			if same {
				open(e)
			}
			return
		}
		if ch, ok := c.closing[k]; ok {
			c.mu.Unlock()
			select {
			case <-ch:
			case <-c.shutdownCh:
				return
			}
			continue
		}
		done := make(chan struct{})
		c.closing[k] = done
		c.mu.Unlock()
		in := c.readSidecar(k)
		if in != nil && in.Created.Equal(created) {
			if onDisk(in) {
				if err := disk.WriteFileInPlace(c.cfg.FS, c.metaPath(k), in.Marshal(), -1); err != nil {
					c.stats.SyncErrors.Add(1)
					c.cfg.Logger.Warn("sidecar write failed", "key", k.String(), "err", err)
				}
			} else {
				c.removeCopyLocked(k, nil)
			}
		}
		c.mu.Lock()
		delete(c.closing, k)
		c.mu.Unlock()
		close(done)
		return
	}
}

func normalizeHex(s string) string {
	out := make([]byte, 0, 8)
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch >= 'A' && ch <= 'F' {
			ch += 'a' - 'A'
		}
		out = append(out, ch)
	}
	for len(out) < 8 {
		out = append([]byte{'0'}, out...)
	}
	return string(out)
}
