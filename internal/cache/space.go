package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hepcache/hepcache/internal/catalog"
	"github.com/hepcache/hepcache/internal/sidecar"
)

// ErrBusy is returned by Evict for a file that clients have open.
var ErrBusy = errors.New("cache: file is open")

// Usage describes how full the cache is.
type Usage struct {
	// Pinned is the size of the pinned files, which purge never evicts.
	Pinned int64
	// Total is the capacity in bytes: the configured capacity, or the size
	// of the file system holding the cache.
	Total int64
	// Used is the cached bytes (configured capacity) or the file system's
	// used bytes.
	Used int64
	// High and Low are the watermarks in bytes.
	High, Low int64
	// Files is the number of cached files; Bytes their size.
	Files int
	Bytes int64
}

// statfs returns the size and used bytes of the file system holding dir.
func statfs(dir string) (total, used int64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	total = int64(st.Blocks) * st.Bsize
	used = int64(st.Blocks-st.Bfree) * st.Bsize
	return total, used, nil
}

func watermark(v float64, total int64) int64 { return catalog.Watermark(v, total) }

// Usage returns the current occupancy.
func (c *Cache) Usage() (Usage, error) {
	var u Usage
	r := c.rules.Load()
	u.Files, u.Bytes = c.catalog.Totals()
	u.Pinned, _ = c.catalog.Pinned()
	if r.capacity > 0 {
		u.Total, u.Used = r.capacity, u.Bytes
	} else {
		// The file systems of the data disks in service.
		var errs []error
		for _, d := range c.disks {
			if !d.up() {
				continue
			}
			t, used, err := c.cfg.statfs(d.root)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			u.Total += t
			u.Used += used
		}
		if len(errs) > 0 && u.Total == 0 {
			return u, errors.Join(errs...)
		}
	}
	u.High = watermark(r.high, u.Total)
	u.Low = watermark(r.low, u.Total)
	if n := c.catalog.SetCapacity(u.Total); n > 0 {
		c.stats.PinsRefused.Add(int64(n))
		c.warn("pinned files over space.pin_share of the capacity: the least recently used are no longer pinned",
			"files", n, "pin_share", r.pinShare, "capacity", u.Total)
	}
	return u, nil
}

// grew records that n bytes of k were written to the cache.
func (c *Cache) grew(k Key, n int64) {
	total, quotaFull, pinRefused := c.catalog.Grow(k, n)
	if pinRefused {
		pinned, limit := c.catalog.Pinned()
		c.stats.PinsRefused.Add(1)
		c.warn("pin refused: pinned files hold space.pin_share of the capacity; the file stays cached unpinned (purge may evict it)",
			"key", k.String(), "pinned_bytes", pinned, "limit", limit, "err", errPinShareFull)
	}
	if quotaFull {
		c.kickPurge()
		return
	}
	c.noteGrowth(total, n)
}

// noteGrowth is called after bytes were added to the cache; it wakes the
// purger as soon as usage may have crossed the high watermark.
func (c *Cache) noteGrowth(total int64, n int64) {
	if r := c.rules.Load(); r.capacity > 0 && total > watermark(r.high, r.capacity) {
		c.kickPurge()
		return
	}
	// The file systems may fill before the capacity does (diskVictims):
	// statfs is a syscall, so check every 64 MiB written.
	if c.sinceStatfs.Add(n) >= 64<<20 {
		c.sinceStatfs.Store(0)
		c.kickPurge()
	}
}

func (c *Cache) kickPurge() {
	select {
	case c.purgeKick <- struct{}{}:
	default: // a purge is already pending
	}
}

// purgeLoop runs purges when kicked and every PurgeInterval.
func (c *Cache) purgeLoop() {
	defer c.wg.Done()
	every := c.rules.Load().purgeInterval
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-c.shutdownCh:
			return
		case <-c.purgeKick:
		case <-t.C:
		}
		c.Purge()
		if d := c.rules.Load().purgeInterval; d != every { // reloaded
			every = d
			t.Reset(every)
		}
	}
}

// Purge evicts least-recently-used closed files until usage is under the low
// watermark (if it was over the high one), the file count under its limit,
// and no file is older than MaxAge. It returns the files and bytes evicted.
// While the catalogue loads it does nothing: it could not tell the least
// recently used files (the load kicks a purge when it is done).
func (c *Cache) Purge() (files int, bytes int64) {
	c.purgeMu.Lock()
	defer c.purgeMu.Unlock()
	if !c.indexReady() {
		if !c.purgeWaited.Swap(true) {
			p := c.catalog.Progress()
			c.cfg.Logger.Info("purge waits for the index to be loaded", "loaded", p.Loaded, "of", p.Total)
		}
		return 0, 0
	}
	defer func() {
		if files > 0 {
			c.freedSpace()
		}
	}()
	r := c.rules.Load()
	u, err := c.Usage()
	if err != nil {
		c.cfg.Logger.Warn("purge: cannot measure usage", "err", err)
		return 0, 0
	}
	// Quotas first, within their own watermarks: a VO over its share makes
	// room from its own files before anyone else's are considered.
	if qv := c.catalog.QuotaVictims(); len(qv) > 0 {
		start := time.Now()
		qf, qb := c.evictAll(qv)
		files, bytes = files+qf, bytes+qb
		c.cfg.Logger.Info("purge: quotas", "evicted_files", qf, "evicted_bytes", qb, "took", time.Since(start).Round(time.Millisecond))
		if u, err = c.Usage(); err != nil {
			c.cfg.Logger.Warn("purge: cannot measure usage", "err", err)
			return files, bytes
		}
	}
	// Each disk within its own watermarks, so that no disk fills up while
	// the others have room.
	if dv := c.diskVictims(); len(dv) > 0 {
		df, db := c.evictAll(dv)
		files, bytes = files+df, bytes+db
		c.cfg.Logger.Info("purge: data disks short of free space", "evicted_files", df, "evicted_bytes", db)
		if u, err = c.Usage(); err != nil {
			c.cfg.Logger.Warn("purge: cannot measure usage", "err", err)
			return files, bytes
		}
	}
	var needBytes int64
	if u.Used > u.High {
		needBytes = u.Used - u.Low
	}
	needFiles := 0
	if max := r.maxFiles; max > 0 && u.Files > max {
		low := int(float64(max) * r.low / r.high)
		if r.high > 1 { // absolute watermarks: keep 90 % of the files
			low = max * 9 / 10
		}
		needFiles = u.Files - low
	}
	var older time.Time
	if r.maxAge > 0 {
		older = c.cfg.now().Add(-r.maxAge)
	}
	if needBytes <= 0 && needFiles <= 0 && older.IsZero() {
		return files, bytes
	}
	if needBytes > 0 && u.Pinned > u.High {
		c.warn("purge cannot get under the high watermark", "pinned_bytes", u.Pinned, "high", u.High, "err", errPinnedOverHigh)
	}
	start := time.Now()
	defer func() {
		c.stats.LastPurgeNanos.Store(int64(time.Since(start)))
		c.stats.LastPurgeFiles.Store(int64(files))
		c.stats.PurgeRuns.Add(1)
	}()
	victims := c.catalog.Victims(needBytes, needFiles, older)
	c.stats.LastPurgeSelectNanos.Store(int64(time.Since(start)))
	gf, gb := c.evictAll(victims)
	files, bytes = files+gf, bytes+gb
	if gf > 0 {
		c.cfg.Logger.Info("purge", "evicted_files", files, "evicted_bytes", bytes, "used_before", u.Used, "high", u.High, "low", u.Low)
	}
	return files, bytes
}

// evictAll evicts keys, skipping those that clients opened meanwhile.
// The directories they leave empty are removed once at the end: a purge
// of many files of one directory tries each directory once, not once per
// file.
func (c *Cache) evictAll(keys []Key) (files int, bytes int64) {
	tidy := dirTidy{}
	defer tidy.run(c)
	for _, k := range keys {
		n, err := c.evict(k, 0, tidy)
		if err != nil {
			if !errors.Is(err, ErrBusy) {
				c.cfg.Logger.Warn("purge: evict failed", "key", k.String(), "err", err)
			}
			continue
		}
		files++
		bytes += n
	}
	return files, bytes
}

// evict removes a closed file's data and sidecar. Opens of the key wait
// until it is gone. A file only lingering (linger.go) is retired first; a
// retired one goes at once, with its state not yet synced; a local
// operation on the key (a retire, also the one ending the linger started,
// a checksum recorded) is waited for up to wait, then the file counts as
// busy. Purge waits for none (wait 0): a retire waits for the blocks'
// disk writes, and a disk write that finds the disk full runs the purge
// itself.
func (c *Cache) evict(k Key, wait time.Duration, tidy dirTidy) (int64, error) {
	var timeout <-chan time.Time
	var retired *entry
	c.mu.Lock()
	for {
		e := c.files[k]
		var ch <-chan struct{}
		switch {
		case e != nil && e.refs == 0 && e.linger != nil:
			c.mu.Unlock()
			c.lingerEnd(e) // now retiring, or taken back by a client
			c.mu.Lock()
			continue
		case e != nil && e.refs == 0 && e.finishing != nil:
			ch = e.finishing
		case e != nil && e.refs == 0 && e.retired:
			// Its pending state goes with the copy.
			c.forgetLocked(e)
			delete(c.dirty, e)
			retired = e
		case e != nil:
			c.mu.Unlock()
			return 0, fmt.Errorf("evict %s: %w", k, ErrBusy)
		default:
			ch = c.closing[k]
		}
		if ch == nil {
			break
		}
		c.mu.Unlock()
		if timeout == nil {
			timeout = time.After(wait)
		}
		select {
		case <-ch:
		case <-timeout:
			return 0, fmt.Errorf("evict %s: %w", k, ErrBusy)
		}
		c.mu.Lock()
	}
	done := make(chan struct{})
	c.closing[k] = done
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.closing, k)
		c.mu.Unlock()
		close(done)
	}()
	if retired != nil {
		// A group sync under way writes no sidecar for it any more.
		retired.syncMu.Lock()
		retired.gone = true
		retired.syncMu.Unlock()
		if retired.data != nil {
			retired.data.Close()
			retired.data = nil
		}
	}
	return c.removeCopyLocked(k, tidy)
}

// removeCopyLocked deletes k's sidecar and data and forgets it. MUST be
// called with k marked in c.closing by the caller (no open can start).
func (c *Cache) removeCopyLocked(k Key, tidy dirTidy) (int64, error) {
	// Sidecar first: a crash between the two leaves an orphan data file,
	// never a sidecar claiming blocks that are gone.
	var errs []error
	if err := c.cfg.FS.Remove(c.metaPath(k)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	d := c.disks[max(c.locate(k), 0)]
	if err := c.cfg.FS.Remove(d.path(k)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	n := c.catalog.Evicted(k)
	tidy.add(c, filepath.Dir(c.metaPath(k)), filepath.Join(c.cfg.Dir, "meta"))
	tidy.add(c, filepath.Dir(d.path(k)), filepath.Join(d.root, "data"))
	if err := errors.Join(errs...); err != nil {
		return n, fmt.Errorf("evict %s: %w", k, err)
	}
	c.stats.Evictions.Add(1)
	c.stats.EvictedBytes.Add(n)
	return n, nil
}

// dirTidy collects the directories evictions may have left empty, each
// with the top of its tree, to be removed once (run); nil removes them at
// once.
type dirTidy map[string]string

func (t dirTidy) add(c *Cache, dir, top string) {
	if t == nil {
		c.removeEmptyParents(dir, top)
		return
	}
	t[dir] = top
}

// run removes the directories collected that are empty, deepest first.
func (t dirTidy) run(c *Cache) {
	dirs := make([]string, 0, len(t))
	for d := range t {
		dirs = append(dirs, d)
	}
	slices.SortFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	for _, d := range dirs {
		c.removeEmptyParents(d, t[d])
	}
}

// removeEmptyParents removes dir and its parents up to (not including) top
// while they are empty; a non-empty directory stops it at once.
func (c *Cache) removeEmptyParents(dir, top string) {
	for dir != top && strings.HasPrefix(dir, top+string(filepath.Separator)) {
		if err := c.cfg.FS.Remove(dir); err != nil {
			return
		}
		dir = filepath.Dir(dir)
	}
}

// Evict removes a cached file; it fails with ErrBusy while clients have it
// open. A file whose last client has just closed is evicted once its final
// sync is done. It is safe while the cache serves.
func (c *Cache) Evict(originURL, p string) (int64, error) {
	cp, err := cleanPath(p)
	if err != nil {
		return 0, err
	}
	return c.evict(Key{Origin: originURL, Path: cp}, 30*time.Second, nil)
}

// durableBytes is the size of the blocks a sidecar records as present.
func durableBytes(in *sidecar.Info) int64 { return catalog.DurableBytes(in) }

// walk calls fn for every regular file under dir.
func (c *Cache) walk(dir string, fn func(string)) error {
	ents, err := c.cfg.FS.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	var errs []error
	for _, de := range ents {
		p := path.Join(dir, de.Name())
		if de.IsDir() {
			if err := c.walk(p, fn); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if de.Type().IsRegular() {
			fn(p)
		}
	}
	return errors.Join(errs...)
}
