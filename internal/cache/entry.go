package cache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hepcache/hepcache/disk"
	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/blockstore"
	"github.com/hepcache/hepcache/internal/checksum"
	"github.com/hepcache/hepcache/internal/readat"
	"github.com/hepcache/hepcache/internal/sidecar"
	"github.com/hepcache/hepcache/origin"
)

// entry is the shared state of one cached file while it has clients.
type entry struct {
	c   *Cache
	o   origin.Origin
	key Key

	// initCh is a one-slot lock serialising init; initDone is set once the
	// fields below it are valid and immutable.
	initCh chan struct{}
	initOK bool
	info   origin.FileInfo
	// unconfirmed: an adopted copy the origin could not confirm at open
	// (info.ModTime is then when XCache cached it; see adopted.go).
	unconfirmed bool
	// mutable: the path is in a namespace declared mutable (revalidated
	// at open); its reads of fresh bytes wait for the origin to confirm
	// the version (deliver.go).
	mutable bool
	size    int64
	nblocks int
	data    *blockstore.File
	// id names this copy's blocks in the block store (catalog.Opened).
	id uint64
	// disk is the id of the data disk holding data.
	disk     int
	wasState string // "hit", "partial" or "miss" at open (openState)
	// created is when the copy entered the cache (the sidecar's Created).
	created time.Time

	// ctx scopes every origin fetch of this entry; cancelled at finish, or
	// at last close when downloads stop with the clients.
	ctx     context.Context
	cancel  context.CancelFunc
	fetchWG sync.WaitGroup

	// ident confirms the origin file is unchanged before blocks fetched
	// from an origin that does not pin its reads are published (confirm.go).
	ident confirmer

	// clientToken is the origin token of the latest client open that had
	// one (backend.Request.OriginToken): it goes with the origin opens
	// made on the entry's behalf later (a partial file resumed by the next
	// reader).
	clientToken atomic.Pointer[string]

	// ofMu protects of, the lazily opened origin file, and opening, its
	// open in progress (never held across the open itself).
	ofMu    sync.Mutex
	of      origin.File
	opening *originOpen

	// syncMu serialises sidecar updates and writes.
	syncMu sync.Mutex
	// side is the durable state as last written; guarded by syncMu.
	side *sidecar.Info
	// sideChanged: side changed (a checksum recorded) since it was last
	// written; guarded by syncMu.
	sideChanged bool
	// gone: the copy was evicted; no sidecar write may bring it back.
	// Guarded by syncMu.
	gone bool
	// sideLen is the length of the sidecar on disk (0: none, or not
	// known), so that a write in place cuts it only when it shrinks.
	// Guarded by syncMu.
	sideLen int
	// sideWritten is when this process last wrote the sidecar (zero:
	// never); guarded by syncMu. recsDeferred: side holds access records
	// not written yet (kept.go).
	sideWritten  time.Time
	recsDeferred atomic.Bool
	// sums is the complete file's checksum once known (computed or
	// verified), published apart from side so that checksum queries never
	// wait behind a sync's fsync.
	sums atomic.Pointer[checksum.Sums]

	// mu protects the fields below.
	mu sync.Mutex
	// st is the blocks' state: present, in flight, read-ahead window
	// (blockstate.go). It decides; the entry does the I/O.
	st *blockState
	// checks are the CRC32C recorded for each present block, which the
	// block store checks a block read back from disk against (the store
	// owns the bookkeeping: blockstore.Checks).
	checks *blockstore.Checks
	// blockSums holds the checksums of blocks fetched in this session
	// (Len 0: unknown), combined into the file's when it completes.
	blockSums []checksum.Sums
	// unsynced lists blocks written since the last sync.
	unsynced []int
	// fetches holds the in-flight fetch of each block st has in flight.
	fetches map[int]*fetch

	// spoiled, once set, holds why no read of the entry may go on: its
	// cached bytes are of another version of the file than the origin now
	// serves (or failed the checksum), so a reader gets neither more of them
	// nor a mix with the new ones (spoil.go).
	spoiled atomic.Pointer[error]

	// Guarded by Cache.mu.
	// detached: a spoiled entry no longer in Cache.files; a new open of
	// the key gets a fresh entry.
	detached       bool
	refs           int
	pendingRecords []sidecar.Access
	completing     bool
	// linger ends the entry once it has had no client for
	// Config.CloseLinger (linger.go); nil while it has clients.
	linger *time.Timer
	// lingerPrev and lingerNext link the entry into Cache.lingerq while it
	// lingers.
	lingerPrev, lingerNext *entry
	// finishing is closed once the entry's retire (or finish) running in
	// the background is done; nil otherwise. An open of the key waits for
	// it: local work only (fetches stopping, their disk writes ending).
	finishing chan struct{}
	// retired: no client, no linger, fetches stopped (retire). The entry
	// stays in Cache.files until the group sync has made its state
	// durable, or longer when kept (kept.go; its lingerPrev and lingerNext
	// then link it into Cache.keptq); an open meanwhile takes it back.
	retired bool
	kept    bool
}

func newEntry(c *Cache, o origin.Origin, k Key) *entry {
	e := &entry{c: c, o: o, key: k, initCh: make(chan struct{}, 1), fetches: map[int]*fetch{}}
	e.ctx, e.cancel = context.WithCancel(c.ctx)
	return e
}

// openState names what an open finds of a file of n blocks when held of
// them are in the cache (on disk, or in RAM on their way there): "hit"
// (all), "partial" or "miss" (none).
func openState(held, n int) string {
	switch {
	case held == n:
		return "hit"
	case held > 0:
		return "partial"
	}
	return "miss"
}

func (e *entry) initialized() bool {
	select {
	case e.initCh <- struct{}{}:
		ok := e.initOK
		<-e.initCh
		return ok
	default:
		return false // init in progress
	}
}

// init loads the sidecar or creates the file from the origin. Concurrent
// callers wait; if one fails, the next caller tries again. With noFetch it
// fails instead of creating the file.
func (e *entry) init(ctx context.Context, revalidate, noFetch bool) error {
	select {
	case e.initCh <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-e.initCh }()
	if e.initOK {
		if e.data == nil {
			// Taken back after retire closed its data file.
			f, err := e.reopenData()
			if outOfFDs(err) {
				return err // the copy is fine: the client comes back
			}
			if err != nil {
				e.c.stats.OpenFiles.Add(-1) // counted by reviveLocked
				e.spoil(fmt.Errorf("reopen %s: %w", e.key, err))
				return errRetry
			}
			e.data = f
		}
		return nil
	}
	c := e.c
	side, sideLen, err := c.readSidecarLen(e.key)
	if err != nil {
		return err // out of descriptors: the client comes back
	}
	hadSidecar := side != nil
	var data *blockstore.File
	if side != nil {
		var f *blockstore.File
		id := c.locate(e.key)
		err := errNoDisk
		if id >= 0 && c.disks[id].up() {
			e.disk = id
			f, err = c.openCopy(c.disks[id], e.key, side.FileSize)
			if outOfFDs(err) {
				return err // the copy is fine: the client comes back
			}
		}
		if err != nil {
			if !errors.Is(err, errForeignWritable) { // said why
				c.cfg.Logger.Warn("cached data file unusable, fetching again", "key", e.key.String(), "err", err)
			}
			side = nil
		} else {
			data = f
			if side.BlockSize != c.cfg.BlockSize {
				// Blocks of another size: keep the file, but its bitmap
				// cannot be mapped; start over.
				c.cfg.Logger.Info("block size changed, fetching again", "key", e.key.String(), "had", side.BlockSize)
				side = nil
			}
		}
	}
	if side != nil && data != nil && side.Unconfirmed() {
		if side = e.confirmAdopted(ctx, side, data); side == nil {
			data = nil
		}
	}
	e.mutable = revalidate
	if side != nil && revalidate && !e.stillCurrent(ctx, side) {
		c.stats.Revalidations.Add(1)
		side = nil // the origin's file changed: fetch it again
	}
	if side == nil && noFetch {
		if data != nil {
			data.Close()
		}
		return notCached(e.key, "no cached copy")
	}
	if side == nil {
		octx, cancel := context.WithTimeout(ctx, c.cfg.OriginTimeout)
		of, err := e.o.Open(octx, e.key.Path)
		cancel()
		if err != nil {
			if data != nil {
				data.Close()
			}
			return fmt.Errorf("open %s: %w", e.key, err)
		}
		info := of.Info()
		if info.IsDir() {
			of.Close()
			if data != nil {
				data.Close()
			}
			return fmt.Errorf("open %s: %w", e.key, origin.ErrIsDir)
		}
		if data == nil {
			d, err := c.placeDisk(info.Size)
			if err == nil {
				e.disk = d.id
				data, err = c.createDataFile(d, d.path(e.key))
				c.diskError(d.id, err)
			}
			if err != nil {
				of.Close()
				return fmt.Errorf("create cache file for %s: %w", e.key, err)
			}
		}
		// A sidecar of a copy replaced here would describe blocks the
		// truncation removes: it goes first (no sidecar is written for
		// the new copy until a block of it is durable).
		if hadSidecar {
			if err := c.cfg.FS.Remove(c.metaPath(e.key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				c.cfg.Logger.Warn("cannot remove the sidecar of a replaced copy", "key", e.key.String(), "err", err)
			}
		}
		if err := data.Truncate(0); err == nil {
			err = data.Truncate(info.Size)
		}
		// Its sidecar is written by the group sync once a block is
		// durable: a sidecar with no block would be a write per miss
		// for nothing (a data file a crash leaves without one is removed
		// when the index is loaded).
		side = sidecar.New(e.key.Origin, e.key.Path, info.Size, c.cfg.BlockSize, info.ModTime, info.ETag, c.cfg.now())
		e.of = of
		e.info = origin.FileInfo{Name: e.key.Path, Size: info.Size, ModTime: info.ModTime, Mode: 0o444, ETag: info.ETag}
		e.wasState = "miss"
	} else {
		e.info = infoOf(e.key, side)
		e.unconfirmed = side.Unconfirmed()
		e.wasState = openState(side.Durable.Count(), side.Durable.Len())
	}
	e.side = side
	e.sideLen = sideLen
	if !hadSidecar || e.wasState == "miss" {
		e.sideLen = -1 // none on disk now, or a corrupt one left
	}
	e.created = side.Created
	e.data = data
	e.size = side.FileSize
	e.nblocks = side.Durable.Len()
	e.st = newBlockState(side.Durable.Clone(), c.cfg.Prefetch, c.cfg.PrefetchMax)
	e.publishSums(side)
	e.checks = blockstore.NewChecks(e.nblocks, side.BlockCRC, side.CRCKnown)
	e.blockSums = make([]checksum.Sums, e.nblocks)
	e.initOK = true
	// A miss starts a new copy: a new id, so that no block of a copy it
	// replaced is found in RAM under it.
	e.id = c.catalog.Opened(e.key, durableBytes(side), c.cfg.now(), e.disk, e.wasState == "miss")
	if e.wasState == "miss" {
		c.catalog.SetBytes(e.key, 0) // a stale copy was replaced
	}
	c.stats.OpenFiles.Add(1)
	return nil
}

func (c *Cache) createDataFile(d *dataDisk, name string) (*blockstore.File, error) {
	fsys := c.cfg.FS
	f, err := c.openData(d, name, os.O_RDWR|os.O_CREATE)
	if errors.Is(err, disk.ErrLink) {
		// A planted link on the file's path (the file itself or a
		// directory): removed (the link, never its target), then the file
		// is created in its place.
		for p, i := name, 0; i < 64 && p != filepath.Dir(p); p, i = filepath.Dir(p), i+1 {
			if fi, serr := fsys.Stat(p); serr == nil && fi.Mode()&fs.ModeSymlink != 0 {
				c.linkFound(p, err)
				break
			}
		}
		if err := fsys.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			return nil, err
		}
		f, err = c.openData(d, name, os.O_RDWR|os.O_CREATE)
	}
	if errors.Is(err, fs.ErrNotExist) {
		if err := fsys.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			return nil, notOurs(err)
		}
		f, err = c.openData(d, name, os.O_RDWR|os.O_CREATE)
	}
	if errors.Is(err, fs.ErrPermission) {
		// A file of another user (a run as root): dropped and created
		// again where this process may; else the file is read past the
		// cache (ownership.go).
		if fsys.Remove(name) == nil {
			f, err = c.openData(d, name, os.O_RDWR|os.O_CREATE)
		}
	}
	return f, notOurs(err)
}

// stillCurrent asks the origin whether a cached copy of a mutable path is
// still the origin's version (same size and modification time, and ETag
// where both have one). If the origin cannot be asked, the cached copy is
// served (stale-if-error) with a warning.
func (e *entry) stillCurrent(ctx context.Context, side *sidecar.Info) bool {
	octx, cancel := context.WithTimeout(ctx, e.c.cfg.OriginTimeout)
	defer cancel()
	fi, err := e.o.Stat(octx, e.key.Path)
	if err != nil {
		if errors.Is(err, origin.ErrNotFound) {
			return false
		}
		e.c.cfg.Logger.Warn("revalidation failed, serving cached copy", "key", e.key.String(), "err", err)
		return true
	}
	same := fi.Size == side.FileSize && fi.ModTime.Unix() == side.ModTime.Unix() &&
		(fi.ETag == "" || side.ETag == "" || fi.ETag == side.ETag)
	if !same {
		e.c.cfg.Logger.Info("origin file changed, dropping cached copy", "key", e.key.String(),
			"cached_size", side.FileSize, "origin_size", fi.Size, "cached_mtime", side.ModTime, "origin_mtime", fi.ModTime)
	}
	return same
}

// originFile returns the origin file, opening it on first use (an entry
// resumed from disk only contacts the origin when a block is missing).
// The open happens once, in the background under the entry's own
// context: no lock is held across it, every caller waits for it only as
// long as its own ctx allows, and one caller giving up does not fail the
// others. A failed open is forgotten, so the next caller tries again.
func (e *entry) originFile(ctx context.Context) (origin.File, error) {
	e.ofMu.Lock()
	if e.of != nil {
		of := e.of
		e.ofMu.Unlock()
		return of, nil
	}
	if err := e.spoilErr(); err != nil {
		e.ofMu.Unlock()
		return nil, err
	}
	op := e.opening
	if op == nil {
		op = &originOpen{done: make(chan struct{})}
		e.opening = op
		e.c.goBackground(func() { e.openOrigin(op) })
	}
	e.ofMu.Unlock()
	select {
	case <-op.done:
		return op.of, op.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// originOpen is the open of the origin file in progress.
type originOpen struct {
	done chan struct{}
	of   origin.File
	err  error
}

// withClientToken returns ctx carrying e's client token, if a client open
// gave one: origin calls made on the entry's behalf go as its reads did.
func (e *entry) withClientToken(ctx context.Context) context.Context {
	if tok := e.clientToken.Load(); tok != nil {
		return origin.WithClientToken(ctx, *tok)
	}
	return ctx
}

// openOrigin opens the origin file for originFile's waiters.
func (e *entry) openOrigin(op *originOpen) {
	octx, cancel := context.WithTimeout(e.withClientToken(e.ctx), e.c.cfg.OriginTimeout)
	of, err := e.o.Open(octx, e.key.Path)
	cancel()
	if err != nil {
		err = fmt.Errorf("open %s: %w", e.key, err)
	} else if why := e.versionDiffers(of.Info()); why != "" {
		// The blocks on disk came from the version the sidecar describes:
		// a different file at the origin must not fill the gaps.
		of.Close()
		of = nil
		err = fmt.Errorf("open %s: %s: %w", e.key, why, errChanged)
		e.c.stats.Revalidations.Add(1)
		e.c.cfg.Logger.Info("origin file changed under a partial cached copy: copy dropped, its readers get an I/O error",
			"key", e.key.String(), "change", why)
		e.spoil(err)
	}
	e.ofMu.Lock()
	e.opening = nil
	if err == nil {
		if e.ctx.Err() != nil {
			// The entry finished while the open was under way.
			of.Close()
			of, err = nil, e.ctx.Err()
		} else {
			e.of = of
		}
	}
	op.of, op.err = of, err
	e.ofMu.Unlock()
	close(op.done)
}

// infoNow is the file's metadata with Cached set when every block is
// present.
func (e *entry) infoNow() origin.FileInfo {
	fi := e.info
	if e.complete() {
		fi.Cached = e.created
	}
	return fi
}

// complete reports whether every block is present. Lock order: Cache.mu may
// be held; e.mu is taken here.
func (e *entry) complete() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.st != nil && e.st.complete()
}

// completeSoon reports whether every block is present, waiting for the
// fetches of the missing ones when each has one that has landed (a reader
// already had the last bytes: the block is on its way to the disk).
func (e *entry) completeSoon(ctx context.Context) bool {
	e.mu.Lock()
	var wait []*fetch
	for b := e.st.present.NextClear(0); b >= 0 && b < e.nblocks; b = e.st.present.NextClear(b + 1) {
		f := e.fetches[b]
		if f == nil || !f.landed() {
			e.mu.Unlock()
			return false
		}
		wait = append(wait, f)
	}
	e.mu.Unlock()
	for _, f := range wait {
		select {
		case <-f.done:
		case <-ctx.Done():
			return false
		}
	}
	return e.complete()
}

func (e *entry) blockRange(b int) (off, n int64) {
	bs := e.c.cfg.BlockSize
	off = int64(b) * bs
	n = bs
	if off+n > e.size {
		n = e.size - off
	}
	return off, n
}

// syncJob is what one group sync (Cache.syncDirty) takes from an entry:
// the blocks written since the last one, whether CRCs were learnt, and
// the access records of closed handles.
type syncJob struct {
	e      *entry
	blocks []int
	fresh  bool
	recs   []sidecar.Access
}

// takeWritten moves the blocks written since the last sync into j.
func (e *entry) takeWritten(j *syncJob) {
	e.mu.Lock()
	defer e.mu.Unlock()
	j.blocks = e.unsynced
	e.unsynced = nil
	if e.checks != nil {
		j.fresh = e.checks.TakeLearnt()
	}
}

// record puts what j made durable into the sidecar and writes it, if
// anything changed. The blocks of j are durable (the group sync synced
// their file system, or their file, after they were written).
// MUST be called with syncMu held.
func (e *entry) recordLocked(j *syncJob) {
	if e.side == nil {
		return
	}
	// Access records alone (a hit) may wait (kept.go).
	changed := e.sideChanged || len(j.blocks) > 0 || j.fresh
	accesses := len(j.recs) > 0 || e.recsDeferred.Load()
	e.sideChanged = false
	e.mu.Lock()
	for _, b := range j.blocks {
		if !e.st.has(b) {
			continue // dropped since (failed its check)
		}
		e.side.Durable.Set(b)
		if _, n := e.blockRange(b); e.blockSums[b].Len == n {
			e.side.SetBlockCRC(b, e.blockSums[b].CRC32C)
		}
	}
	if j.fresh {
		// CRCs of legacy blocks, learnt when they were read back.
		for b := 0; b < e.nblocks; b++ {
			if crc, known := e.checks.Known(b); known && e.side.Durable.Test(b) && !e.side.CRCKnown.Test(b) {
				e.side.SetBlockCRC(b, crc)
			}
		}
	}
	e.mu.Unlock()
	for _, r := range j.recs {
		e.side.AddRecord(r)
		e.side.AccessCount++
		if r.Close.After(e.side.LastAccess) {
			e.side.LastAccess = r.Close
		}
	}
	switch {
	case !changed && !accesses:
	case !changed && e.c.deferAccess(e):
		e.recsDeferred.Store(true)
	default:
		e.writeSidecarLocked()
	}
}

// writeSidecarLocked replaces the sidecar on disk with e.side, in place
// (disk.WriteFileInPlace: its CRC32C guards against a torn write). MUST be
// called with syncMu held.
func (e *entry) writeSidecarLocked() {
	e.recsDeferred.Store(false)
	if e.gone || !e.c.disks[e.disk].up() || e.spoilErr() != nil {
		return // the copy was forgotten (evicted, disk taken out, file changed)
	}
	c := e.c
	p := c.metaPath(e.key)
	b := e.side.Marshal()
	err := disk.WriteFileInPlace(c.cfg.FS, p, b, e.sideLen)
	if errors.Is(err, fs.ErrNotExist) {
		// A new copy's first sidecar.
		if err = c.cfg.FS.MkdirAll(filepath.Dir(p), 0o755); err == nil {
			err = disk.WriteFileInPlace(c.cfg.FS, p, b, 0)
		}
	}
	if err != nil {
		e.sideLen = -1 // not known any more
		c.stats.SyncErrors.Add(1)
		c.warn("sidecar write failed", "key", e.key.String(), "err", err)
		return
	}
	e.sideLen = len(b)
	e.sideWritten = c.cfg.now()
}

// retire runs once e has no client and lingers no more: its fetches stop
// (their disk writes end), and with closeData its data file is closed, as
// the group sync needs no descriptor of it (disk.SyncFSer). Its state
// stays in memory until the group sync has made it durable; an open
// meanwhile takes it back (init reopens the data file). Only local work:
// opens of the key wait for it.
func (e *entry) retire(closeData bool) {
	e.cancel()
	e.fetchWG.Wait()
	if e.initOK {
		if closeData && e.data != nil {
			e.data.Close()
			e.data = nil
		}
		e.c.stats.OpenFiles.Add(-1)
	}
}

// reopenData opens the data file of e, taken back after retire closed it,
// if the copy is still the one e describes: its disk in service and the
// catalogue placing it there (a kept entry may be minutes old), a file of
// the cache's mode and of its size.
func (e *entry) reopenData() (*blockstore.File, error) {
	c := e.c
	d := c.disks[e.disk]
	if !d.up() {
		return nil, fmt.Errorf("its data disk %s is out of service", d.root)
	}
	if id, known := c.catalog.DiskOf(e.key); !known || id != e.disk {
		return nil, errors.New("the catalogue no longer holds it there")
	}
	return c.openCopy(d, e.key, e.size)
}

// openCopy opens the data file of k on d, a copy of size bytes: a link
// planted in its place is removed and counted, a disk failure reported,
// a file others may write dropped (errForeignWritable), one of another
// size refused.
func (c *Cache) openCopy(d *dataDisk, k Key, size int64) (*blockstore.File, error) {
	p := d.path(k)
	f, err := c.openData(d, p, os.O_RDWR)
	if err != nil {
		if !outOfFDs(err) {
			c.diskError(d.id, err)
		}
		if errors.Is(err, disk.ErrLink) {
			c.linkFound(p, err)
		}
		return nil, err
	}
	switch {
	case f.Mode().Perm()&0o022 != 0:
		f.Close()
		c.dropForeignWritable(k, "data file", f.Mode())
		return nil, errForeignWritable
	case f.Size() != size:
		f.Close()
		return nil, fmt.Errorf("data file size %d does not match the cached copy's %d", f.Size(), size)
	}
	return f, nil
}

// finish ends an entry that will not be taken back (spoiled, or whose
// open failed): fetches stopped, data file closed. Its copy is gone or
// never was: nothing is recorded.
func (e *entry) finish() {
	e.cancel()
	e.fetchWG.Wait()
	if e.initOK && e.data != nil {
		e.data.Close()
		e.data = nil
		e.c.stats.OpenFiles.Add(-1)
	}
}

// closeOrigin closes the origin file (a round trip to a possibly distant
// origin) after the entry has finished.
func (e *entry) closeOrigin() {
	e.ofMu.Lock()
	of := e.of
	e.of = nil
	e.ofMu.Unlock()
	if of != nil {
		of.Close()
	}
}

// completeInBackground fetches every missing block after the last client has
// gone, then releases the entry.
func (e *entry) completeInBackground() {
	for e.ctx.Err() == nil {
		e.mu.Lock()
		var f *fetch
		if b := e.st.nextMissing(0); b >= 0 {
			e.st.started(b, true)
			f = e.fetchLocked(b, true, blockstore.Internal)
		} else {
			for _, x := range e.fetches {
				f = x
				break
			}
		}
		e.mu.Unlock()
		if f == nil {
			break
		}
		<-f.done
		if f.err != nil {
			e.c.cfg.Logger.Warn("background completion stopped", "key", e.key.String(), "err", f.err)
			break
		}
	}
	e.c.release(e, sidecar.Access{}, false)
}

// readAheadLocked starts the read-ahead that h's reader reaching block b
// calls for. Every read path (stream, vector read, sendfile) comes here;
// e.st starts none for a reader that may not start downloads (NoFetch).
// MUST be called with e.mu held.
func (e *entry) readAheadLocked(h *handle, b int) {
	e.startAheadLocked(e.st.reached(b, !h.req.NoFetch))
}

// startAheadLocked starts the read-ahead fetches e.st decided on; once the
// entry is finishing they are handed back instead.
// MUST be called with e.mu held.
func (e *entry) startAheadLocked(blocks []int) {
	for _, b := range blocks {
		if e.ctx.Err() != nil {
			e.st.finished(b, true, false, true)
			continue
		}
		e.fetchLocked(b, true, blockstore.Internal)
	}
}

// stream implements File.Stream for handle h.
func (e *entry) stream(ctx context.Context, h *handle, off, n int64, out func([]byte) error) (int64, error) {
	if off < 0 || n < 0 {
		return 0, fmt.Errorf("read %d@%d of %s: %w", n, off, e.key, origin.ErrInvalid)
	}
	end := off + n
	if end > e.size {
		end = e.size
	}
	var done int64
	retries := 0
	pos := off
	bs := e.c.cfg.BlockSize
	if !h.req.NoFetch {
		e.fetchRange(off, end, h.reader)
	}
	for pos < end {
		if err := e.spoilErr(); err != nil {
			return done, err
		}
		b := int(pos / bs)
		bstart, blen := e.blockRange(b)
		bend := bstart + blen
		segEnd := min(end, bend)

		e.mu.Lock()
		if e.st.has(b) {
			// Extend over following present blocks to read in large chunks.
			for segEnd < end && e.st.has(int(segEnd/bs)) {
				_, l := e.blockRange(int(segEnd / bs))
				segEnd = min(end, segEnd+l)
			}
			e.readAheadLocked(h, int((segEnd-1)/bs))
			e.mu.Unlock()
			k, err := e.readPresent(ctx, h.reader, pos, segEnd-pos, out)
			done += k
			h.hit.Add(k)
			e.c.stats.BytesHit.Add(k)
			if errors.Is(err, errBadBlock) {
				pos += k
				continue // dropped: fetched again (or refused to a NoFetch reader)
			}
			if errors.Is(err, errDiskRead) && !h.req.NoFetch {
				// The disk failed under a cached block: the client gets
				// the rest of the range from the origin, not an error.
				e.c.warn("cache read failed, serving from origin", "key", e.key.String(), "err", err)
				var b int64
				b, err = e.bypass(ctx, pos+k, segEnd-pos-k, out)
				done += b
				h.bypassed.Add(b)
				e.c.stats.BytesBypassed.Add(b)
			}
			if err != nil {
				return done, err
			}
			pos = segEnd
			continue
		}
		if f := e.fetches[b]; f == nil && h.req.NoFetch {
			// Joining another client's download is fine; starting one is
			// not.
			e.mu.Unlock()
			return done, notCached(e.key, fmt.Sprintf("block %d is missing", b))
		}
		e.mu.Unlock()
		// The client must have taken what was sent before this reader
		// holds a block being fetched (backend.Pacer): a client that stops
		// reading holds none of the cache's RAM.
		paced, err := backend.Pace(ctx)
		if err != nil {
			return done, err
		}
		e.mu.Lock()
		if e.st.has(b) {
			e.mu.Unlock()
			paced()
			continue // arrived meanwhile: read it from RAM
		}
		f := e.fetches[b]
		if f != nil && f.failed.Load() != nil {
			// Failed but not yet unregistered: never joined; this reader
			// starts a new fetch (takes the turn).
			e.st.abandon(b)
			f = nil
		}
		switch {
		case f == nil && h.req.NoFetch:
			e.mu.Unlock()
			paced()
			return done, notCached(e.key, fmt.Sprintf("block %d is missing", b))
		case f == nil:
			e.st.claim(b)
			f = e.fetchLocked(b, false, h.reader)
		default:
			f.hurryLocked()
			e.c.stats.CoalescedWaits.Add(1)
			e.st.join(b)
		}
		f.holdLocked(h.reader)
		e.readAheadLocked(h, b)
		e.mu.Unlock()

		k, err := e.streamFromFetch(ctx, h, f, pos, segEnd, out)
		paced()
		done += k
		pos += k
		if err != nil {
			var re *retryErr
			if !errors.As(err, &re) {
				return done, err
			}
			if retries >= e.c.cfg.FetchRetries {
				return done, re.cause
			}
			retries++ // take the turn: the next pass starts a new fetch
		}
	}
	return done, nil
}

// maxReadBlocks is how many missing blocks of one read are requested from
// the origin at once, up front.
const maxReadBlocks = 64

// fetchRange starts the fetch of every missing block of [off, end) (up to
// maxReadBlocks) before the read waits for the first: a 4 MiB read of a cold
// file then costs one round trip to the origin, not one per block.
func (e *entry) fetchRange(off, end int64, r blockstore.Reader) {
	if off >= end {
		return
	}
	bs := e.c.cfg.BlockSize
	first, last := int(off/bs), int((end-1)/bs)
	last = min(last, first+maxReadBlocks-1)
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, b := range e.st.missing(first, last, maxReadBlocks) {
		e.fetchLocked(b, false, r)
	}
	// Blocks of the range already asked for as read-ahead: the client
	// waits for them now.
	for b := first; b <= last; b++ {
		if f := e.fetches[b]; f != nil {
			f.hurryLocked()
		}
	}
}

// retryErr marks a failed fetch that a reader may retry; cause is what the
// client sees if it may not.
type retryErr struct{ cause error }

func (r *retryErr) Error() string { return r.cause.Error() }
func (r *retryErr) Unwrap() error { return r.cause }

// errDiskRead marks a failed read of a data file (as opposed to the
// consumer's error).
var errDiskRead = errors.New("cache disk read failed")

// bypass reads [off, off+n) from the origin straight to fn, not cached.
func (e *entry) bypass(ctx context.Context, off, n int64, fn func([]byte) error) (int64, error) {
	of, err := e.originFile(ctx)
	if err != nil {
		return 0, err
	}
	if e.mutable {
		// Read from the origin as it is now, as a fetch: confirmed the
		// version opened before the last byte goes (deliver.go).
		fn = e.confirmedAtEnd(ctx, off, off+n, false /* fetched */, fn)
	}
	bp := e.c.bufs.Get().(*[]byte)
	defer e.c.bufs.Put(bp)
	done, err := readat.Stream(ctx, readat.WithContext(ctx, of, e.c.cfg.OriginTimeout), *bp, off, n, fn)
	if err == nil && done < n {
		err = &readat.ReadError{Off: off + done, Err: io.ErrUnexpectedEOF}
	}
	var re *readat.ReadError
	if errors.As(err, &re) {
		return done, fmt.Errorf("read %s at %d from origin: %w", e.key, re.Off, re.Err)
	}
	return done, err
}

// publishSums makes side's file checksum, if known, what checksum queries
// of the open entry answer.
func (e *entry) publishSums(side *sidecar.Info) {
	if side.ChecksumState != sidecar.ChecksumNone {
		e.sums.Store(&checksum.Sums{Adler32: side.Adler32, CRC32C: side.CRC32C, Len: side.FileSize})
	}
}
