package catalog

import (
	"context"
	"log/slog"
	"sort"
	"sync/atomic"
	"time"

	"github.com/hepcache/hepcache/disk"
)

// loadState is the state of the loading. Its atomics are read without the
// catalogue's lock; the rest is guarded by Catalog.mu.
type loadState struct {
	// loading: the catalogue is not complete yet (purge waits);
	// walking: the walk of the trees runs (walk.go).
	loading, walking atomic.Bool
	// loaded and total count the files loaded and to load (total -1:
	// not known yet, the walk is still listing).
	loaded, total atomic.Int64
	// fromSnapshot: the load reads a snapshot (else the sidecars);
	// approximate: one not written at a clean shutdown (or used since),
	// which the walk corrects.
	fromSnapshot, approximate atomic.Bool
	// ready is closed once the catalogue is complete, done once the walk
	// has ended.
	ready, done chan struct{}

	// active: removals and forgotten disks are recorded, so that the
	// load does not bring back what went meanwhile.
	active     bool
	tombstones map[Key]struct{}
	forgotten  map[int]bool
}

func (l *loadState) init() {
	l.ready, l.done = make(chan struct{}), make(chan struct{})
	close(l.ready)
	close(l.done)
}

// removedLocked records that k left the catalogue while it loads.
func (l *loadState) removedLocked(k Key) {
	if l.active {
		l.tombstones[k] = struct{}{}
	}
}

// forgotLocked records that disk d was forgotten while the catalogue loads.
func (l *loadState) forgotLocked(d int) {
	if l.active {
		l.forgotten[d] = true
	}
}

func (l *loadState) memoryLocked() int64 {
	n := int64(0)
	for k := range l.tombstones {
		n += int64(len(k.Origin)+len(k.Path)) + 48
	}
	return n
}

// Progress is how far the loading has gone.
type Progress struct {
	// Loading: the catalogue is not complete yet; purge waits for it.
	Loading bool
	// Walking: the walk of the cache's trees runs (it completes the
	// catalogue loaded from the sidecars, or checks the one loaded from a
	// snapshot, and removes data files without a sidecar).
	Walking bool
	// Loaded files of Total (-1: not known yet).
	Loaded, Total int64
	// FromSnapshot: the load reads a snapshot, else every sidecar;
	// Approximate: a snapshot not written at a clean shutdown (the cache
	// writes one every few minutes), which the walk corrects: until it
	// has, a file may be elsewhere or hold other bytes than it says.
	FromSnapshot, Approximate bool
}

// Progress returns how far the loading has gone.
func (c *Catalog) Progress() Progress {
	l := &c.load
	return Progress{Loading: l.loading.Load(), Walking: l.walking.Load(),
		Loaded: l.loaded.Load(), Total: l.total.Load(), FromSnapshot: l.fromSnapshot.Load(), Approximate: l.approximate.Load()}
}

// Ready is closed once the catalogue is complete (purge may run).
func (c *Catalog) Ready() <-chan struct{} { return c.load.ready }

// Done is closed once the loading, the walk included, has ended.
func (c *Catalog) Done() <-chan struct{} { return c.load.done }

// Disk is a data disk as the loading sees it.
type Disk struct {
	// Root holds the data files under Root/data.
	Root string
	// Marker is the disk's identity (its marker file's content): a
	// snapshot names the disks by it.
	Marker string
}

// LoadConfig is what loading the catalogue needs from the cache.
type LoadConfig struct {
	// FS is the file system of the cache's trees; Dir the cache directory
	// (the sidecars under Dir/meta, the snapshot Dir/SnapshotName).
	FS  disk.FS
	Dir string
	// Disks are the data disks, by id; Up reports whether disk d is in
	// service now (the load adds no file on a disk out of service: it is
	// taken back with its files when it returns).
	Disks []Disk
	Up    func(d int) bool
	// RemoveData removes data file p of disk d, which has no sidecar
	// (orphan: left by a crash) or is a stale copy of a file another disk
	// holds, unless the cache uses it now. Called from the walk.
	RemoveData func(d int, p string, orphan bool)
	// Note, if set, is called with each sidecar read, from several
	// goroutines at once.
	Note func(p string)
	// Pace, if set, is called between directories of the walk and
	// batches of the snapshot; the load waits while it blocks, and stops
	// if it returns an error.
	Pace func(ctx context.Context) error
	// Workers read sidecars at once. Default 4.
	Workers int
	// Logger receives the progress lines. Default slog.Default().
	Logger *slog.Logger
}

// progressEvery is how often a long load logs its progress.
const progressEvery = 5 * time.Second

// Load starts loading the catalogue in the background and returns at once.
// From the snapshot (snapshot.go) if there is one: written at a clean
// shutdown, it is exact, and first marked used, so that a crash from now
// on leaves it an approximation; written while the cache ran, it is one.
// Then the walk of the cache's trees checks it (walk.go), and corrects an
// approximation. Without a snapshot the walk reads every sidecar, and the
// catalogue is complete (Ready) only when it ends. The catalogue serves
// meanwhile: what the cache opens, closes or removes is recorded and the
// load never undoes it. Cancel ctx to stop the walk (a snapshot's load
// ends first); Done is closed when the load has ended. Call Load once, on
// a new catalogue.
func (c *Catalog) Load(ctx context.Context, cfg LoadConfig) {
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Up == nil {
		cfg.Up = func(int) bool { return true }
	}
	if cfg.RemoveData == nil {
		cfg.RemoveData = func(int, string, bool) {}
	}
	l := &c.load
	c.mu.Lock()
	l.ready, l.done = make(chan struct{}), make(chan struct{})
	l.active = true
	l.tombstones, l.forgotten = map[Key]struct{}{}, map[int]bool{}
	c.mu.Unlock()
	l.loading.Store(true)
	l.walking.Store(true)
	l.total.Store(-1)
	snap, why := openSnapshot(cfg.FS, cfg.Dir, cfg.Disks)
	var since time.Time // sidecars changed since are read again
	switch {
	case snap != nil && snap.clean:
		l.fromSnapshot.Store(true)
		l.total.Store(int64(snap.items))
		cfg.Logger.Info("cache index loading from its snapshot in the background; serving meanwhile", "files", snap.items)
	case snap != nil:
		l.fromSnapshot.Store(true)
		l.approximate.Store(true)
		l.total.Store(int64(snap.items))
		// Its time is when its writing began: a sidecar written since,
		// or in the same second, is read again.
		since = snap.written.Add(-time.Second)
		cfg.Logger.Info("cache index loading from its snapshot in the background; serving meanwhile (the last run did not stop cleanly: the sidecars changed since it was written are read again)",
			"files", snap.items, "written", snap.written.Round(time.Second))
	default:
		cfg.Logger.Info("cache index loading from the sidecars in the background; serving meanwhile (purge waits for it)", "why", why)
	}
	go func() {
		start := time.Now()
		defer close(l.done)
		complete := false
		if snap != nil {
			err := c.loadSnapshot(ctx, snap, &cfg)
			snap.close()
			if err == nil {
				c.loaded(&cfg, start, "snapshot")
				complete = true
			} else {
				cfg.Logger.Warn("cache index snapshot unusable: loading the rest from the sidecars", "err", err)
				l.fromSnapshot.Store(false)
				l.total.Store(-1)
			}
		}
		res := c.walk(ctx, &cfg, complete, since)
		c.settle()
		if res.complete {
			res.forgotten = c.sweepUnseen()
		}
		c.mu.Lock()
		l.active = false
		l.tombstones, l.forgotten = nil, nil
		c.mu.Unlock()
		l.walking.Store(false)
		if !complete && ctx.Err() == nil {
			c.loaded(&cfg, start, "sidecars")
		}
		res.log(cfg.Logger, time.Since(start), complete)
	}()
}

// loaded marks the catalogue complete.
func (c *Catalog) loaded(cfg *LoadConfig, start time.Time, from string) {
	files, bytes := c.Totals()
	c.load.loading.Store(false)
	close(c.load.ready)
	cfg.Logger.Info("cache index loaded", "from", from, "files", files, "bytes", bytes,
		"took", time.Since(start).Round(time.Millisecond), "index_bytes", c.MemoryBytes())
}

// addLoadedLocked adds a file found by the load unless it is known, was
// removed or its disk forgotten meanwhile, or its disk is out of service:
// at the back of the LRU list (a snapshot's, in order) or on the pending
// list (the walk's, put in order by settle).
func (c *Catalog) addLoadedLocked(k Key, bytes int64, access uint32, d int, verified, pending bool, up func(int) bool) bool {
	if _, gone := c.load.tombstones[k]; gone || c.load.forgotten[d] || !up(d) || c.findLocked(k) != none {
		return false
	}
	var flags uint8
	if verified {
		flags = flagVerified
	}
	c.addLocked(k, bytes, access, d, flags, !pending, pending)
	return true
}

// Record describes a file to add to the catalogue (Adopt).
type Record struct {
	Key        Key
	Bytes      int64
	LastAccess time.Time
	Disk       int
}

// Adopt adds files found on a data disk taken back into service, in LRU
// order among the others; files already catalogued are left as they are.
// It returns how many it added.
func (c *Catalog) Adopt(recs []Record) int {
	n := 0
	c.mu.Lock()
	for _, r := range recs {
		if c.findLocked(r.Key) == none {
			c.addLocked(r.Key, r.Bytes, unixSeconds(r.LastAccess), r.Disk, flagVerified, false, true)
			n++
		}
	}
	c.mu.Unlock()
	c.settle()
	return n
}

// settle puts the pending items in LRU order among the others: sorted by
// last access outside the lock, then merged into the LRU list from its
// tail, O(files) under the lock.
func (c *Catalog) settle() {
	type rec struct {
		slot   int32
		access uint32
	}
	c.mu.Lock()
	var recs []rec
	for i := c.pending.head; i != none; i = c.at(i).next {
		recs = append(recs, rec{i, c.at(i).access})
	}
	c.mu.Unlock()
	if len(recs) == 0 {
		return
	}
	sort.Slice(recs, func(a, b int) bool { return recs[a].access < recs[b].access })
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.lru.tail
	for _, r := range recs {
		it := c.at(r.slot)
		// Touched since (now in the LRU list), or removed. (A slot
		// reused meanwhile by a new pending item is placed by the access
		// read before: approximately.)
		if it.flags&flagLive == 0 || it.flags&flagPending == 0 {
			continue
		}
		c.unlink(&c.pending, r.slot)
		it.flags &^= flagPending
		// Past the items older than it: of one second (the items' time
		// unit), what the cache touched since the start is the more
		// recent.
		for cur != none && c.at(cur).access < it.access {
			cur = c.at(cur).prev
		}
		if cur == none {
			c.pushFront(&c.lru, r.slot)
			continue
		}
		// After cur, towards the tail.
		ci := c.at(cur)
		it.prev, it.next = cur, ci.next
		if ci.next != none {
			c.at(ci.next).prev = r.slot
		} else {
			c.lru.tail = r.slot
		}
		ci.next = r.slot
	}
	// Items the walk added between the two locks (Adopt runs while it
	// does) stay pending for its own settle.
	if len(c.groups) > 0 {
		c.regroupLocked(false)
	}
}

// sweepUnseen removes the items of a snapshot that the walk did not find
// (their sidecars were removed while the cache was stopped), unless the
// cache opened them since, and returns how many.
func (c *Catalog) sweepUnseen() int {
	n := 0
	for start := int32(0); ; start += pageSize {
		c.mu.Lock()
		if start >= c.slots {
			c.mu.Unlock()
			return n
		}
		end := min(start+pageSize, c.slots)
		for i := start; i < end; i++ {
			it := c.at(i)
			if it.flags&flagLive != 0 && it.flags&flagVerified == 0 && it.open == 0 {
				c.removeLocked(i)
				n++
			}
		}
		c.mu.Unlock()
	}
}
