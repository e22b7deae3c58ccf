package catalog

import (
	"hash/maphash"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// none is the null link and the null index.
const none int32 = -1

// pageBits sizes the pages of items: 4096 items (256 KiB) each, so that the
// items grow without ever copying them and waste at most one page.
const (
	pageBits = 12
	pageSize = 1 << pageBits
)

// Flags of an item.
const (
	// flagLive: the slot holds an item (else it is on the free list).
	flagLive uint8 = 1 << iota
	flagPinned
	// flagVerified: the item was seen by the live cache (opened, closed,
	// touched, grown) or its sidecar by the walk since start-up; an item
	// loaded from a snapshot is not, until then (walk.go).
	flagVerified
	// flagPending: added by the walk, not yet in LRU order; on the
	// pending list instead of the LRU list.
	flagPending
)

// item is one cached file. It holds no pointer (see names.go): 64 bytes.
type item struct {
	// name is the path's ref in the names arena.
	name uint64
	// bytes is what the file holds on disk (its durable blocks).
	bytes int64
	// id names the copy's blocks in the block store: an item opened for a
	// new copy gets a new one, so that no block of a copy that was dropped
	// or replaced can be found in RAM under it. 0: none yet.
	id uint64
	// prev and next link the LRU list (or the pending list, or the free
	// list through next); gprev and gnext the quota's list.
	prev, next   int32
	gprev, gnext int32
	// hash is the key's hash (table.go), to find its table entry.
	hash uint32
	// access is the last access in Unix seconds.
	access uint32
	// open counts the clients that have the file open.
	open int32
	// dir is the per-directory statistics entry (none: off).
	dir int32
	// origin is the interned origin; group is the quota's index + 1 (0:
	// none); disk the data disk holding the file.
	origin uint32
	group  uint16
	disk   uint8
	flags  uint8
}

const (
	itemSize    = int(unsafe.Sizeof(item{}))
	dirStatSize = int(unsafe.Sizeof(DirStat{}))
)

// list is a doubly linked list of items.
type list struct{ head, tail int32 }

// group is the set of items under one quota, in LRU order.
type group struct {
	quota                      Quota
	bytes                      int64
	files                      int
	list                       list
	evictedFiles, evictedBytes int64
}

// diskCount is what one data disk holds.
type diskCount struct {
	files int
	bytes int64
}

// Config configures a catalogue.
type Config struct {
	// Rules are the quotas and pins (SetRules changes them).
	Rules Rules
	// DirStatsDepth is how many path components name a directory of the
	// per-directory statistics (negative: off); DirStatsMax bounds their
	// number (beyond it, "(other)").
	DirStatsDepth, DirStatsMax int
}

// Catalog is the catalogue of cached files. Its methods are safe for
// concurrent use; none does I/O except the loading and the snapshots
// (load.go), which document theirs.
type Catalog struct {
	// mu protects everything below.
	mu sync.Mutex
	// pages hold the items by slot (slot>>pageBits, slot&(pageSize-1)).
	pages []*[pageSize]item
	// slots is the number of slots handed out; free the head of the free
	// list (through next).
	slots, free int32
	// n is the number of items.
	n     int
	table table
	names names
	// origins are the interned origin URLs, by id; originIDs the reverse;
	// originDirs the ids by OriginDir (walk.go).
	origins    []string
	originIDs  map[string]uint32
	originDirs map[string][]uint32
	// lru is the LRU list (head the most recently used); pending holds
	// the items the walk added until they are put in order (walk.go).
	lru, pending list
	bytes        int64
	rules        Rules
	groups       []group
	pinnedBytes  int64
	// total is the capacity as last measured, which share quotas and the
	// pin share are fractions of.
	total int64
	dirs  dirTable
	disks []diskCount
	// nextID is the last copy id handed out.
	nextID uint64
	// changes counts the changes of items (Changes).
	changes uint64
	// load is the state of the loading (load.go).
	load loadState
}

// New returns an empty catalogue.
func New(cfg Config) *Catalog {
	c := &Catalog{free: none, lru: list{none, none}, pending: list{none, none},
		originIDs: map[string]uint32{}, originDirs: map[string][]uint32{}}
	c.table.init(maphash.MakeSeed())
	c.names.init()
	c.dirs.init(cfg.DirStatsDepth, cfg.DirStatsMax)
	c.load.init()
	c.setRulesLocked(cfg.Rules)
	return c
}

// at returns the item in slot i.
func (c *Catalog) at(i int32) *item { return &c.pages[i>>pageBits][i&(pageSize-1)] }

// pathOf returns the path of the item in slot i (transient: names.get).
func (c *Catalog) pathOf(i int32) string { return c.names.get(i, c.at(i).name) }

// keyOf returns a copy of the key of the item in slot i.
func (c *Catalog) keyOf(i int32) Key {
	it := c.at(i)
	return Key{Origin: c.origins[it.origin], Path: strings.Clone(c.names.get(i, it.name))}
}

// originLocked returns the id of origin o, interning it if add.
func (c *Catalog) originLocked(o string, add bool) (uint32, bool) {
	if id, ok := c.originIDs[o]; ok {
		return id, true
	}
	if !add {
		return 0, false
	}
	id := uint32(len(c.origins))
	o = strings.Clone(o)
	c.origins = append(c.origins, o)
	c.originIDs[o] = id
	od := OriginDir(o)
	c.originDirs[od] = append(c.originDirs[od], id)
	return id, true
}

// findLocked returns the slot of k, or none.
func (c *Catalog) findLocked(k Key) int32 {
	o, ok := c.originIDs[k.Origin]
	if !ok {
		return none
	}
	return c.findIDLocked(o, k.Path)
}

func (c *Catalog) findIDLocked(o uint32, p string) int32 {
	return c.table.find(c.table.hash(o, p), func(i int32) bool {
		it := c.at(i)
		return it.origin == o && c.names.get(i, it.name) == p
	})
}

// newSlotLocked returns a free slot, zeroed.
func (c *Catalog) newSlotLocked() int32 {
	if i := c.free; i != none {
		c.free = c.at(i).next
		*c.at(i) = item{}
		return i
	}
	i := c.slots
	if int(i)>>pageBits == len(c.pages) {
		c.pages = append(c.pages, new([pageSize]item))
	}
	c.slots++
	return i
}

// addLocked creates the item of k. With back it goes to the tail of the
// LRU list (a snapshot's items, most recent first), with pending to the
// pending list, else to the front.
func (c *Catalog) addLocked(k Key, bytes int64, access uint32, disk int, flags uint8, back, pending bool) int32 {
	o, _ := c.originLocked(k.Origin, true)
	i := c.newSlotLocked()
	it := c.at(i)
	it.bytes, it.access, it.disk, it.origin = bytes, access, uint8(disk), o
	it.flags = flagLive | flags
	it.hash = c.table.hash(o, k.Path)
	it.name = c.names.add(i, k.Path)
	it.prev, it.next, it.gprev, it.gnext = none, none, none, none
	it.group = 0
	c.table.insert(it.hash, i)
	c.n++
	c.changes++
	c.bytes += bytes
	switch {
	case pending:
		it.flags |= flagPending
		c.pushBack(&c.pending, i)
	case back:
		c.pushBack(&c.lru, i)
	default:
		c.pushFront(&c.lru, i)
	}
	c.classifyLocked(i, k.Path, back || pending)
	it.dir = c.dirs.of(k.Path)
	c.dirs.add(it.dir, 1, bytes)
	c.diskAddLocked(disk, 1, bytes)
	return i
}

// classifyLocked puts item i (path p) into its quota group, at the back
// of its list (back) or the front, and its pin state.
func (c *Catalog) classifyLocked(i int32, p string, back bool) {
	it := c.at(i)
	if q := c.rules.quotaOf(p); q >= 0 {
		g := &c.groups[q]
		it.group = uint16(q + 1)
		g.bytes += it.bytes
		g.files++
		if back {
			c.gpushBack(g, i)
		} else {
			c.gpushFront(g, i)
		}
	}
	it.flags &^= flagPinned
	if c.rules.pinned(p) {
		// Over the pin share, a new pin is refused: the file is cached
		// like any other (Grow says so for files that grow into it).
		if lim := c.pinLimitLocked(); lim > 0 && c.pinnedBytes+it.bytes > lim {
			return
		}
		it.flags |= flagPinned
		c.pinnedBytes += it.bytes
	}
}

func (c *Catalog) diskAddLocked(d, files int, bytes int64) {
	for len(c.disks) <= d {
		c.disks = append(c.disks, diskCount{})
	}
	c.disks[d].files += files
	c.disks[d].bytes += bytes
}

// addBytesLocked changes item i's size by n everywhere it is counted.
func (c *Catalog) addBytesLocked(i int32, n int64) {
	c.changes++
	it := c.at(i)
	it.bytes += n
	c.bytes += n
	if it.group != 0 {
		c.groups[it.group-1].bytes += n
	}
	if it.flags&flagPinned != 0 {
		c.pinnedBytes += n
	}
	c.dirs.add(it.dir, 0, n)
	c.diskAddLocked(int(it.disk), 0, n)
}

// removeLocked drops item i and returns its bytes.
func (c *Catalog) removeLocked(i int32) int64 {
	it := c.at(i)
	if it.flags&flagPending != 0 {
		c.unlink(&c.pending, i)
	} else {
		c.unlink(&c.lru, i)
	}
	c.table.remove(it.hash, i)
	c.n--
	c.changes++
	c.bytes -= it.bytes
	if it.group != 0 {
		g := &c.groups[it.group-1]
		c.gunlink(g, i)
		g.bytes -= it.bytes
		g.files--
	}
	if it.flags&flagPinned != 0 {
		c.pinnedBytes -= it.bytes
	}
	c.dirs.add(it.dir, -1, -it.bytes)
	c.diskAddLocked(int(it.disk), -1, -it.bytes)
	c.names.free(i, it.name)
	n := it.bytes
	*it = item{next: c.free}
	c.free = i
	if c.names.tooSparse() {
		c.names.evacuate(func(slot int32, ref uint64) bool {
			s := c.at(slot)
			return s.flags&flagLive != 0 && s.name == ref
		}, func(slot int32, ref uint64) { c.at(slot).name = ref })
	}
	return n
}

// setFiguresLocked sets item i's bytes and disk, and verifies it.
func (c *Catalog) setFiguresLocked(i int32, bytes int64, disk int) {
	c.addBytesLocked(i, bytes-c.at(i).bytes)
	it := c.at(i)
	if int(it.disk) != disk {
		c.diskAddLocked(int(it.disk), -1, -it.bytes)
		it.disk = uint8(disk)
		c.diskAddLocked(disk, 1, it.bytes)
	}
	it.flags |= flagVerified
}

// reorderLocked gives item i the last access access and puts it on the
// pending list, to be put in order by settle.
func (c *Catalog) reorderLocked(i int32, access uint32) {
	it := c.at(i)
	it.access = access
	if it.flags&flagPending != 0 {
		return
	}
	c.unlink(&c.lru, i)
	it.flags |= flagPending
	c.pushBack(&c.pending, i)
	if it.group != 0 { // the pending files last, as regroupLocked has them
		g := &c.groups[it.group-1]
		c.gunlink(g, i)
		c.gpushBack(g, i)
	}
}

// touchLocked records an access of item i at now: it becomes the most
// recently used, in its quota too, and is verified.
func (c *Catalog) touchLocked(i int32, now time.Time) {
	c.changes++
	it := c.at(i)
	it.access = unixSeconds(now)
	it.flags |= flagVerified
	if it.flags&flagPending != 0 {
		c.unlink(&c.pending, i)
		it.flags &^= flagPending
	} else {
		c.unlink(&c.lru, i)
	}
	c.pushFront(&c.lru, i)
	if it.group != 0 {
		g := &c.groups[it.group-1]
		c.gunlink(g, i)
		c.gpushFront(g, i)
	}
}

// unixSeconds is t as the items keep it.
func unixSeconds(t time.Time) uint32 {
	s := t.Unix()
	switch {
	case s < 0:
		return 0
	case s > 1<<32-1:
		return 1<<32 - 1
	}
	return uint32(s)
}

func (c *Catalog) unlink(l *list, i int32) {
	it := c.at(i)
	if it.prev != none {
		c.at(it.prev).next = it.next
	} else {
		l.head = it.next
	}
	if it.next != none {
		c.at(it.next).prev = it.prev
	} else {
		l.tail = it.prev
	}
	it.prev, it.next = none, none
}

func (c *Catalog) pushFront(l *list, i int32) {
	it := c.at(i)
	it.prev, it.next = none, l.head
	if l.head != none {
		c.at(l.head).prev = i
	}
	l.head = i
	if l.tail == none {
		l.tail = i
	}
}

func (c *Catalog) pushBack(l *list, i int32) {
	it := c.at(i)
	it.prev, it.next = l.tail, none
	if l.tail != none {
		c.at(l.tail).next = i
	}
	l.tail = i
	if l.head == none {
		l.head = i
	}
}

func (c *Catalog) gunlink(g *group, i int32) {
	it := c.at(i)
	if it.gprev != none {
		c.at(it.gprev).gnext = it.gnext
	} else {
		g.list.head = it.gnext
	}
	if it.gnext != none {
		c.at(it.gnext).gprev = it.gprev
	} else {
		g.list.tail = it.gprev
	}
	it.gprev, it.gnext = none, none
}

func (c *Catalog) gpushFront(g *group, i int32) {
	it := c.at(i)
	it.gprev, it.gnext = none, g.list.head
	if g.list.head != none {
		c.at(g.list.head).gprev = i
	}
	g.list.head = i
	if g.list.tail == none {
		g.list.tail = i
	}
}

func (c *Catalog) gpushBack(g *group, i int32) {
	it := c.at(i)
	it.gprev, it.gnext = g.list.tail, none
	if g.list.tail != none {
		c.at(g.list.tail).gnext = i
	}
	g.list.tail = i
	if g.list.head == none {
		g.list.head = i
	}
}

// SetRules replaces the quotas and pins (a configuration reload) and
// reclassifies every item, keeping the LRU order within each quota.
func (c *Catalog) SetRules(r Rules) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setRulesLocked(r)
}

func (c *Catalog) setRulesLocked(r Rules) {
	old := map[string]*group{}
	for i := range c.groups {
		old[c.groups[i].quota.Prefix] = &c.groups[i]
	}
	r.Quotas = append([]Quota(nil), r.Quotas...)
	r.Pins = append([]string(nil), r.Pins...)
	c.rules = r
	groups := make([]group, len(r.Quotas))
	for i, q := range r.Quotas {
		groups[i] = group{quota: q, list: list{none, none}}
		if o := old[q.Prefix]; o != nil { // keep the eviction counters
			groups[i].evictedFiles, groups[i].evictedBytes = o.evictedFiles, o.evictedBytes
		}
	}
	c.groups = groups
	c.pinnedBytes = 0
	c.regroupLocked(true)
}

// regroupLocked rebuilds the quota lists in LRU order (the pending items
// first, as the oldest); with reclassify, each item's quota and pin state
// are decided again.
func (c *Catalog) regroupLocked(reclassify bool) {
	for g := range c.groups {
		c.groups[g].list = list{none, none}
		if reclassify {
			c.groups[g].bytes, c.groups[g].files = 0, 0
		}
	}
	// From the least recently used up, so that pushing to the front of
	// each group's list rebuilds it in LRU order.
	for _, l := range []*list{&c.pending, &c.lru} {
		for i := l.tail; i != none; i = c.at(i).prev {
			it := c.at(i)
			it.gprev, it.gnext = none, none
			if reclassify {
				it.group = 0
				c.classifyLocked(i, c.pathOf(i), false)
			} else if it.group != 0 {
				c.gpushFront(&c.groups[it.group-1], i)
			}
		}
	}
}

// Opened records an open of k, creating the item with bytes on disk if it
// is new, and returns the id of k's copy; fresh says the open starts a new
// copy (the id changes).
func (c *Catalog) Opened(k Key, bytes int64, now time.Time, disk int, fresh bool) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := c.findLocked(k)
	if i == none {
		i = c.addLocked(k, bytes, unixSeconds(now), disk, flagVerified, false, false)
	} else {
		if c.at(i).flags&flagVerified == 0 {
			// Loaded from a snapshot: the open read the truth.
			c.setFiguresLocked(i, bytes, disk)
		}
		c.touchLocked(i, now)
	}
	it := c.at(i)
	if it.id == 0 || fresh {
		c.nextID++
		it.id = c.nextID
	}
	it.open++
	return it.id
}

// Reopened records a new access to k while it was still open in the
// cache (a lingering entry taken back).
func (c *Catalog) Reopened(k Key, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i := c.findLocked(k); i != none {
		c.touchLocked(i, now)
		c.at(i).open++
	}
}

// Closed records the end of an access.
func (c *Catalog) Closed(k Key, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := c.findLocked(k)
	if i == none {
		return
	}
	if it := c.at(i); it.open > 0 {
		it.open--
	}
	c.touchLocked(i, now)
}

// Touch records a use of k that is not an open (a client redirected to
// its own copy): k becomes the most recently used.
func (c *Catalog) Touch(k Key, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i := c.findLocked(k); i != none {
		c.touchLocked(i, now)
	}
}

// Grow adds n bytes to k (a block was written; negative: dropped). It
// returns the cache's total and whether k's quota has passed its high
// watermark. A pinned file that grows past the pin share is unpinned
// (pinRefused): it stays cached, but purge may evict it.
func (c *Catalog) Grow(k Key, n int64) (total int64, quotaFull, pinRefused bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i := c.findLocked(k); i != none {
		c.addBytesLocked(i, n)
		it := c.at(i)
		it.flags |= flagVerified
		if it.group != 0 {
			g := &c.groups[it.group-1]
			quotaFull = g.bytes > c.quotaHighLocked(g.quota)
		}
		if lim := c.pinLimitLocked(); it.flags&flagPinned != 0 && n > 0 && lim > 0 && c.pinnedBytes > lim {
			it.flags &^= flagPinned
			c.pinnedBytes -= it.bytes
			pinRefused = true
		}
	}
	return c.bytes, quotaFull, pinRefused
}

// SetBytes corrects k's size (e.g. after the cached copy was reset).
func (c *Catalog) SetBytes(k Key, n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i := c.findLocked(k); i != none {
		c.addBytesLocked(i, n-c.at(i).bytes)
	}
}

// Remove drops k and returns its bytes.
func (c *Catalog) Remove(k Key) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.load.removedLocked(k)
	i := c.findLocked(k)
	if i == none {
		return 0
	}
	return c.removeLocked(i)
}

// Evicted drops k, evicted by a purge or by hand: its bytes count against
// its quota's evictions. It returns its bytes.
func (c *Catalog) Evicted(k Key) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.load.removedLocked(k)
	i := c.findLocked(k)
	if i == none {
		return 0
	}
	if it := c.at(i); it.group != 0 {
		g := &c.groups[it.group-1]
		g.evictedFiles++
		g.evictedBytes += it.bytes
	}
	return c.removeLocked(i)
}

// DiskOf returns the id of the disk holding k, if k is catalogued.
func (c *Catalog) DiskOf(k Key) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i := c.findLocked(k); i != none {
		return int(c.at(i).disk), true
	}
	return 0, false
}

// Info is what the catalogue knows of one file.
type Info struct {
	Bytes      int64
	LastAccess time.Time // to the second
	Open       int
	Disk       int
	Pinned     bool
	// ID names the copy's blocks in the block store (0: never opened).
	ID uint64
	// Verified: the cache used the file since the start, or the walk
	// found it; until then a file loaded from an approximate snapshot
	// may be elsewhere (Progress.Approximate).
	Verified bool
}

// Lookup returns what the catalogue knows of k.
func (c *Catalog) Lookup(k Key) (Info, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := c.findLocked(k)
	if i == none {
		return Info{}, false
	}
	it := c.at(i)
	return Info{Bytes: it.bytes, LastAccess: time.Unix(int64(it.access), 0), Open: int(it.open), Disk: int(it.disk),
		Pinned: it.flags&flagPinned != 0, ID: it.id, Verified: it.flags&flagVerified != 0}, true
}

// ForgetDisk drops every item on disk d (open or not) and returns their
// keys. While the catalogue loads, the load adds none on d any more.
func (c *Catalog) ForgetDisk(d int) []Key {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.load.forgotLocked(d)
	var out []int32
	for i := int32(0); i < c.slots; i++ {
		if it := c.at(i); it.flags&flagLive != 0 && int(it.disk) == d {
			out = append(out, i)
		}
	}
	keys := make([]Key, len(out))
	for j, i := range out {
		keys[j] = c.keyOf(i)
		c.removeLocked(i)
	}
	return keys
}

// DiskTotals returns the files and bytes per disk, for n disks.
func (c *Catalog) DiskTotals(n int) (files []int, bytes []int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	files, bytes = make([]int, n), make([]int64, n)
	for i := 0; i < n && i < len(c.disks); i++ {
		files[i], bytes[i] = c.disks[i].files, c.disks[i].bytes
	}
	return files, bytes
}

// Totals returns the number of files and their bytes.
func (c *Catalog) Totals() (files int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n, c.bytes
}

// evictable reports whether purge may take item i: closed and unpinned.
func evictable(it *item) bool { return it.open == 0 && it.flags&flagPinned == 0 }

// VictimsOnDisk returns closed, unpinned items on disk d from the least
// recently used end until their bytes reach need.
func (c *Catalog) VictimsOnDisk(d int, need int64) []Key {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Key
	var got int64
	for i := c.lru.tail; i != none && got < need; i = c.at(i).prev {
		it := c.at(i)
		if int(it.disk) != d || !evictable(it) {
			continue
		}
		out = append(out, c.keyOf(i))
		got += it.bytes
	}
	return out
}

// Victims returns closed, unpinned items from the least recently used end
// until their bytes reach needBytes and count reaches needFiles, plus every
// such item last accessed before olderThan (zero: none; to the second: a
// file accessed in olderThan's second is kept).
func (c *Catalog) Victims(needBytes int64, needFiles int, olderThan time.Time) []Key {
	c.mu.Lock()
	defer c.mu.Unlock()
	older := uint32(0)
	if !olderThan.IsZero() {
		older = unixSeconds(olderThan)
	}
	var out []Key
	var got int64
	for i := c.lru.tail; i != none; i = c.at(i).prev {
		it := c.at(i)
		old := it.access < older
		if got >= needBytes && len(out) >= needFiles && !old {
			break
		}
		if !evictable(it) {
			continue
		}
		out = append(out, c.keyOf(i))
		got += it.bytes
	}
	return out
}

// QuotaVictims returns, for every quota over its high watermark, its
// closed and unpinned items from the least recently used end until the
// quota would be under its low watermark.
func (c *Catalog) QuotaVictims() []Key {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Key
	for g := range c.groups {
		gr := &c.groups[g]
		if gr.bytes <= c.quotaHighLocked(gr.quota) {
			continue
		}
		need := gr.bytes - c.quotaLowLocked(gr.quota)
		var got int64
		for i := gr.list.tail; i != none && got < need; i = c.at(i).gprev {
			it := c.at(i)
			if !evictable(it) {
				continue
			}
			out = append(out, c.keyOf(i))
			got += it.bytes
		}
	}
	return out
}

// MemoryBytes is the catalogue's memory by its own accounting: the items'
// pages, the hash table, the names arena, the interned origins, the
// per-directory statistics and the loading's bookkeeping.
func (c *Catalog) MemoryBytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := int64(len(c.pages))*pageSize*int64(itemSize) + int64(cap(c.pages))*8
	n += c.table.memory()
	n += c.names.memory()
	for _, o := range c.origins {
		n += int64(len(o))*2 + 16 + 16 + 8 // the string, its key in two maps, ids
	}
	n += c.dirs.memory()
	n += int64(cap(c.disks)) * int64(unsafe.Sizeof(diskCount{}))
	n += int64(len(c.groups)) * int64(unsafe.Sizeof(group{}))
	n += c.load.memoryLocked()
	return n
}

// Keys returns the key of every item, in no order: O(files), for tests and
// tools.
func (c *Catalog) Keys() []Key {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Key, 0, c.n)
	for i := int32(0); i < c.slots; i++ {
		if c.at(i).flags&flagLive != 0 {
			out = append(out, c.keyOf(i))
		}
	}
	return out
}

// Changes counts the changes of the catalogue's files so far (added,
// removed, used, grown): a snapshot is worth writing when it has moved.
func (c *Catalog) Changes() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changes
}
