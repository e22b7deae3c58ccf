package cache

import (
	"errors"
	"io/fs"
	"syscall"
	"time"

	"github.com/hepcache/hepcache/internal/blockstore"
)

// Data files are opened with O_DIRECT (blockstore.Open): blocks go from
// the block store's RAM to disk and back without the page cache. A data
// disk whose file system refuses O_DIRECT (ramfs, some FUSE and network
// file systems) is used with buffered I/O, said once in the log and shown
// in the metrics (hepcache_disk_direct_io); Config.NoDirectIO asks for
// buffered I/O everywhere.

// Direct I/O state of a disk.
const (
	directUnknown int32 = iota // no data file opened yet
	directOn
	directOff // refused by the file system, or turned off
)

// openData opens a data file on disk d.
func (c *Cache) openData(d *dataDisk, name string, flag int) (*blockstore.File, error) {
	st := &c.direct[d.id]
	f, err := withFDs(c, func() (*blockstore.File, error) {
		return blockstore.Open(c.cfg.FS, name, flag, fs.FileMode(0o644), !c.cfg.NoDirectIO && st.Load() != directOff)
	})
	if err != nil {
		return nil, err
	}
	switch {
	case f.Direct():
		st.Store(directOn)
	case c.cfg.NoDirectIO:
		st.Store(directOff)
	case st.Swap(directOff) != directOff:
		c.cfg.Logger.Warn("the file system of this data disk refuses direct I/O (O_DIRECT): its blocks go through the page cache",
			"dir", d.root)
	}
	return f, nil
}

// DirectIO reports, per data disk (in DataDirs order), whether its data
// files use direct I/O; a disk with no file opened yet reports the
// configured intent.
func (c *Cache) DirectIO() []bool {
	out := make([]bool, len(c.direct))
	for i := range c.direct {
		out[i] = !c.cfg.NoDirectIO && c.direct[i].Load() != directOff
	}
	return out
}

// fullFor is how long at most a data disk that refused a write for lack
// of space is taken as full: blocks fetched meanwhile are served without
// being written (bypass), until a purge frees space (which ends it at
// once) or this long has passed.
const fullFor = time.Second

// noteWriteError records a failed block write on disk d: out of space
// marks the disk full for a while and wakes the purger.
func (c *Cache) noteWriteError(d int, err error) {
	if noSpace(err) {
		c.full[d].Store(c.cfg.now().Add(fullFor).UnixNano())
		c.kickPurge()
	}
}

// freedSpace ends every disk's full period: a purge evicted files.
func (c *Cache) freedSpace() {
	for i := range c.full {
		c.full[i].Store(0)
	}
}

// noSpace reports whether err is a disk or quota out of space.
func noSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// diskFull reports whether disk d refused a write for lack of space
// within the last fullFor, with no purge since.
func (c *Cache) diskFull(d int) bool {
	return c.cfg.now().UnixNano() < c.full[d].Load()
}
