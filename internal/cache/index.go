package cache

import (
	"sort"
	"strings"
	"sync"
	"time"
)

// index is the in-memory catalogue of every cached file: bytes on disk,
// last access and whether clients have it open, kept in least-recently-used
// order. Purge takes victims from the tail, so evicting k files costs O(k)
// (plus the open and pinned files it skips), never a walk of the cache tree.
// It is rebuilt from the sidecars at start-up.
//
// Files under a quota are also on their quota's own LRU list, so a quota is
// purged in O(files evicted) as well. The index also keeps the
// per-directory totals (dirstats.go).
type index struct {
	// mu protects everything below.
	mu    sync.Mutex
	items map[Key]*item
	// head is the most recently used item, tail the least.
	head, tail *item
	bytes      int64
	// rules classify items into quota groups and pins; groups are the
	// quotas' lists, in the order of rules.quotas.
	rules  *spaceRules
	groups []*group
	// pinnedBytes is the size of the pinned items.
	pinnedBytes int64
	// total is the cache's capacity as last measured (Usage), which share
	// quotas are fractions of.
	total int64
	dirs  dirTable
	// disks are the files and bytes per data disk, by disk id.
	disks []diskCount
	// nextID is the last copy id handed out.
	nextID uint64
}

type diskCount struct {
	files int
	bytes int64
}

type item struct {
	key        Key
	bytes      int64
	lastAccess time.Time
	open       int
	prev, next *item

	// grp is the item's quota (nil: none), with its links in grp's list.
	grp          *group
	gprev, gnext *item
	pinned       bool
	// dir is the item's per-directory aggregate (nil: statistics off).
	dir *dirStat
	// disk is the id of the data disk holding the file.
	disk int
	// id names the copy's blocks in the block store: an item created for
	// a new copy gets a new one (nextID), so no block of a copy that was
	// dropped or replaced can be found in RAM under it.
	id uint64
}

// group is the set of items under one quota.
type group struct {
	quota        Quota
	bytes        int64
	files        int
	head, tail   *item
	evictedFiles int64
	evictedBytes int64
}

func newIndex(r *spaceRules, dirDepth, dirMax int) *index {
	x := &index{items: map[Key]*item{}}
	x.dirs.init(dirDepth, dirMax)
	x.setRulesLocked(r)
	return x
}

// setRules replaces the quotas and pins (a configuration reload) and
// reclassifies every item, keeping the LRU order within each quota.
func (x *index) setRules(r *spaceRules) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.setRulesLocked(r)
}

func (x *index) setRulesLocked(r *spaceRules) {
	old := map[string]*group{}
	for _, g := range x.groups {
		old[g.quota.Prefix] = g
	}
	x.rules = r
	x.groups = make([]*group, len(r.quotas))
	for i, q := range r.quotas {
		g := &group{quota: q}
		if o := old[q.Prefix]; o != nil { // keep the eviction counters
			g.evictedFiles, g.evictedBytes = o.evictedFiles, o.evictedBytes
		}
		x.groups[i] = g
	}
	x.pinnedBytes = 0
	// From the least recently used up, so that pushing to the front of each
	// group's list rebuilds it in LRU order.
	for it := x.tail; it != nil; it = it.prev {
		it.grp, it.gprev, it.gnext = nil, nil, nil
		x.classifyLocked(it)
	}
}

// classifyLocked puts a new item into its quota group and pin state.
func (x *index) classifyLocked(it *item) {
	if i := x.rules.quotaOf(it.key.Path); i >= 0 {
		g := x.groups[i]
		it.grp = g
		g.bytes += it.bytes
		g.files++
		g.pushFront(it)
	}
	it.pinned = x.rules.pinned(it.key.Path)
	if it.pinned {
		// Over the pin share, a new pin is refused: the file is cached
		// like any other (grow says so for files that grow into it).
		if lim := x.pinLimitLocked(); lim > 0 && x.pinnedBytes+it.bytes > lim {
			it.pinned = false
			return
		}
		x.pinnedBytes += it.bytes
	}
}

func (x *index) unlinkLocked(it *item) {
	if it.prev != nil {
		it.prev.next = it.next
	} else {
		x.head = it.next
	}
	if it.next != nil {
		it.next.prev = it.prev
	} else {
		x.tail = it.prev
	}
	it.prev, it.next = nil, nil
}

func (x *index) pushFrontLocked(it *item) {
	it.next = x.head
	if x.head != nil {
		x.head.prev = it
	}
	x.head = it
	if x.tail == nil {
		x.tail = it
	}
}

// moveFrontLocked makes it the most recently used, in its quota too.
func (x *index) moveFrontLocked(it *item) {
	x.unlinkLocked(it)
	x.pushFrontLocked(it)
	if it.grp != nil {
		it.grp.unlink(it)
		it.grp.pushFront(it)
	}
}

func (g *group) unlink(it *item) {
	if it.gprev != nil {
		it.gprev.gnext = it.gnext
	} else {
		g.head = it.gnext
	}
	if it.gnext != nil {
		it.gnext.gprev = it.gprev
	} else {
		g.tail = it.gprev
	}
	it.gprev, it.gnext = nil, nil
}

func (g *group) pushFront(it *item) {
	it.gnext = g.head
	if g.head != nil {
		g.head.gprev = it
	}
	g.head = it
	if g.tail == nil {
		g.tail = it
	}
}

// addLocked inserts a new item at the front.
func (x *index) addLocked(it *item) {
	x.items[it.key] = it
	x.bytes += it.bytes
	x.pushFrontLocked(it)
	x.classifyLocked(it)
	it.dir = x.dirs.of(it.key.Path)
	x.dirs.add(it.dir, 1, it.bytes)
	x.diskAddLocked(it.disk, 1, it.bytes)
}

func (x *index) diskAddLocked(d, files int, bytes int64) {
	for len(x.disks) <= d {
		x.disks = append(x.disks, diskCount{})
	}
	x.disks[d].files += files
	x.disks[d].bytes += bytes
}

// addBytesLocked changes it's size by n everywhere it is counted.
func (x *index) addBytesLocked(it *item, n int64) {
	it.bytes += n
	x.bytes += n
	if it.grp != nil {
		it.grp.bytes += n
	}
	if it.pinned {
		x.pinnedBytes += n
	}
	x.dirs.add(it.dir, 0, n)
	x.diskAddLocked(it.disk, 0, n)
}

// load adds items found at start-up; call sortLoaded when done.
func (x *index) load(k Key, bytes int64, lastAccess time.Time, disk int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, ok := x.items[k]; ok {
		return
	}
	x.addLocked(&item{key: k, bytes: bytes, lastAccess: lastAccess, disk: disk})
}

// sortLoaded orders the lists by last access after a bulk load.
func (x *index) sortLoaded() {
	x.mu.Lock()
	defer x.mu.Unlock()
	all := make([]*item, 0, len(x.items))
	for _, it := range x.items {
		all = append(all, it)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].lastAccess.After(all[j].lastAccess) })
	x.head, x.tail = nil, nil
	for _, g := range x.groups {
		g.head, g.tail = nil, nil
	}
	for i := len(all) - 1; i >= 0; i-- {
		it := all[i]
		it.prev, it.next, it.gprev, it.gnext = nil, nil, nil, nil
		x.pushFrontLocked(it)
		if it.grp != nil {
			it.grp.pushFront(it)
		}
	}
}

// opened records an open of k, creating the item with bytes on disk if it
// is new, and returns the id of k's copy; fresh says the open starts a new
// copy (the id changes).
func (x *index) opened(k Key, bytes int64, now time.Time, disk int, fresh bool) uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	it := x.items[k]
	if it == nil {
		it = &item{key: k, bytes: bytes, disk: disk}
		x.addLocked(it)
	} else {
		x.moveFrontLocked(it)
	}
	if it.id == 0 || fresh {
		x.nextID++
		it.id = x.nextID
	}
	it.open++
	it.lastAccess = now
	return it.id
}

// reopened records a new access to k while it was still open in the
// cache (a lingering entry taken back).
func (x *index) reopened(k Key, now time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if it := x.items[k]; it != nil {
		x.moveFrontLocked(it)
		it.open++
		it.lastAccess = now
	}
}

// closed records the end of an access.
func (x *index) closed(k Key, now time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	it := x.items[k]
	if it == nil {
		return
	}
	if it.open > 0 {
		it.open--
	}
	it.lastAccess = now
	x.moveFrontLocked(it)
}

// touch records a use of k that is not an open (a client redirected to
// its own copy): k becomes the most recently used.
func (x *index) touch(k Key, now time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	it := x.items[k]
	if it == nil {
		return
	}
	it.lastAccess = now
	x.moveFrontLocked(it)
}

// grow adds n bytes to k (a block was written). It returns the cache's
// total and whether k's quota has passed its high watermark.
// grow adds n bytes to k. A pinned file that grows past the pin share is
// unpinned (pinRefused): it stays cached, but purge may evict it.
func (x *index) grow(k Key, n int64) (total int64, quotaFull, pinRefused bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if it := x.items[k]; it != nil {
		x.addBytesLocked(it, n)
		if g := it.grp; g != nil {
			quotaFull = g.bytes > x.quotaHighLocked(g.quota)
		}
		if lim := x.pinLimitLocked(); it.pinned && n > 0 && lim > 0 && x.pinnedBytes > lim {
			it.pinned = false
			x.pinnedBytes -= it.bytes
			pinRefused = true
		}
	}
	return x.bytes, quotaFull, pinRefused
}

// pinFigures returns the pinned bytes and their limit (0: unknown).
func (x *index) pinFigures() (pinned, limit int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.pinnedBytes, x.pinLimitLocked()
}

// setBytes corrects k's size (e.g. after the cached copy was reset).
func (x *index) setBytes(k Key, n int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if it := x.items[k]; it != nil {
		x.addBytesLocked(it, n-it.bytes)
	}
}

// remove drops k and returns its bytes.
func (x *index) remove(k Key) int64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	it := x.items[k]
	if it == nil {
		return 0
	}
	x.unlinkLocked(it)
	delete(x.items, k)
	x.bytes -= it.bytes
	if g := it.grp; g != nil {
		g.unlink(it)
		g.bytes -= it.bytes
		g.files--
	}
	if it.pinned {
		x.pinnedBytes -= it.bytes
	}
	x.dirs.add(it.dir, -1, -it.bytes)
	x.diskAddLocked(it.disk, -1, -it.bytes)
	return it.bytes
}

// diskOf returns the id of the disk holding k, if k is cached.
func (x *index) diskOf(k Key) (int, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if it := x.items[k]; it != nil {
		return it.disk, true
	}
	return 0, false
}

// forgetDisk drops every item on disk d (open or not) and returns their
// keys.
func (x *index) forgetDisk(d int) []Key {
	x.mu.Lock()
	var keys []Key
	for k, it := range x.items {
		if it.disk == d {
			keys = append(keys, k)
		}
	}
	x.mu.Unlock()
	for _, k := range keys {
		x.remove(k)
	}
	return keys
}

// diskTotals returns the files and bytes per disk, for n disks.
func (x *index) diskTotals(n int) (files []int, bytes []int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	files, bytes = make([]int, n), make([]int64, n)
	for i := 0; i < n && i < len(x.disks); i++ {
		files[i], bytes[i] = x.disks[i].files, x.disks[i].bytes
	}
	return files, bytes
}

// victimsOnDisk returns closed, unpinned items on disk d from the least
// recently used end until their bytes reach need.
func (x *index) victimsOnDisk(d int, need int64) []Key {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []Key
	var got int64
	for it := x.tail; it != nil && got < need; it = it.prev {
		if it.disk != d || it.open > 0 || it.pinned {
			continue
		}
		out = append(out, it.key)
		got += it.bytes
	}
	return out
}

// evicted counts an eviction against k's quota; call before remove.
func (x *index) evicted(k Key) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if it := x.items[k]; it != nil && it.grp != nil {
		it.grp.evictedFiles++
		it.grp.evictedBytes += it.bytes
	}
}

func (x *index) totals() (files int, bytes int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.items), x.bytes
}

// victims returns closed, unpinned items from the least recently used end
// until their bytes reach needBytes and count reaches needFiles, plus every
// such item last accessed before olderThan (zero: none).
func (x *index) victims(needBytes int64, needFiles int, olderThan time.Time) []Key {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []Key
	var got int64
	for it := x.tail; it != nil; it = it.prev {
		old := !olderThan.IsZero() && it.lastAccess.Before(olderThan)
		if got >= needBytes && len(out) >= needFiles && !old {
			break
		}
		if it.open > 0 || it.pinned {
			continue
		}
		out = append(out, it.key)
		got += it.bytes
	}
	return out
}

// quotaVictims returns, for every quota over its high watermark, its
// closed and unpinned items from the least recently used end until the
// quota would be under its low watermark.
func (x *index) quotaVictims() []Key {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []Key
	for _, g := range x.groups {
		if g.bytes <= x.quotaHighLocked(g.quota) {
			continue
		}
		need := g.bytes - x.quotaLowLocked(g.quota)
		var got int64
		for it := g.tail; it != nil && got < need; it = it.gprev {
			if it.open > 0 || it.pinned {
				continue
			}
			out = append(out, it.key)
			got += it.bytes
		}
	}
	return out
}

// lookup returns a copy of k's item.
func (x *index) lookup(k Key) (item, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	it := x.items[k]
	if it == nil {
		return item{}, false
	}
	c := *it
	c.prev, c.next, c.gprev, c.gnext, c.grp, c.dir = nil, nil, nil, nil, nil, nil
	return c, true
}

// hasPathPrefix reports whether p is prefix or lies under it, on whole path
// components ("/store/user" covers "/store/user/x", not "/store/username").
func hasPathPrefix(p, prefix string) bool {
	prefix = strings.TrimSuffix(prefix, "/")
	if prefix == "" {
		return true
	}
	return p == prefix || strings.HasPrefix(p, prefix) && p[len(prefix)] == '/'
}
