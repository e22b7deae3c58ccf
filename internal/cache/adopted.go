package cache

import (
	"context"
	"errors"
	"fmt"

	"github.com/hepcache/hepcache/disk"
	"github.com/hepcache/hepcache/internal/sidecar"
	"github.com/hepcache/hepcache/origin"
)

// A copy adopted from XCache (sidecar.FlagUnconfirmed) comes with no
// origin version: XCache keeps neither the origin's modification time nor
// its ETag, and its .cinfo is written by whoever owns the XCache tree. So
// the first open while the origin answers compares the copy with the
// origin's file: the same size, and a modification time no later than when
// XCache cached it. A copy that matches takes the origin's version as its
// own (later opens check it as any copy's); one that does not (another
// size, rewritten since, no longer at the origin) is dropped before a byte
// of it is served. While the origin cannot be asked the copy is served as
// it is and stays unconfirmed.

// confirmAdopted returns side confirmed, or nil after removing a copy that
// does not match the origin's file (data and sidecar gone, data closed).
func (e *entry) confirmAdopted(ctx context.Context, side *sidecar.Info, data interface{ Close() error }) *sidecar.Info {
	c := e.c
	octx, cancel := context.WithTimeout(ctx, c.cfg.OriginTimeout)
	fi, err := e.o.Stat(octx, e.key.Path)
	cancel()
	why := ""
	switch {
	case errors.Is(err, origin.ErrNotFound):
		why = "no such file at the origin"
	case err != nil:
		c.warn("cannot confirm an adopted copy with the origin; serving it unconfirmed", "key", e.key.String(), "err", err)
		return side
	case fi.IsDir():
		why = "a directory at the origin"
	case fi.Size != side.FileSize:
		why = fmt.Sprintf("size %d at the origin, adopted copy %d", fi.Size, side.FileSize)
	case !fi.ModTime.IsZero() && !side.Created.IsZero() && fi.ModTime.After(side.Created):
		why = fmt.Sprintf("modified at the origin (%s) after XCache cached it (%s)",
			fi.ModTime.UTC().Format("2006-01-02T15:04:05Z"), side.Created.UTC().Format("2006-01-02T15:04:05Z"))
	}
	if why != "" {
		c.cfg.Logger.Warn("adopted copy does not match the origin's file: dropped", "key", e.key.String(), "why", why)
		data.Close()
		c.cfg.FS.Remove(c.metaPath(e.key))
		c.cfg.FS.Remove(c.disks[e.disk].path(e.key))
		c.catalog.Remove(e.key)
		c.stats.Revalidations.Add(1)
		return nil
	}
	side.ModTime, side.ETag = fi.ModTime, fi.ETag
	side.Flags &^= sidecar.FlagUnconfirmed
	if err := disk.WriteFileAtomic(c.cfg.FS, c.metaPath(e.key), side.Marshal(), true); err != nil {
		c.warn("cannot record an adopted copy as confirmed", "key", e.key.String(), "err", err)
	}
	c.cfg.Logger.Info("adopted copy confirmed with the origin", "key", e.key.String())
	return side
}

// infoOf is what a stat answers from a sidecar. A copy whose origin
// modification time is unknown (adopted, origin not asked yet) reports
// when it entered the cache, not 1970.
func infoOf(k Key, in *sidecar.Info) origin.FileInfo {
	mt := in.ModTime
	if mt.IsZero() {
		mt = in.Created
	}
	return origin.FileInfo{Name: k.Path, Size: in.FileSize, ModTime: mt, Mode: 0o444, ETag: in.ETag}
}
