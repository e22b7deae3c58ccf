package cache

import (
	"context"
	"errors"
	"fmt"

	"github.com/hepcache/hepcache/disk"
	"github.com/hepcache/hepcache/internal/checksum"
	"github.com/hepcache/hepcache/internal/sidecar"
	"github.com/hepcache/hepcache/origin"
)

// verify runs once a file is complete: it combines the checksums of the
// blocks fetched in this session (reading back from disk only blocks that
// came from an earlier session), compares with the origin's checksum when
// the origin offers one, and records the result in the sidecar. On a
// mismatch the cached copy is dropped: every block is marked missing, so
// later reads fetch again and clients never get bytes that disagree with the
// origin's checksum.
func (e *entry) verify() {
	c := e.c
	e.mu.Lock()
	sums := checksum.Empty
	known := true
	for b := 0; b < e.nblocks; b++ {
		if _, n := e.blockRange(b); e.blockSums[b].Len != n {
			known = false
			break
		}
		sums = checksum.Append(sums, e.blockSums[b])
	}
	e.mu.Unlock()
	if !known {
		var err error
		if sums, err = c.sumFile(e.data, e.size); err != nil {
			c.cfg.Logger.Warn("checksum of complete file failed", "key", e.key.String(), "err", err)
			return
		}
	}
	state := sidecar.ChecksumComputed
	if algo := c.cfg.VerifyChecksum; algo != "none" {
		// Not e.ctx: the last client may close (cancelling fetches) while
		// we ask; the question is still worth its answer.
		ctx, cancel := context.WithTimeout(c.ctx, c.cfg.OriginTimeout)
		want, err := e.o.Checksum(ctx, e.key.Path, algo)
		cancel()
		switch {
		case err == nil:
			got := fmt.Sprintf("%08x", sums.Adler32)
			if algo == "crc32c" {
				got = fmt.Sprintf("%08x", sums.CRC32C)
			}
			if normalizeHex(want) != got {
				c.stats.ChecksumFailures.Add(1)
				c.cfg.Logger.Error("checksum mismatch, dropping cached copy", "key", e.key.String(),
					"algo", algo, "cached", got, "origin", want)
				e.drop()
				return
			}
			state = sidecar.ChecksumVerified
		case errors.Is(err, origin.ErrUnsupported), errors.Is(err, context.Canceled):
		default:
			c.cfg.Logger.Info("origin checksum unavailable, keeping computed one", "key", e.key.String(), "err", err)
		}
	}
	e.syncMu.Lock()
	defer e.syncMu.Unlock()
	e.side.ChecksumState = state
	e.side.Adler32, e.side.CRC32C = sums.Adler32, sums.CRC32C
	if err := disk.WriteFileAtomic(c.cfg.FS, c.metaPath(e.key), e.side.Marshal(), false); err != nil {
		c.stats.SyncErrors.Add(1)
		c.cfg.Logger.Warn("sidecar write failed", "key", e.key.String(), "err", err)
	}
}

// drop forgets every block of the entry, in memory and in the sidecar.
func (e *entry) drop() {
	e.syncMu.Lock()
	defer e.syncMu.Unlock()
	e.mu.Lock()
	for b := 0; b < e.nblocks; b++ {
		e.present.Clear(b)
		e.side.Durable.Clear(b)
		e.blockSums[b] = checksum.Sums{}
	}
	e.unsynced = nil
	e.mu.Unlock()
	e.side.ChecksumState = sidecar.ChecksumNone
	if err := disk.WriteFileAtomic(e.c.cfg.FS, e.c.metaPath(e.key), e.side.Marshal(), false); err != nil {
		e.c.cfg.Logger.Warn("sidecar write failed", "key", e.key.String(), "err", err)
	}
	e.c.index.setBytes(e.key, 0)
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
