package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hepcache/hepcache/internal/catalog"
	"github.com/hepcache/hepcache/internal/sidecar"
)

// A JBOD node keeps its data files on several disks (Config.DataDirs) and
// its sidecars in Dir. Each file lives on one disk, chosen by free space
// when the file enters the cache. A disk that fails (I/O errors, turned
// read-only, unmounted) is taken out of service: its files are forgotten
// (their sidecars removed, so a restart does not trust them either), no new
// file is placed there, and the node goes on serving from the other disks
// and, for what they do not hold, from the origin.

// diskMarker names the file that identifies a data directory as the disk
// hepcache prepared; its absence means the disk is no longer mounted there.
const diskMarker = ".hepcache-disk"

// diskCheckInterval is how often every disk in service is probed.
const diskCheckInterval = 5 * time.Second

// errNoDisk: no data disk is in service; the cache serves from the origin.
var errNoDisk = errors.New("cache: no data disk in service")

// dataDisk is one data directory.
type dataDisk struct {
	id   int
	root string // files live under root/data
	dev  uint64 // device of root when taken into service
	mark string // the marker's content
	// down holds why the disk was taken out; nil while in service.
	down atomic.Pointer[string]
	// absent: the disk was out of service because it was not there (not
	// mounted at start-up, unmounted, another disk in its place), not
	// because it failed: the periodic check takes it back as soon as it is
	// there again. A failed disk is tried again only on a reload.
	absent atomic.Bool
	// total and used are the last statfs; placed counts the bytes of the
	// files placed on the disk since, so that a burst of new files spreads
	// over the disks instead of all going to the one that was emptiest.
	total, used, placed atomic.Int64
	errors              atomic.Int64
	// backLater: the disk was found back while the index loaded; it is
	// taken back once the index is loaded (takeBack).
	backLater atomic.Bool
	// depth is how many blocks a reader keeps in flight from this disk
	// (Config.DiskReadDepth, or sized to the device); reads is the
	// disk's pool of read-ahead slots (readsPerDepth per unit of depth):
	// read-ahead beyond it waits for its reader instead of queueing.
	depth int
	reads chan struct{}
}

// readsPerDepth bounds the reads ahead in flight on one disk, in units
// of a reader's depth: that many readers at full depth at once.
const readsPerDepth = 4

// setDepth sizes the disk's read-ahead: depth if given, else from the
// device (readDepthOf).
func (d *dataDisk) setDepth(depth int) {
	if depth <= 0 {
		depth = readDepthOf(d.root)
	}
	d.depth = depth
	d.reads = make(chan struct{}, readsPerDepth*depth)
}

func (d *dataDisk) up() bool { return d.down.Load() == nil }

// DiskUsage is one data disk's state.
type DiskUsage struct {
	Dir string
	// Up is false once the disk was taken out; Reason says why.
	Up     bool
	Reason string
	// Total and Used are the file system's; High and Low its watermarks
	// (the cache's watermark fractions applied to Total).
	Total, Used, High, Low int64
	// Files and Bytes are the cached files on the disk.
	Files int
	Bytes int64
	// Errors counts I/O errors seen on the disk.
	Errors int64
	// DirectIO: its data files are written and read with O_DIRECT.
	DirectIO bool
}

// openDisks takes the data directories into service and records their
// devices. Without DataDirs the data lives in Dir with the metadata (a
// bare Dir is an empty cache) and the marker is written at the first
// start. Each of DataDirs must have been taken into service once (`hepcache
// disk init`, diskrecord.go): a directory never recorded is an error
// naming every such directory and the fix. A recorded disk that is not
// there now (not mounted: a bare mount point on another file system,
// another disk's marker, the directory gone) is opened out of service, as
// a disk failing while serving would be: the node serves from the other
// disks and the origin, never fills the file system under a bare mount
// point, and takes the disk back once it is mounted again (CheckDisks).
func openDisks(c *Config) ([]*dataDisk, error) {
	if len(c.DataDirs) == 0 {
		d, err := openOwnDisk(c)
		if err != nil {
			return nil, err
		}
		return []*dataDisk{d}, nil
	}
	found, recs, migrate, err := examineDataDirs(c.Dir, c.DataDirs)
	if err != nil {
		return nil, err
	}
	if migrate {
		if err := writeDiskRecords(c.Dir, recs); err != nil {
			return nil, err
		}
	}
	var disks []*dataDisk
	for i, f := range found {
		d := &dataDisk{id: i, root: f.rec.Dir, dev: f.rec.Device, mark: f.rec.Marker}
		d.setDepth(c.DiskReadDepth)
		if f.absent == "" {
			if err := c.FS.MkdirAll(filepath.Join(d.root, "data"), 0o755); err != nil {
				return nil, fmt.Errorf("data dir %s: %w", d.root, err)
			}
		} else {
			d.absent.Store(true)
			d.down.Store(&f.absent)
		}
		disks = append(disks, d)
	}
	return disks, nil
}

// dataDirState is a data directory as found: its record, and why it is
// not there ("" when it is).
type dataDirState struct {
	rec    diskRecord
	absent string
}

// examineDataDirs compares each of dataDirs with its record in cacheDir,
// without changing anything. A directory never recorded is refused (the
// error names each with its fix); a recorded one that is not there now is
// absent, with why. migrate says recs were made now from the markers found
// (a cache from before the record).
func examineDataDirs(cacheDir string, dataDirs []string) (found []dataDirState, recs map[string]diskRecord, migrate bool, err error) {
	if recs, err = readDiskRecords(cacheDir); err != nil {
		return nil, nil, false, err
	}
	migrate = len(recs) == 0
	var refused []error
	for _, dir := range dataDirs {
		r, recorded := recs[dir]
		dev, err := deviceOf(dir)
		if err != nil {
			if recorded {
				found = append(found, dataDirState{rec: r, absent: fmt.Sprintf("not mounted: %v", err)})
			} else {
				refused = append(refused, fmt.Errorf("data dir %s: %w (disk not mounted?); if this directory is the disk you mean, take it into service with `hepcache disk init --config FILE %s`", dir, err, dir))
			}
			continue
		}
		mark, merr := os.ReadFile(filepath.Join(dir, diskMarker))
		if migrate && merr == nil {
			recs[dir] = diskRecord{Dir: dir, Marker: string(mark), Device: dev}
			r, recorded = recs[dir], true
		}
		switch why := checkRecorded(recs, dir, mark, merr, dev); {
		case why == "":
			found = append(found, dataDirState{rec: r})
		case recorded:
			found = append(found, dataDirState{rec: r, absent: why})
		default:
			refused = append(refused, fmt.Errorf("data dir %s: %s", dir, why))
		}
	}
	if len(refused) > 0 {
		return nil, nil, false, errors.Join(refused...)
	}
	return found, recs, migrate, nil
}

// CheckDataDirs tells, without changing anything, what the cache's start
// would do with the data directories of the cache in cacheDir: the
// directories it refuses (never taken into service with `hepcache disk
// init`), in one error with each fix, and those it opens out of service
// (recorded, but not there now), each with why. `hepcache check` and the
// server run it before anything binds.
func CheckDataDirs(cacheDir string, dataDirs []string) (absent map[string]string, err error) {
	found, _, _, err := examineDataDirs(cacheDir, dataDirs)
	absent = map[string]string{}
	for _, f := range found {
		if f.absent != "" {
			absent[f.rec.Dir] = f.absent
		}
	}
	return absent, err
}

// openOwnDisk takes Dir into service as the only data disk.
func openOwnDisk(c *Config) (*dataDisk, error) {
	dir := c.Dir
	if err := c.FS.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dir, err)
	}
	mark, err := os.ReadFile(filepath.Join(dir, diskMarker))
	if errors.Is(err, fs.ErrNotExist) {
		mark, err = newMarker(dir)
	}
	if err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dir, err)
	}
	d := &dataDisk{id: 0, root: dir, mark: string(mark)}
	d.setDepth(c.DiskReadDepth)
	if d.dev, err = deviceOf(dir); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dir, err)
	}
	return d, nil
}

func deviceOf(dir string) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return 0, &fs.PathError{Op: "stat", Path: dir, Err: err}
	}
	return uint64(st.Dev), nil
}

// checkDisk probes d: the marker is still there (an unmounted disk leaves
// the bare mount point), the device is the same, a file can be created
// and the file system measured. It returns why d is unusable, or "", and
// whether that is because the disk is not there (absent) rather than
// failing.
func (c *Cache) checkDisk(d *dataDisk) (why string, absent bool) {
	if why := c.diskThere(d); why != "" {
		return why, true
	}
	probe := filepath.Join(d.root, diskMarker+".probe")
	if err := os.WriteFile(probe, nil, 0o644); err != nil && diskFailure(err) {
		return err.Error(), false
	}
	os.Remove(probe)
	if err := c.measure(d); err != nil {
		return err.Error(), false
	}
	return "", false
}

// diskThere says why d's directory is not the disk taken into service
// (another device, no marker, another marker), "" if it is.
func (c *Cache) diskThere(d *dataDisk) string {
	if dev, err := deviceOf(d.root); err != nil {
		return err.Error()
	} else if dev != d.dev {
		return fmt.Sprintf("the directory is on device %s, the disk was on %s (disk unmounted?)", devString(dev), devString(d.dev))
	}
	if mark, err := os.ReadFile(filepath.Join(d.root, diskMarker)); err != nil {
		return fmt.Sprintf("marker %s unreadable (disk unmounted?): %v", diskMarker, err)
	} else if string(mark) != d.mark {
		return fmt.Sprintf("marker %s changed: another disk is mounted there", diskMarker)
	}
	return ""
}

// measure refreshes d's size and usage. What the file system gained since
// the last measure is taken off placed: those are placed files being
// written (a new data file is sparse until its blocks arrive).
func (c *Cache) measure(d *dataDisk) error {
	total, used, err := c.cfg.statfs(d.root)
	if err != nil {
		return err
	}
	d.total.Store(total)
	if grown := used - d.used.Swap(used); grown > 0 {
		if p := d.placed.Add(-grown); p < 0 {
			d.placed.CompareAndSwap(p, 0)
		}
	}
	return nil
}

// diskFailure reports whether err means the disk itself is failing, as
// opposed to it being full or a file missing.
func diskFailure(err error) bool {
	for _, e := range []syscall.Errno{syscall.EIO, syscall.EROFS, syscall.ENODEV, syscall.ENXIO, syscall.ESTALE, syscall.ENOTCONN} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// linkFound reports a symbolic link met in the cache directory (never
// followed) and removes it: the cache's own files are never links.
func (c *Cache) linkFound(p string, err error) {
	c.stats.LinksRefused.Add(1)
	c.warn("symbolic link in the cache directory: not followed, removed", "path", p, "err", err)
	c.cfg.FS.Remove(p)
}

// diskError is called with an error from a data file on disk id; a disk
// failure takes the disk out of service.
func (c *Cache) diskError(id int, err error) {
	if id < 0 || id >= len(c.disks) || err == nil {
		return
	}
	d := c.disks[id]
	d.errors.Add(1)
	if errors.Is(err, syscall.ENOSPC) {
		c.noSpaceKick()
	}
	if diskFailure(err) {
		c.takeOut(d, err.Error(), false)
	}
}

// takeOut removes d from service and forgets its files. A disk that
// failed loses its files' sidecars too (a restart must not trust them); a
// disk that is only not there (absent: unmounted, another disk in its
// place) keeps them, so that its files are taken back with it.
func (c *Cache) takeOut(d *dataDisk, why string, absent bool) {
	if !d.down.CompareAndSwap(nil, &why) {
		return // already out
	}
	d.absent.Store(absent)
	keys := c.catalog.ForgetDisk(d.id)
	c.forgetKeptOn(d.id)
	if !absent {
		for _, k := range keys {
			c.cfg.FS.Remove(c.metaPath(k))
		}
	}
	c.stats.DisksFailed.Add(1)
	c.cfg.Logger.Error("data disk taken out of service; its files are forgotten and fetched again on other disks until it is back",
		"dir", d.root, "reason", why, "files", len(keys))
}

// diskLoop probes every disk periodically.
func (c *Cache) diskLoop() {
	defer c.wg.Done()
	t := time.NewTicker(diskCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-c.shutdownCh:
			return
		case <-t.C:
		}
		c.CheckDisks()
	}
}

// CheckDisks probes every disk now: it takes out those in service that
// fail, and takes back those out of service because they were not there
// (not mounted) once they are, with their files. The server also runs it
// every few seconds.
func (c *Cache) CheckDisks() { c.checkDisks(false) }

// RetryDisks is CheckDisks that also tries the disks taken out for
// failures again (a reload: the admin repaired or remounted them); the
// periodic check does not, so that a failing disk does not come and go.
func (c *Cache) RetryDisks() { c.checkDisks(true) }

func (c *Cache) checkDisks(retry bool) {
	c.diskMu.Lock()
	defer c.diskMu.Unlock()
	for _, d := range c.disks {
		switch {
		case d.up():
			if why, absent := c.checkDisk(d); why != "" {
				c.takeOut(d, why, absent)
			}
		case d.absent.Load() || retry:
			if c.diskThere(d) == "" {
				c.takeBack(d)
			}
		}
	}
}

// takeBack returns d to service: its tree is opened again (the mount
// point now leads to the disk), it is probed, and the data files on it
// are adopted where their sidecars still claim them and no other copy
// was made meanwhile, else removed: nothing is left on it outside the
// index. MUST be called with diskMu held.
func (c *Cache) takeBack(d *dataDisk) {
	if !c.indexReady() {
		// Which files are its own is told by the catalogue, once
		// loaded (startLoad takes it back then).
		if !d.backLater.Swap(true) {
			c.cfg.Logger.Info("data disk back: taken into service once the index is loaded", "dir", d.root)
		}
		return
	}
	d.backLater.Store(false)
	if c.confined != nil {
		if err := c.confined.Reopen(d.root); err != nil {
			c.warn("data disk still out of service: cannot open it", "dir", d.root, "err", err)
			return
		}
	}
	if err := c.cfg.FS.MkdirAll(filepath.Join(d.root, "data"), 0o755); err != nil {
		c.warn("data disk still out of service", "dir", d.root, "err", err)
		return
	}
	probe := filepath.Join(d.root, diskMarker+".probe")
	if err := os.WriteFile(probe, nil, 0o644); err != nil {
		c.warn("data disk still out of service: not writable", "dir", d.root, "err", err)
		return
	}
	os.Remove(probe)
	if err := c.measure(d); err != nil {
		c.warn("data disk still out of service", "dir", d.root, "err", err)
		return
	}
	type found struct {
		k          Key
		p          string
		bytes      int64
		lastAccess time.Time
	}
	var cands []found
	var drop []string
	c.walk(filepath.Join(d.root, "data"), func(p string) {
		rel, ok := relData(d.root, p)
		if !ok {
			return
		}
		b, _, err := readAll(c.cfg.FS, filepath.Join(c.cfg.Dir, "meta", rel)+".hcinfo")
		var in *sidecar.Info
		if err == nil {
			in, err = sidecar.Unmarshal(b)
		}
		if err == nil {
			k := Key{Origin: in.Origin, Path: in.Path}
			st, serr := c.cfg.FS.Stat(p)
			if serr == nil && st.Size() == in.FileSize && d.path(k) == p {
				cands = append(cands, found{k: k, p: p, bytes: durableBytes(in), lastAccess: in.LastAccess})
				return
			}
		}
		drop = append(drop, p)
	})
	// While d is out, nothing is placed on it: what another copy replaced
	// (an open file, a file on another disk now) is removed first.
	free := func(k Key) bool {
		_, known := c.catalog.DiskOf(k)
		_, open := c.files[k]
		_, closing := c.closing[k]
		return !known && !open && !closing
	}
	c.mu.Lock()
	keep := cands[:0]
	for _, f := range cands {
		if free(f.k) {
			keep = append(keep, f)
		} else {
			drop = append(drop, f.p)
		}
	}
	c.mu.Unlock()
	for _, p := range drop {
		c.cfg.FS.Remove(p)
	}
	// Adopt and return to service at once: an open that starts after
	// finds the files in the index, on a disk in service. One that started
	// in between fetches its file again (the copy left here is then
	// replaced or removed at the next start).
	var recs []catalog.Record
	late := 0
	c.mu.Lock()
	for _, f := range keep {
		if free(f.k) {
			recs = append(recs, catalog.Record{Key: f.k, Bytes: f.bytes, LastAccess: f.lastAccess, Disk: d.id})
		} else {
			late++
		}
	}
	adopted := c.catalog.Adopt(recs)
	c.full[d.id].Store(0)
	c.direct[d.id].Store(directUnknown)
	d.absent.Store(false)
	d.down.Store(nil)
	c.mu.Unlock()
	c.kickPurge()
	c.cfg.Logger.Info("data disk back in service", "dir", d.root, "files_adopted", adopted, "files_removed", len(drop), "files_replaced_meanwhile", late)
}

// placeDisk chooses the disk for a new file of size bytes: the disk in
// service with the most free space, counting the files placed since it
// was last measured.
func (c *Cache) placeDisk(size int64) (*dataDisk, error) {
	var best *dataDisk
	var bestFree int64
	for _, d := range c.disks {
		if !d.up() {
			continue
		}
		free := d.total.Load() - d.used.Load() - d.placed.Load()
		if best == nil || free > bestFree {
			best, bestFree = d, free
		}
	}
	if best == nil {
		return nil, errNoDisk
	}
	best.placed.Add(size)
	return best, nil
}

// anyDiskUp reports whether some data disk is in service.
func (c *Cache) anyDiskUp() bool {
	for _, d := range c.disks {
		if d.up() {
			return true
		}
	}
	return false
}

// diskPath is where the data of k lives on disk d.
func (d *dataDisk) path(k Key) string { return DataPath(d.root, k) }

// Disks reports every data disk.
func (c *Cache) Disks() []DiskUsage {
	r := c.rules.Load()
	files, bytes := c.catalog.DiskTotals(len(c.disks))
	out := make([]DiskUsage, len(c.disks))
	direct := c.DirectIO()
	for _, d := range c.disks {
		if d.up() {
			c.measure(d)
		}
	}
	upTotal := c.upTotal()
	for i, d := range c.disks {
		u := DiskUsage{Dir: d.root, Up: d.up(), Total: d.total.Load(), Used: d.used.Load(),
			Files: files[i], Bytes: bytes[i], Errors: d.errors.Load(), DirectIO: direct[i]}
		if why := d.down.Load(); why != nil {
			u.Reason = *why
		}
		if u.Up {
			u.High, u.Low = diskMarks(d.total.Load(), upTotal, r)
		}
		out[i] = u
	}
	return out
}

// upTotal is the size of the data disks in service, as last measured.
func (c *Cache) upTotal() int64 {
	var t int64
	for _, d := range c.disks {
		if d.up() {
			t += d.total.Load()
		}
	}
	return t
}

// diskVictims returns, for every disk in service whose file system is used
// beyond its high watermark (diskMarks), the closed and unpinned files on
// it from the least recently used end until it would be down to its low
// one. With one disk and no capacity, Usage is that disk's file system and
// Purge handles it alone; with a capacity, the file system may still fill
// first (it is smaller than the capacity, or shared), and then it is
// purged too instead of turning every miss into a bypass read.
func (c *Cache) diskVictims() []Key {
	r := c.rules.Load()
	if len(c.disks) < 2 && r.capacity == 0 {
		return nil
	}
	var measured []*dataDisk
	for _, d := range c.disks {
		if d.up() && c.measure(d) == nil {
			measured = append(measured, d)
		}
	}
	upTotal := c.upTotal()
	var out []Key
	for _, d := range measured {
		high, low := diskMarks(d.total.Load(), upTotal, r)
		if need := diskNeed(d.used.Load(), high, low); need > 0 {
			out = append(out, c.catalog.VictimsOnDisk(d.id, need)...)
		}
	}
	return out
}

// diskMarks returns the usage of a data disk's file system (of size total,
// the disks in service having upTotal together) above which its files are
// evicted (high) and down to which (low):
//
//   - watermarks as fractions keep free the share 1-high of the disk's
//     size, or of the capacity where that is smaller (a large file system
//     shared with other data is not emptied for a small cache), and a
//     purge frees up to the share 1-low;
//   - watermarks as sizes without a capacity are the whole cache's, as
//     XCache's pfc.diskusage sizes are its whole space's (all its
//     partitions together): each disk keeps its share of them, in
//     proportion to its size, so that no disk holds more than its part
//     while the others have room (issue 34: a JBOD disk stayed at 640 MiB
//     with "600M,640M", no disk's watermark known);
//   - sizes with a capacity are taken as fractions of the capacity.
func diskMarks(total, upTotal int64, r *spaceRules) (high, low int64) {
	hf, lf := r.high, r.low
	if hf > 1 && r.capacity == 0 {
		if upTotal <= 0 {
			return 0, 0
		}
		share := float64(total) / float64(upTotal)
		return min(total, int64(hf*share)), min(total, int64(lf*share))
	}
	if hf > 1 {
		hf, lf = hf/float64(r.capacity), lf/float64(r.capacity)
	}
	base := total
	if cp := r.capacity; cp > 0 && cp < base {
		base = cp
	}
	return total - int64((1-hf)*float64(base)), total - int64((1-lf)*float64(base))
}

// diskNeed is how many bytes must be freed on a disk whose file system has
// used bytes: down to low once over high, else 0.
func diskNeed(used, high, low int64) int64 {
	if used <= high {
		return 0
	}
	return used - low
}

// noSpaceKick wakes the purger at most once a second on writes that found
// their disk full: purge checks every disk's free space (diskVictims).
func (c *Cache) noSpaceKick() {
	now := time.Now().UnixNano()
	last := c.lastNoSpaceKick.Load()
	if now-last < int64(time.Second) || !c.lastNoSpaceKick.CompareAndSwap(last, now) {
		return
	}
	c.kickPurge()
}

// relData returns p's path relative to a disk's data tree, or false.
func relData(root, p string) (string, bool) {
	rel, err := filepath.Rel(filepath.Join(root, "data"), p)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return "", false
	}
	return rel, true
}

// existingDirs are those of dirs that exist as directories.
func existingDirs(dirs []string) []string {
	var out []string
	for _, d := range dirs {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			out = append(out, d)
		}
	}
	return out
}
