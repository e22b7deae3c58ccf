package cache

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/hepcache/hepcache/internal/catalog"
)

// The catalogue loads in the background while the cache serves (package
// catalog: from the snapshot the last clean shutdown wrote, else from the
// sidecars). Meanwhile an open finds its file as it always does, by its
// sidecar's path; with several data disks, the disk holding its data file
// is asked (locate). Purge waits for the catalogue to be complete: it
// could not tell the least recently used files before. A data disk
// coming back waits too (the catalogue tells its files from the copies
// made meanwhile). The walk that follows the load removes the data files a
// crash left without a sidecar, through removeData, which lets no open
// of the file start meanwhile.

// loadPace is a test seam: if set, the load calls it between batches
// (catalog.LoadConfig.Pace).
type loadPace = func(context.Context) error

// startLoad starts loading the catalogue, and the goroutine that kicks a
// purge once it is complete and reports the files of other users found.
func (c *Cache) startLoad() {
	ctx, cancel := context.WithCancel(context.Background())
	c.loadCancel = cancel
	disks := c.catalogDisks()
	var others foreign // files of other users (ownership.go)
	c.catalog.Load(ctx, catalog.LoadConfig{
		FS: c.cfg.FS, Dir: c.cfg.Dir, Disks: disks,
		Up:         func(d int) bool { return c.disks[d].up() },
		RemoveData: c.removeData,
		Note:       func(p string) { others.note(c.cfg.FS, p) },
		Pace:       c.cfg.loadPace,
		Logger:     c.cfg.Logger,
	})
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		select {
		case <-c.catalog.Ready():
			c.kickPurge() // the cache may be over its watermarks already
			c.takeBackLater()
		case <-c.shutdownCh:
			return
		}
		done := c.catalog.Done()
		t := time.NewTicker(snapshotEvery)
		defer t.Stop()
		last := c.catalog.Changes()
		for {
			select {
			case <-done:
				others.report(c)
				done = nil
			case <-t.C:
				if n := c.catalog.Changes(); n != last {
					last = n
					c.writePeriodicSnapshot()
				}
			case <-c.shutdownCh:
				return
			}
		}
	}()
}

// snapshotEvery is how often the cache writes its index while it runs
// (when it changed), for a start after a crash: that start loads it, then
// reads again only the sidecars changed since, instead of all of them. A
// write costs about 150 ns of CPU a file (1.5 s for 10^7 files, the index
// locked 4096 files at a time) and writes 35 bytes a file plus its path.
const snapshotEvery = 10 * time.Minute

// writePeriodicSnapshot writes the index as it is, an approximation for a
// start after a crash (Close writes the exact one).
func (c *Cache) writePeriodicSnapshot() {
	start := time.Now()
	if err := c.catalog.WriteSnapshot(c.cfg.FS, c.cfg.Dir, c.catalogDisks(), false); err != nil {
		c.warn("cache index snapshot not written", "err", err)
		return
	}
	c.cfg.Logger.Debug("cache index snapshot written", "took", time.Since(start).Round(time.Millisecond))
}

// takeBackLater takes back the data disks found back while the index
// loaded.
func (c *Cache) takeBackLater() {
	c.diskMu.Lock()
	defer c.diskMu.Unlock()
	for _, d := range c.disks {
		if d.backLater.Load() && !d.up() && c.diskThere(d) == "" {
			c.takeBack(d)
		}
	}
}

// catalogDisks names the data disks for the catalogue.
func (c *Cache) catalogDisks() []catalog.Disk {
	out := make([]catalog.Disk, len(c.disks))
	for i, d := range c.disks {
		out[i] = catalog.Disk{Root: d.root, Marker: d.mark}
	}
	return out
}

// indexReady reports whether the catalogue is complete.
func (c *Cache) indexReady() bool {
	select {
	case <-c.catalog.Ready():
		return true
	default:
		return false
	}
}

// stopLoad stops the catalogue's walk and waits for the load to end. A
// load from a snapshot ends first (a sequential read: seconds for
// millions of files), so that Close can write the snapshot again.
func (c *Cache) stopLoad() {
	c.loadCancel()
	<-c.catalog.Done()
}

// writeSnapshot writes the catalogue for the next start, if it is
// complete. Called by Close once every file is closed and synced.
func (c *Cache) writeSnapshot() {
	if !c.indexReady() {
		c.cfg.Logger.Info("cache index not written: it was not loaded whole; the next start reads the sidecars")
		return
	}
	start := time.Now()
	if err := c.catalog.WriteSnapshot(c.cfg.FS, c.cfg.Dir, c.catalogDisks(), true); err != nil {
		c.cfg.Logger.Warn("cache index not written; the next start reads the sidecars", "err", err)
		return
	}
	files, _ := c.catalog.Totals()
	c.cfg.Logger.Info("cache index written for the next start", "files", files, "took", time.Since(start).Round(time.Millisecond))
}

// locate returns the data disk holding k's data file: the catalogue's
// record, or while the catalogue is not complete (or its walk still
// runs), the disk in service whose tree has the file (the newest copy if
// several do); -1 if no disk holds it. A record from a snapshot written
// before a crash, which the walk has not checked yet, is checked here.
func (c *Cache) locate(k Key) int {
	if len(c.disks) == 1 {
		return 0
	}
	info, known := c.catalog.Lookup(k)
	p := c.catalog.Progress()
	switch {
	case known && (info.Verified || !p.Approximate || !p.Walking):
		return info.Disk
	case known && c.disks[info.Disk].up():
		if st, err := c.cfg.FS.Stat(c.disks[info.Disk].path(k)); err == nil && st.Mode().IsRegular() {
			return info.Disk
		}
	case !p.Loading && !p.Walking:
		return -1
	}
	best := -1
	var newest time.Time
	for _, d := range c.disks {
		if !d.up() {
			continue
		}
		if st, err := c.cfg.FS.Stat(d.path(k)); err == nil && st.Mode().IsRegular() && (best < 0 || st.ModTime().After(newest)) {
			best, newest = d.id, st.ModTime()
		}
	}
	return best
}

// removeData removes data file p of disk d for the catalogue's walk (a
// file without a sidecar when orphan, else a stale copy of a file another
// disk holds), unless an entry of the cache may use it. Opens of the
// file's key wait meanwhile (acquire), so that none creates it anew in
// between; an orphan whose sidecar appeared meanwhile is kept.
func (c *Cache) removeData(d int, p string, orphan bool) {
	dk := c.disks[d]
	rel, ok := relData(dk.root, p)
	if !ok {
		return
	}
	cp := "/" + filepath.ToSlash(rel)
	if i := strings.IndexByte(cp[1:], '/'); i >= 0 { // past the origin's two components
		if j := strings.IndexByte(cp[i+2:], '/'); j >= 0 {
			cp = cp[i+2+j:]
		}
	}
	uses := func(k Key) bool { return k.Path == cp && dk.path(k) == p }
	c.mu.Lock()
	for k := range c.files {
		if uses(k) {
			c.mu.Unlock()
			return
		}
	}
	for k := range c.closing {
		if uses(k) {
			c.mu.Unlock()
			return
		}
	}
	for c.sweepDone != nil { // one at a time
		ch := c.sweepDone
		c.mu.Unlock()
		<-ch
		c.mu.Lock()
	}
	done := make(chan struct{})
	c.sweeping, c.sweepDone = p, done
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.sweeping, c.sweepDone = "", nil
		c.mu.Unlock()
		close(done)
	}()
	if orphan {
		if _, err := c.cfg.FS.Stat(filepath.Join(c.cfg.Dir, "meta", rel) + ".hcinfo"); !errors.Is(err, fs.ErrNotExist) {
			return // its first sidecar was written meanwhile (or cannot be told)
		}
	}
	if err := c.cfg.FS.Remove(p); err == nil {
		c.removeEmptyParents(filepath.Dir(p), filepath.Join(dk.root, "data"))
	}
}

// sweepsLocked reports whether the data file removeData is removing is
// k's on some disk. MUST be called with c.mu held.
func (c *Cache) sweepsLocked(k Key) bool {
	for _, d := range c.disks {
		if d.path(k) == c.sweeping {
			return true
		}
	}
	return false
}

// IndexState is the state of the catalogue of cached files.
type IndexState struct {
	// Loading: the catalogue is not complete yet (the cache serves;
	// purge waits). Loaded of Total files are loaded; while the load
	// walks the sidecars (no snapshot) Total counts those found so far.
	Loading       bool
	Loaded, Total int64
	// Walking: the walk of the cache's trees runs (it follows the load).
	Walking bool
	// FromSnapshot: loaded from a snapshot: the exact one of the last
	// clean stop, or (Approximate: after a crash) the last one written
	// while the cache ran, which the walk corrects.
	FromSnapshot, Approximate bool
	// Files are catalogued; Bytes is the catalogue's memory.
	Files int
	Bytes int64
}

// IndexState returns the state of the catalogue.
func (c *Cache) IndexState() IndexState {
	p := c.catalog.Progress()
	files, _ := c.catalog.Totals()
	return IndexState{Loading: p.Loading, Loaded: p.Loaded, Total: p.Total, Walking: p.Walking,
		FromSnapshot: p.FromSnapshot, Approximate: p.Approximate, Files: files, Bytes: c.catalog.MemoryBytes()}
}

// IndexLoaded is closed once the catalogue is complete (purge may run).
// It is never closed if Close stops a load from the sidecars first.
func (c *Cache) IndexLoaded() <-chan struct{} { return c.catalog.Ready() }
