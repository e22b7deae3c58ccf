package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

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

func watermark(v float64, total int64) int64 {
	if v <= 1 {
		return int64(v * float64(total))
	}
	return int64(v)
}

// Usage returns the current occupancy.
func (c *Cache) Usage() (Usage, error) {
	var u Usage
	r := c.rules.Load()
	u.Files, u.Bytes = c.index.totals()
	c.index.mu.Lock()
	u.Pinned = c.index.pinnedBytes
	c.index.mu.Unlock()
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
	if n := c.index.setTotal(u.Total); n > 0 {
		c.stats.PinsRefused.Add(int64(n))
		c.warn("pinned files over space.pin_share of the capacity: the least recently used are no longer pinned",
			"files", n, "pin_share", r.pinShare, "capacity", u.Total)
	}
	return u, nil
}

// grew records that n bytes of k were written to the cache.
func (c *Cache) grew(k Key, n int64) {
	total, quotaFull, pinRefused := c.index.grow(k, n)
	if pinRefused {
		pinned, limit := c.index.pinFigures()
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
func (c *Cache) Purge() (files int, bytes int64) {
	c.purgeMu.Lock()
	defer c.purgeMu.Unlock()
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
	if qv := c.index.quotaVictims(); len(qv) > 0 {
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
	victims := c.index.victims(needBytes, needFiles, older)
	c.stats.LastPurgeSelectNanos.Store(int64(time.Since(start)))
	gf, gb := c.evictAll(victims)
	files, bytes = files+gf, bytes+gb
	if gf > 0 {
		c.cfg.Logger.Info("purge", "evicted_files", files, "evicted_bytes", bytes, "used_before", u.Used, "high", u.High, "low", u.Low)
	}
	return files, bytes
}

// evictAll evicts keys, skipping those that clients opened meanwhile.
func (c *Cache) evictAll(keys []Key) (files int, bytes int64) {
	for _, k := range keys {
		n, err := c.evict(k, 0)
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
func (c *Cache) evict(k Key, wait time.Duration) (int64, error) {
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
			delete(c.files, k)
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
	return c.removeCopyLocked(k)
}

// removeCopyLocked deletes k's sidecar and data and forgets it. MUST be
// called with k marked in c.closing by the caller (no open can start).
func (c *Cache) removeCopyLocked(k Key) (int64, error) {
	// Sidecar first: a crash between the two leaves an orphan data file,
	// never a sidecar claiming blocks that are gone.
	var errs []error
	if err := c.cfg.FS.Remove(c.metaPath(k)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	id, _ := c.index.diskOf(k)
	d := c.disks[id]
	if err := c.cfg.FS.Remove(d.path(k)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	c.index.evicted(k)
	n := c.index.remove(k)
	c.removeEmptyParents(filepath.Dir(c.metaPath(k)), filepath.Join(c.cfg.Dir, "meta"))
	c.removeEmptyParents(filepath.Dir(d.path(k)), filepath.Join(d.root, "data"))
	if err := errors.Join(errs...); err != nil {
		return n, fmt.Errorf("evict %s: %w", k, err)
	}
	c.stats.Evictions.Add(1)
	c.stats.EvictedBytes.Add(n)
	return n, nil
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
	return c.evict(Key{Origin: originURL, Path: cp}, 30*time.Second)
}

// loadIndex rebuilds the index from the sidecars under Dir/meta. Corrupt
// sidecars are removed together with their data.
func (c *Cache) loadIndex() error {
	root := filepath.Join(c.cfg.Dir, "meta")
	// With data disks, which one holds each file is learnt from their
	// data trees; files no sidecar claims are removed after the load. A
	// sidecar whose file is on no disk in service is kept while a disk is
	// out (its file may be there: it is adopted when the disk is back).
	var onDisk map[string]int
	keepUnfound := false
	if len(c.cfg.DataDirs) > 0 {
		onDisk = map[string]int{}
		for _, d := range c.disks {
			if !d.up() {
				keepUnfound = true
				continue
			}
			droot := filepath.Join(d.root, "data")
			c.walk(droot, func(p string) {
				if rel, ok := relData(d.root, p); ok {
					if other, dup := onDisk[rel]; dup {
						// A crash mid-placement, or a disk added back
						// to data_dirs after its file was fetched again
						// elsewhere: the newer copy is the one its
						// sidecar describes.
						op := filepath.Join(c.disks[other].root, "data", rel)
						if c.newer(p, op) {
							c.cfg.FS.Remove(op)
							onDisk[rel] = d.id
						} else {
							c.cfg.FS.Remove(p)
						}
						return
					}
					onDisk[rel] = d.id
				}
			})
		}
	}
	var claimedMu sync.Mutex
	claimed := map[string]bool{}
	var others foreign // files of other users (ownership.go)
	defer others.report(c)
	paths := make(chan string, 256)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range paths {
				others.note(c.cfg.FS, p)
				if rel := c.loadSidecar(root, p, onDisk, keepUnfound); rel != "" && onDisk != nil {
					claimedMu.Lock()
					claimed[rel] = true
					claimedMu.Unlock()
				}
			}
		}()
	}
	err := c.walk(root, func(p string) {
		if strings.HasSuffix(p, ".hcinfo") {
			paths <- p
		} else if strings.HasSuffix(p, ".hcinfo.tmp") {
			c.cfg.FS.Remove(p) // a sidecar write interrupted by a crash
		}
	})
	close(paths)
	wg.Wait()
	for rel, id := range onDisk {
		if !claimed[rel] {
			c.cfg.FS.Remove(filepath.Join(c.disks[id].root, "data", rel))
		}
	}
	c.index.sortLoaded()
	return err
}

// newer reports whether file a was modified after file b.
func (c *Cache) newer(a, b string) bool {
	sa, err := c.cfg.FS.Stat(a)
	if err != nil {
		return false
	}
	sb, err := c.cfg.FS.Stat(b)
	return err != nil || sa.ModTime().After(sb.ModTime())
}

// loadSidecar adds the file of sidecar p to the index and returns its path
// relative to the data tree ("" if unusable). onDisk (several disks) maps
// those paths to the disk holding them.
func (c *Cache) loadSidecar(root, p string, onDisk map[string]int, keepUnfound bool) string {
	b, _, err := readAll(c.cfg.FS, p)
	if err != nil {
		c.cfg.Logger.Warn("index: cannot read sidecar", "path", p, "err", err)
		return ""
	}
	rel, rerr := filepath.Rel(root, strings.TrimSuffix(p, ".hcinfo"))
	if rerr != nil || strings.HasPrefix(rel, "..") {
		rel = ""
	}
	in, err := sidecar.Unmarshal(b)
	if err == nil {
		k := Key{Origin: in.Origin, Path: in.Path}
		id, found := 0, true
		if onDisk != nil {
			id, found = onDisk[rel]
		}
		switch {
		case c.metaPath(k) != p:
			err = fmt.Errorf("sidecar names %s, which belongs elsewhere", k)
		case !found && keepUnfound:
			return "" // perhaps on the disk out of service
		case !found:
			err = errors.New("no data disk holds its data file")
		default:
			c.index.load(k, durableBytes(in), in.LastAccess, id)
			return rel
		}
	}
	c.cfg.Logger.Warn("index: removing unusable cached file", "sidecar", p, "err", err)
	c.cfg.FS.Remove(p)
	if rel != "" {
		if id, ok := onDisk[rel]; ok {
			c.cfg.FS.Remove(filepath.Join(c.disks[id].root, "data", rel))
		} else if onDisk == nil {
			c.cfg.FS.Remove(filepath.Join(c.disks[0].root, "data", rel))
		}
	}
	return ""
}

// durableBytes is the size of the blocks a sidecar records as present.
func durableBytes(in *sidecar.Info) int64 {
	n := int64(in.Durable.Count()) * in.BlockSize
	if nb := in.Durable.Len(); nb > 0 && in.Durable.Test(nb-1) {
		n -= int64(nb)*in.BlockSize - in.FileSize // the last block is short
	}
	return n
}

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
