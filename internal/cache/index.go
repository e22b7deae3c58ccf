package cache

import (
	"sort"
	"sync"
	"time"
)

// index is the in-memory catalogue of every cached file: bytes on disk,
// last access and whether clients have it open, kept in least-recently-used
// order. Purge takes victims from the tail, so evicting k files costs O(k)
// (plus the open files it skips), never a walk of the cache tree. It is
// rebuilt from the sidecars at start-up.
type index struct {
	// mu protects everything below.
	mu    sync.Mutex
	items map[Key]*item
	// head is the most recently used item, tail the least.
	head, tail *item
	bytes      int64
}

type item struct {
	key        Key
	bytes      int64
	lastAccess time.Time
	open       int
	prev, next *item
}

func newIndex() *index { return &index{items: map[Key]*item{}} }

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

// load adds items found at start-up; call sortLoaded when done.
func (x *index) load(k Key, bytes int64, lastAccess time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, ok := x.items[k]; ok {
		return
	}
	it := &item{key: k, bytes: bytes, lastAccess: lastAccess}
	x.items[k] = it
	x.bytes += bytes
	x.pushFrontLocked(it)
}

// sortLoaded orders the list by last access after a bulk load.
func (x *index) sortLoaded() {
	x.mu.Lock()
	defer x.mu.Unlock()
	all := make([]*item, 0, len(x.items))
	for _, it := range x.items {
		all = append(all, it)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].lastAccess.After(all[j].lastAccess) })
	x.head, x.tail = nil, nil
	for i := len(all) - 1; i >= 0; i-- {
		all[i].prev, all[i].next = nil, nil
		x.pushFrontLocked(all[i])
	}
}

// opened records an open of k, creating the item with bytes if it is new.
func (x *index) opened(k Key, bytes int64, now time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	it := x.items[k]
	if it == nil {
		it = &item{key: k, bytes: bytes}
		x.items[k] = it
		x.bytes += bytes
	} else {
		x.unlinkLocked(it)
	}
	it.open++
	it.lastAccess = now
	x.pushFrontLocked(it)
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
	x.unlinkLocked(it)
	x.pushFrontLocked(it)
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
	x.unlinkLocked(it)
	x.pushFrontLocked(it)
}

// grow adds n bytes to k (a block was written) and returns the total.
func (x *index) grow(k Key, n int64) int64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	if it := x.items[k]; it != nil {
		it.bytes += n
		x.bytes += n
	}
	return x.bytes
}

// setBytes corrects k's size (e.g. after the cached copy was reset).
func (x *index) setBytes(k Key, n int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if it := x.items[k]; it != nil {
		x.bytes += n - it.bytes
		it.bytes = n
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
	return it.bytes
}

func (x *index) totals() (files int, bytes int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.items), x.bytes
}

// victims returns closed items from the least recently used end until their
// bytes reach needBytes and count reaches needFiles, plus every closed item
// last accessed before olderThan (zero: none).
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
		if it.open > 0 {
			continue
		}
		out = append(out, it.key)
		got += it.bytes
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
	c.prev, c.next = nil, nil
	return c, true
}
