package cache

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hepcache/hepcache/disk"
	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/blockstore"
	"github.com/hepcache/hepcache/internal/catalog"
	"github.com/hepcache/hepcache/internal/checksum"
	"github.com/hepcache/hepcache/internal/fetchwindow"
	"github.com/hepcache/hepcache/internal/membudget"
	"github.com/hepcache/hepcache/internal/policy"
	"github.com/hepcache/hepcache/internal/sidecar"
	"github.com/hepcache/hepcache/origin"
)

// maxDiskWriters is how many blocks are written to disk at once. Direct
// writes of whole blocks are few and quick; more writers only contend for
// the file's inode lock (ext4 takes it exclusively for a direct write into
// a hole) and hand processors between threads.
const maxDiskWriters = 2

// readBufSize is the chunk in which cached data is read and handed to the
// front ends.
const readBufSize = 256 << 10

// Key names a cached file: the canonical origin URL and the path there.
type Key = catalog.Key

// Cache is the block cache. It implements backend.Backend.
type Cache struct {
	cfg    Config
	budget *membudget.Budget
	// windows size the bytes in flight per origin (fetchwindow), under
	// FetchMemory for all origins together.
	windows *fetchwindow.Set
	stats   Stats
	// store holds the blocks in flight and a RAM cache of blocks in one
	// arena, and does the data files' direct I/O (package blockstore).
	store *blockstore.Store
	// small hold the small blocks, a store per size class (smallstore.go);
	// none when blocks are small themselves.
	small []*blockstore.Store
	// direct is each data disk's direct I/O state, full until when it is
	// taken as full (diskio.go).
	direct []atomic.Int32
	full   []atomic.Int64
	// readers numbers the handles for the RAM cache (blockstore.Reader).
	readers atomic.Uint64
	// bufs holds buffers for reads that bypass the cache and for
	// checksumming files.
	bufs sync.Pool
	// diskWrites runs the blocks' writes, a few at once: dozens of writers
	// on one file make ext4 ten times slower than a few (inode lock
	// contention).
	diskWrites *diskQueue
	// listings holds a token per directory listing in progress, at most
	// MaxListings (listing.go).
	listings chan struct{}

	// mu protects files, closing and dirty.
	mu sync.Mutex
	// files holds the entries with at least one client (or still finishing
	// a download after close).
	files map[Key]*entry
	// closing has a channel per key whose entry is writing its final
	// sidecar; a new open of that key waits for it.
	closing map[Key]chan struct{}
	// lingerq lists the lingering entries, oldest first (linger.go).
	lingerq lingerQueue
	// keptq lists the kept entries, least recently closed first (kept.go).
	keptq lingerQueue
	// dirty holds entries whose state is not all durable yet: written but
	// unsynced blocks, access records, a checksum, a retire.
	dirty map[*entry]struct{}

	// catalog is the catalogue of cached files (package catalog): what
	// each holds, in LRU order, quotas, pins, per-directory statistics.
	// loadCancel stops its loading (load.go).
	catalog    *catalog.Catalog
	loadCancel context.CancelFunc
	// purgeWaited: a purge was put off until the catalogue is loaded
	// (logged once).
	purgeWaited atomic.Bool
	// sweeping is the data file the catalogue's walk is removing (no
	// sidecar: left by a crash), closed when it is done; opens of its
	// key wait (load.go). Guarded by mu.
	sweeping  string
	sweepDone chan struct{}
	// disks hold the data files (disks.go); the catalogue knows which file
	// is on which. diskMu serialises their checks (CheckDisks).
	disks  []*dataDisk
	diskMu sync.Mutex
	// confined is the default file system (closed to links), released at
	// Close; nil when Config.FS was given.
	confined *disk.Confined
	// rules are the space settings in force (SetSpace replaces them).
	rules atomic.Pointer[spaceRules]
	// purgeKick wakes the purger; purgeMu serialises purges.
	purgeKick   chan struct{}
	purgeMu     sync.Mutex
	sinceStatfs atomic.Int64
	// lastNoSpaceKick (unix ns) rate-limits the purges that full disks wake.
	lastNoSpaceKick atomic.Int64

	// ctx is cancelled by Close; every entry's fetches derive from it.
	ctx    context.Context
	cancel context.CancelFunc
	// bg tracks background entry work: verification, completion after
	// close; retires the retires of entries (retireLocked).
	bg, retires sync.WaitGroup
	// syncKick asks the syncer for a pass now (a file completed); syncMu
	// serialises passes.
	syncKick chan struct{}
	syncMu   sync.Mutex

	warns rateLimitedWarn
	// digests are the whole-file digest computations in progress (digest.go).
	digests digestFlights

	shutdownCh chan struct{}
	wg         sync.WaitGroup
	closeOnce  sync.Once
}

var _ backend.Backend = (*Cache)(nil)

// New creates a cache over cfg.Dir, creating the directory if needed.
func New(cfg *Config) (_ *Cache, err error) {
	c := *cfg
	var confined *disk.Confined
	if c.FS == nil && c.Dir != "" {
		// The cache's own trees, closed to symbolic links (disk.Confined).
		// A data directory that is not there is not created: its disk is
		// out of service until it is mounted (disks.go).
		fsys, cerr := disk.NewConfined(append([]string{c.Dir}, existingDirs(c.DataDirs)...)...)
		if cerr != nil {
			return nil, fmt.Errorf("cache dir: %w", cerr)
		}
		c.FS, confined = fsys, fsys
		defer func() {
			if err != nil {
				confined.Close() // its open directories would keep a disk busy
			}
		}()
	}
	c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("cache config: %w", err)
	}
	for _, d := range []string{c.Dir, filepath.Join(c.Dir, "meta")} {
		if err := c.FS.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create cache dir: %w", err)
		}
	}
	disks, err := openDisks(&c)
	if err != nil {
		return nil, err
	}
	store, small, err := newStores(&c)
	if err != nil {
		return nil, err
	}
	ca := &Cache{
		store:      store,
		small:      small,
		direct:     make([]atomic.Int32, len(disks)),
		full:       make([]atomic.Int64, len(disks)),
		cfg:        c,
		budget:     membudget.New(c.FetchMemory, c.FetchMemory/4),
		windows:    fetchwindow.NewSet(c.FetchMemory, initialWindow, nil),
		files:      map[Key]*entry{},
		closing:    map[Key]chan struct{}{},
		dirty:      map[*entry]struct{}{},
		catalog:    catalog.New(catalog.Config{Rules: rulesOf(&c).catalog(), DirStatsDepth: c.DirStatsDepth, DirStatsMax: c.DirStatsMax}),
		diskWrites: newDiskQueue(maxDiskWriters),
		listings:   make(chan struct{}, c.MaxListings),
		purgeKick:  make(chan struct{}, 1),
		syncKick:   make(chan struct{}, 1),
		shutdownCh: make(chan struct{}),
		disks:      disks,
		confined:   confined,
	}
	for _, d := range disks {
		if why := d.down.Load(); why != nil {
			c.Logger.Error("data disk out of service from the start: serving from the other disks and the origin until it is mounted (checked every "+diskCheckInterval.String()+" and on reload)",
				"dir", d.root, "reason", *why)
		}
	}
	for _, d := range disks { // measure them; take out any that is already failing
		if d.up() {
			if why, absent := ca.checkDisk(d); why != "" {
				ca.takeOut(d, why, absent)
			}
		}
	}
	ca.rules.Store(rulesOf(&c))
	ca.ctx, ca.cancel = context.WithCancel(context.Background())
	ca.Usage() // the capacity share quotas refer to
	// The catalogue loads in the background: serving starts now (load.go).
	ca.startLoad()
	ca.bufs.New = func() any { b := make([]byte, readBufSize); return &b }
	ca.wg.Add(3)
	go ca.syncLoop()
	go ca.purgeLoop()
	go ca.diskLoop()
	if w := ca.newPressureWatch(); w != nil && !c.NoPressureWatch {
		ca.wg.Add(1)
		go ca.pressureLoop(w)
	}
	ca.kickPurge() // the cache may be over its watermark already
	return ca, nil
}

// Stats returns the live counters.
func (c *Cache) Stats() *Stats { return &c.stats }

// FetchInFlight returns the bytes fetched or being fetched from origins
// that are not yet on disk: the fetch memory in use, by design.
func (c *Cache) FetchInFlight() int64 { return c.budget.Used() }

// FetchWindows returns each origin's fetch window.
func (c *Cache) FetchWindows() []fetchwindow.Stat { return c.windows.Stats() }

// Config returns the effective configuration (defaults filled in).
func (c *Cache) Config() Config { return c.cfg }

// Close stops background work and syncs every open file. Reads of files
// still open by clients fail afterwards: callers close the front ends
// first.
func (c *Cache) Close() error {
	c.closeOnce.Do(func() {
		close(c.shutdownCh)
		c.stopLoad()
		c.wg.Wait()
		c.endLingering()
		c.retires.Wait()
		c.dirtyKept()
		c.syncDirty()
		// Stop downloads nobody waits for (completion after close,
		// verification), then record what they left.
		c.cancel()
		c.bg.Wait()
		c.syncDirty()
		c.writeSnapshot()
		for _, s := range c.stores() {
			s.Close()
		}
		if c.confined != nil {
			c.confined.Close()
		}
	})
	return nil
}

// minSyncGap is the least time between two syncs that completed files
// ask for (syncKick): files completing at a high rate are made durable a
// batch at a time, one file system sync for many files.
const minSyncGap = 100 * time.Millisecond

// syncLoop makes written blocks durable every SyncInterval, and soon after
// a file completes.
func (c *Cache) syncLoop() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.SyncInterval)
	defer t.Stop()
	var last time.Time
	for {
		select {
		case <-c.shutdownCh:
			return
		case <-t.C:
		case <-c.syncKick:
			if wait := minSyncGap - time.Since(last); wait > 0 {
				select {
				case <-c.shutdownCh:
					return
				case <-time.After(wait):
				}
			}
		}
		last = time.Now()
		c.syncDirty()
	}
}

// markDirty puts e in the next group sync.
func (c *Cache) markDirty(e *entry) {
	c.mu.Lock()
	c.dirty[e] = struct{}{}
	c.mu.Unlock()
}

// kickSync asks for a sync pass soon (minSyncGap).
func (c *Cache) kickSync() {
	select {
	case c.syncKick <- struct{}{}:
	default:
	}
}

// syncDirty is the group sync: it makes what every dirty entry wrote
// durable at once (a syncfs per data disk where the file system allows
// it, else an fdatasync per file), then records it in their sidecars,
// written in place; entries retired meanwhile are let go. A block's bit is
// set only after a sync that started after its write returned.
func (c *Cache) syncDirty() {
	c.syncMu.Lock()
	defer c.syncMu.Unlock()
	c.mu.Lock()
	jobs := make([]syncJob, 0, len(c.dirty))
	for e := range c.dirty {
		jobs = append(jobs, syncJob{e: e, recs: e.pendingRecords})
		e.pendingRecords = nil
	}
	clear(c.dirty)
	c.mu.Unlock()
	if len(jobs) == 0 {
		return
	}
	disks := map[int]bool{}
	for i := range jobs {
		jobs[i].e.takeWritten(&jobs[i])
		if len(jobs[i].blocks) > 0 {
			disks[jobs[i].e.disk] = true
		}
	}
	fail := func(j *syncJob, err error) {
		// The blocks stay readable from memory for this run but are not
		// recorded: after a restart they are fetched again.
		c.stats.SyncErrors.Add(1)
		c.warn("sync failed, blocks not recorded", "key", j.e.key.String(), "blocks", len(j.blocks), "err", err)
		j.blocks = nil
	}
	if sfs, ok := c.cfg.FS.(disk.SyncFSer); ok {
		failed := map[int]error{}
		for d := range disks {
			if err := sfs.SyncFS(c.disks[d].root); err != nil {
				failed[d] = err
			}
		}
		for i := range jobs {
			if err := failed[jobs[i].e.disk]; err != nil && len(jobs[i].blocks) > 0 {
				fail(&jobs[i], err)
			}
		}
	} else {
		for i := range jobs {
			if j := &jobs[i]; len(j.blocks) > 0 {
				if err := j.e.data.Sync(); err != nil {
					fail(j, err)
				}
			}
		}
	}
	for i := range jobs {
		e := jobs[i].e
		e.syncMu.Lock()
		e.recordLocked(&jobs[i])
		e.syncMu.Unlock()
	}
	// Retired entries whose state is now durable are kept, or leave the
	// cache's memory (an open finds their sidecar); either way without
	// their data file.
	var closeData []*blockstore.File
	c.mu.Lock()
	for _, j := range jobs {
		e := j.e
		if _, again := c.dirty[e]; again || !e.retired || e.refs > 0 || c.files[e.key] != e {
			continue
		}
		switch {
		case c.keepableLocked(e):
			c.keepLocked(e)
		case e.recsDeferred.Load():
			c.dirty[e] = struct{}{} // the next sync writes its records
			continue
		default:
			c.forgetLocked(e)
		}
		if e.data != nil {
			closeData = append(closeData, e.data)
			e.data = nil
		}
	}
	c.mu.Unlock()
	for _, f := range closeData {
		f.Close()
	}
	c.trimKept()
}

// key resolves the request's origin and returns the cache key.
// The namespace rules are applied to the logical path the client asked for;
// the key holds the physical path after the name mapping.
func (c *Cache) key(ctx context.Context, req backend.Request) (origin.Origin, Key, policy.Decision, error) {
	lp, err := cleanPath(req.Path)
	if err != nil {
		return nil, Key{}, policy.Decision{}, err
	}
	d := c.cfg.Policy.Decide(lp)
	if d.Action == policy.Deny {
		return nil, Key{}, d, fmt.Errorf("%s: denied by %s: %w", lp, d.Rule, backend.ErrForbidden)
	}
	pp, mappedOrigin := c.cfg.Policy.Map(lp)
	ou := req.Origin
	if ou == "" {
		ou = mappedOrigin
	}
	o, err := c.cfg.Origins.Resolve(ctx, ou)
	if err != nil {
		return nil, Key{}, d, err
	}
	return o, Key{Origin: o.String(), Path: pp}, d, nil
}

// ErrNotCached is wrapped (with backend.ErrForbidden) by reads refused
// because they need the origin and the request has NoFetch set.
var ErrNotCached = errors.New("cache: not cached")

func notCached(k Key, why string) error {
	return fmt.Errorf("%s is not in the cache (%s) and this client may only read cached data: %w: %w", k, why, ErrNotCached, backend.ErrForbidden)
}

// cleanPath returns the canonical absolute form of p, refusing what could
// escape the namespace.
func cleanPath(p string) (string, error) {
	if p == "" || strings.IndexByte(p, 0) >= 0 || len(p) > 4096 {
		return "", fmt.Errorf("path %q: %w", p, backend.ErrInvalidPath)
	}
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "", fmt.Errorf("path %q: '..' not allowed: %w", p, backend.ErrInvalidPath)
		}
	}
	return path.Clean(p), nil
}

// dataPath is where k's data lives: on the disk that holds it (locate),
// or the first disk for a file none holds.
func (c *Cache) dataPath(k Key) string {
	return c.disks[max(c.locate(k), 0)].path(k)
}

func (c *Cache) metaPath(k Key) string { return MetaPath(c.cfg.Dir, k) }

// DataPath is where the data of k lives under cache directory dir.
func DataPath(dir string, k Key) string { return catalog.DataPath(dir, k) }

// MetaPath is where the sidecar of k lives under cache directory dir.
func MetaPath(dir string, k Key) string { return catalog.MetaPath(dir, k) }

// LocalPath returns where the data of a cached file lives on disk.
func (c *Cache) LocalPath(k Key) string { return c.dataPath(k) }

// readSidecar loads the sidecar of k, or returns nil if there is none or it
// does not describe k (a corrupt sidecar is logged and ignored).
func (c *Cache) readSidecar(k Key) *sidecar.Info {
	in, _, _ := c.readSidecarLen(k)
	return in
}

// readSidecarLen is readSidecar, with the sidecar's length in bytes. It
// fails when the sidecar could not be read for want of descriptors
// (descriptors.go): an open must not take the file for a miss then, whose
// new copy would replace the cached one.
func (c *Cache) readSidecarLen(k Key) (*sidecar.Info, int, error) {
	b, mode, err := c.readMeta(c.metaPath(k))
	if outOfFDs(err) {
		return nil, 0, err
	}
	if err == nil && mode.Perm()&0o022 != 0 {
		c.dropForeignWritable(k, "sidecar", mode)
		return nil, 0, nil
	}
	if err != nil {
		if errors.Is(err, disk.ErrLink) {
			c.linkFound(c.metaPath(k), err)
			return nil, 0, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			c.cfg.Logger.Warn("cannot read sidecar", "key", k.String(), "err", err)
		}
		return nil, 0, nil
	}
	in, err := sidecar.Unmarshal(b)
	if err != nil {
		c.cfg.Logger.Warn("ignoring corrupt sidecar", "key", k.String(), "err", err)
		return nil, 0, nil
	}
	if in.Origin != k.Origin || in.Path != k.Path {
		c.cfg.Logger.Warn("ignoring sidecar of another file", "key", k.String(), "has", in.Origin+"/"+in.Path)
		return nil, 0, nil
	}
	return in, len(b), nil
}

// readAll reads the whole file name, and gives its mode.
func readAll(fsys disk.FS, name string) ([]byte, fs.FileMode, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, 0, err
	}
	return b, st.Mode(), nil
}

// errForeignWritable marks a cached copy dropped by dropForeignWritable.
var errForeignWritable = errors.New("cache: file writable by group or others")

// dropForeignWritable forgets the cached copy of k, whose sidecar or data
// file (what) another user may write (mode): the cache writes its files
// 0644, so such a file was changed by someone else, and its bytes or its
// record of them cannot be trusted. The next open fetches the file again
// into a new data file of the cache's own mode.
func (c *Cache) dropForeignWritable(k Key, what string, mode fs.FileMode) {
	c.cfg.Logger.Warn("cached copy dropped: its "+what+" is writable by group or others, so another user could have changed it; fetched again when read",
		"key", k.String(), "mode", mode.Perm().String())
	c.stats.ForeignWritable.Add(1)
	c.cfg.FS.Remove(c.metaPath(k))
	c.cfg.FS.Remove(c.dataPath(k))
}

// Open implements backend.Backend.
func (c *Cache) Open(ctx context.Context, req backend.Request) (backend.File, error) {
	ctx = origin.WithClientToken(ctx, req.OriginToken)
	o, k, d, err := c.key(ctx, req)
	if err != nil {
		c.stats.OpenErrors.Add(1)
		return nil, err
	}
	if d.Action == policy.PassThrough {
		if req.NoFetch {
			c.stats.OpenErrors.Add(1)
			return nil, notCached(k, "it is served from the origin without caching")
		}
		f, err := c.openPassThrough(ctx, o, k, req)
		if err != nil {
			c.stats.OpenErrors.Add(1)
		}
		return f, err
	}
	if re := c.localRedirect(k, req, d); re != nil {
		return nil, re
	}
	if !req.NoFetch && c.overloaded() && !c.heldWhole(k) {
		return nil, c.shed(k) // shed.go
	}
	e, err := c.acquire(ctx, o, k, d.Mutable, req.NoFetch)
	if (errors.Is(err, errNoDisk) || errors.Is(err, errNotOurs)) && !req.NoFetch {
		// Every data disk has failed, or the file's place belongs to
		// another user: serve from the origin uncached.
		return c.openPassThrough(ctx, o, k, req)
	}
	if err != nil {
		c.stats.OpenErrors.Add(1)
		return nil, err
	}
	if req.OriginToken != "" {
		e.clientToken.Store(&req.OriginToken)
	}
	return newHandle(e, req, c.cfg.now()), nil
}

// acquire returns the initialised entry for k with a reference taken.
// With noFetch, a file that is not in the cache is not created (see
// backend.Request.NoFetch).
func (c *Cache) acquire(ctx context.Context, o origin.Origin, k Key, revalidate, noFetch bool) (*entry, error) {
	for {
		c.mu.Lock()
		if ch := c.busyLocked(k); ch != nil {
			c.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		e := c.files[k]
		if e != nil && e.kept && revalidate && !e.mutable {
			// Opened now through a mutable namespace (another name the
			// policy maps onto this file): this open asks the origin,
			// from the sidecar, as a file not kept would.
			c.forgetLocked(e)
			e = nil
		}
		if e == nil {
			e = newEntry(c, o, k)
			c.files[k] = e
		}
		reopened := c.unlingerLocked(e) || c.reviveLocked(e)
		e.refs++
		c.mu.Unlock()
		if reopened {
			c.catalog.Reopened(k, c.cfg.now())
		}
		if err := e.init(ctx, revalidate, noFetch); err != nil {
			c.release(e, sidecar.Access{}, false)
			if errors.Is(err, errRetry) {
				continue
			}
			return nil, err
		}
		return e, nil
	}
}

// busyLocked returns what an open of k waits for first, if anything:
// the removal of its copy (closing), the removal of its data file left
// without a sidecar (the catalogue's sweep), the retire of its entry (its
// fetches stopping). All local work. MUST be called with c.mu held.
func (c *Cache) busyLocked(k Key) <-chan struct{} {
	if ch, ok := c.closing[k]; ok {
		return ch
	}
	if c.sweepDone != nil && c.sweepsLocked(k) {
		return c.sweepDone
	}
	if e := c.files[k]; e != nil && e.finishing != nil {
		return e.finishing
	}
	return nil
}

// errRetry: the entry found could not be taken back (spoiled meanwhile):
// acquire starts again with a fresh one.
var errRetry = errors.New("cache: entry gone, try again")

// release drops a reference; the last one finishes the entry.
func (c *Cache) release(e *entry, rec sidecar.Access, record bool) {
	c.mu.Lock()
	e.refs--
	if record {
		e.pendingRecords = append(e.pendingRecords, rec)
	}
	if e.refs > 0 {
		c.mu.Unlock()
		return
	}
	if e.detached {
		// Spoiled: its key may already belong to a fresh entry, which the
		// index and the closing table now describe.
		c.mu.Unlock()
		c.finishDetached(e)
		return
	}
	if c.cfg.CompleteAfterClose && e.initialized() && !e.complete() && !e.completing && e.spoilErr() == nil {
		// Keep the entry alive (it holds no client) until the download is done.
		e.refs++
		e.completing = true
		c.mu.Unlock()
		c.goBackground(e.completeInBackground)
		return
	}
	if !e.initialized() {
		c.finishLocked(e, false) // its open failed
		return
	}
	if c.lingerLocked(e) {
		c.mu.Unlock()
		c.catalog.Closed(e.key, c.cfg.now())
		c.trimLingering()
		return
	}
	c.retireLocked(e, false)
}

// retireLocked starts the retire of e, which has no client (entry.retire)
// in the background; a new open of its key waits for it, then takes e
// back. closed: the index already recorded the close.
// MUST be called with c.mu held; it unlocks it.
func (c *Cache) retireLocked(e *entry, closed bool) {
	done := make(chan struct{})
	e.finishing = done
	c.mu.Unlock()
	if !closed {
		// The last access is the client's close, not the retire.
		c.catalog.Closed(e.key, c.cfg.now())
	}
	_, syncFS := c.cfg.FS.(disk.SyncFSer)
	c.retires.Add(1)
	go func() {
		defer c.retires.Done()
		e.retire(syncFS)
		c.mu.Lock()
		e.finishing = nil
		e.retired = true
		// The next group sync, soon, records its last blocks and
		// accesses, then lets it go.
		c.dirty[e] = struct{}{}
		c.mu.Unlock()
		close(done)
		c.kickSync()
		e.closeOrigin()
	}()
}

// reviveLocked takes a retired e back for a new client and reports whether
// it was retired. Its data file is reopened by init. MUST be called with
// c.mu held.
func (c *Cache) reviveLocked(e *entry) bool {
	if !e.retired {
		return false
	}
	e.retired = false
	c.unkeepLocked(e)
	e.ctx, e.cancel = context.WithCancel(c.ctx)
	c.stats.OpenFiles.Add(1)
	c.unlingerStateLocked(e)
	return true
}

// finishLocked ends entry e, which has no client and will not be taken
// back (its open failed): a new open of its key waits for it.
// closed: the index already recorded the close.
// MUST be called with c.mu held; it unlocks it.
func (c *Cache) finishLocked(e *entry, closed bool) {
	c.forgetLocked(e)
	done := make(chan struct{})
	c.closing[e.key] = done
	c.mu.Unlock()
	if e.initialized() && !closed {
		// The last access is the client's close, not the background sync.
		c.catalog.Closed(e.key, c.cfg.now())
	}

	// The client does not wait for the final sync: a new open of the key
	// waits on done instead.
	c.goBackground(func() {
		e.finish()
		c.mu.Lock()
		delete(c.closing, e.key)
		delete(c.dirty, e)
		c.mu.Unlock()
		close(done)
		e.closeOrigin()
	})
}

// finishDetached ends a spoiled entry e, which is out of Cache.files and
// has no client, in the background: its key's closing entry belongs to
// the fresh entry, if any.
func (c *Cache) finishDetached(e *entry) {
	c.goBackground(func() {
		e.finish()
		e.closeOrigin()
	})
}

// goBackground runs fn as background work that Close waits for.
func (c *Cache) goBackground(fn func()) {
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		fn()
	}()
}

// Stat implements backend.Backend. A cached file is answered from its
// sidecar without contacting the origin.
func (c *Cache) Stat(ctx context.Context, req backend.Request) (origin.FileInfo, error) {
	ctx = origin.WithClientToken(ctx, req.OriginToken)
	o, k, d, err := c.key(ctx, req)
	if err != nil {
		return origin.FileInfo{}, err
	}
	if d.Action == policy.PassThrough || d.Mutable {
		octx, cancel := context.WithTimeout(ctx, c.cfg.OriginTimeout)
		defer cancel()
		fi, err := o.Stat(octx, k.Path)
		if err != nil && d.Action == policy.Cache && ctx.Err() == nil &&
			(errors.Is(err, origin.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)) {
			// Stale-if-error: the origin cannot be asked, answer with
			// the cached copy that an open would serve.
			if in := c.readSidecar(k); in != nil {
				c.warn("origin unreachable, answering stat from the cached copy", "key", k.String(), "err", err)
				return sidecarInfo(k, in), nil
			}
		}
		return fi, err
	}
	c.mu.Lock()
	e := c.files[k]
	c.mu.Unlock()
	if e != nil && e.initialized() {
		return e.infoNow(), nil
	}
	in := c.readSidecar(k)
	if in != nil && !in.Unconfirmed() {
		return sidecarInfo(k, in), nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.OriginTimeout)
	defer cancel()
	fi, err := o.Stat(ctx, k.Path)
	if in != nil && err != nil && !errors.Is(err, origin.ErrNotFound) {
		// An adopted copy the origin cannot confirm now: what an open
		// would serve.
		return sidecarInfo(k, in), nil
	}
	return fi, err
}

// sidecarInfo is the metadata a sidecar records, with Cached set when the
// copy is complete.
func sidecarInfo(k Key, in *sidecar.Info) origin.FileInfo {
	fi := infoOf(k, in)
	if in.Complete() {
		fi.Cached = in.Created
	}
	return fi
}

// List implements backend.Backend; listings always come from the origin,
// at most MaxListings at once (listing.go).
func (c *Cache) List(ctx context.Context, req backend.Request, withStat bool) ([]origin.FileInfo, error) {
	ctx = origin.WithClientToken(ctx, req.OriginToken)
	o, k, _, err := c.key(ctx, req)
	if err != nil {
		return nil, err
	}
	release, err := c.listSlot(ctx, k)
	if err != nil {
		return nil, err
	}
	defer release()
	ctx, cancel := context.WithTimeout(ctx, c.cfg.OriginTimeout)
	defer cancel()
	return o.List(ctx, k.Path, withStat)
}

// Checksum implements backend.Backend. A complete file is answered from
// its sidecar (checksummed when it completed); otherwise the origin is asked.
func (c *Cache) Checksum(ctx context.Context, req backend.Request, algo string) (string, error) {
	ctx = origin.WithClientToken(ctx, req.OriginToken)
	o, k, d, err := c.key(ctx, req)
	if err != nil {
		return "", err
	}
	algo = strings.ToLower(algo)
	if d.Action == policy.Cache && (algo == "adler32" || algo == "crc32c") {
		if s, ok := c.cachedChecksum(k); ok {
			if algo == "adler32" {
				return fmt.Sprintf("%08x", s.Adler32), nil
			}
			return fmt.Sprintf("%08x", s.CRC32C), nil
		}
	}
	if d.Action == policy.Cache {
		// md5, sha1, sha256, crc32 of a complete copy: from its bytes.
		v, ok, err := c.digest(ctx, o, k, d.Mutable, algo)
		switch {
		case ok:
			return v, nil
		case ctx.Err() != nil:
			return "", err
		case err != nil:
			c.warn("digest of the cached copy failed; asking the origin", "key", k.String(), "algo", algo, "err", err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.OriginTimeout)
	defer cancel()
	return o.Checksum(ctx, k.Path, algo)
}

// cachedChecksum returns the checksums of a complete cached file.
func (c *Cache) cachedChecksum(k Key) (checksum.Sums, bool) {
	c.mu.Lock()
	e := c.files[k]
	c.mu.Unlock()
	if e != nil && e.initialized() {
		if s := e.sums.Load(); s != nil {
			return *s, true
		}
		return checksum.Sums{}, false
	}
	in := c.readSidecar(k)
	if in == nil || !in.Complete() || in.ChecksumState == sidecar.ChecksumNone {
		return checksum.Sums{}, false
	}
	return checksum.Sums{Adler32: in.Adler32, CRC32C: in.CRC32C, Len: in.FileSize}, true
}
