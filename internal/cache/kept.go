package cache

import "time"

// A closed file leaves the cache's memory after its final sync unless it
// is kept: up to Config.MaxKept of them stay as retired entries (no
// descriptor, no fetch, no origin handle), the least recently closed
// going first. An open of a kept file takes its entry back without
// reading its sidecar. A hit changes nothing but the file's access
// records, and those are written to the sidecar at most once every
// accessWriteGap (with the file's next sidecar write, when it leaves
// memory, or at stop): a node serving the same small files over and over
// writes no sidecar per hit. A crash loses at most those records; the
// catalogue's snapshot keeps the last accesses purge orders by. Files of
// mutable namespaces are not kept: their opens ask the origin.

// accessWriteGap is the least time between two sidecar writes of a file
// whose only change is its access records.
const accessWriteGap = time.Minute

// defaultMaxKept is Config.MaxKept's default for a RAM cache of ram
// bytes: an entry of about 2 KB per 128 KiB of it.
func defaultMaxKept(ram int64) int {
	return int(min(max(ram/(128<<10), 4096), 1<<20))
}

// Kept is the number of kept entries.
func (c *Cache) Kept() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.keptq.n
}

// keepableLocked reports whether e, retired and synced, may stay in
// memory. MUST be called with c.mu held.
func (c *Cache) keepableLocked(e *entry) bool {
	return c.cfg.MaxKept > 0 && !e.mutable && !e.detached && e.spoilErr() == nil && !c.stopping()
}

// keepLocked puts e at the end of the kept list, unless it is on it.
// MUST be called with c.mu held.
func (c *Cache) keepLocked(e *entry) {
	if !e.kept {
		c.keptq.push(e)
		e.kept = true
	}
}

// unkeepLocked takes e off the kept list, if it is on it. MUST be called
// with c.mu held.
func (c *Cache) unkeepLocked(e *entry) {
	if e.kept {
		c.keptq.remove(e)
		e.kept = false
	}
}

// forgetLocked removes e from Cache.files and the kept list. MUST be
// called with c.mu held.
func (c *Cache) forgetLocked(e *entry) {
	delete(c.files, e.key)
	c.unkeepLocked(e)
}

// deferAccess reports whether e's access records, the only change a sync
// found, may wait for a later sidecar write. MUST be called with e.syncMu
// held.
func (c *Cache) deferAccess(e *entry) bool {
	return c.cfg.MaxKept > 0 && !e.mutable && !c.stopping() &&
		!e.sideWritten.IsZero() && c.cfg.now().Sub(e.sideWritten) < accessWriteGap
}

func (c *Cache) stopping() bool {
	select {
	case <-c.shutdownCh:
		return true
	default:
		return false
	}
}

// trimKept lets the kept entries beyond Config.MaxKept go, least recently
// closed first, their deferred access records written first (opens of
// their keys wait for that write).
func (c *Cache) trimKept() {
	for {
		c.mu.Lock()
		e := c.keptq.head
		if e == nil || c.keptq.n <= c.cfg.MaxKept {
			c.mu.Unlock()
			return
		}
		c.forgetLocked(e)
		_, busy := c.closing[e.key] // being removed: nothing to write
		if busy || !e.recsDeferred.Load() {
			c.mu.Unlock()
			continue
		}
		done := make(chan struct{})
		c.closing[e.key] = done
		c.mu.Unlock()
		e.syncMu.Lock()
		e.writeSidecarLocked()
		e.syncMu.Unlock()
		c.mu.Lock()
		delete(c.closing, e.key)
		c.mu.Unlock()
		close(done)
	}
}

// dirtyKept puts every kept entry in the next group sync (the cache
// stops: their deferred records are written, and they are let go).
func (c *Cache) dirtyKept() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := c.keptq.head; e != nil; e = e.lingerNext {
		c.dirty[e] = struct{}{}
	}
}

// forgetKeptOn lets the kept entries of files on disk id go (the disk is
// out of service: the catalogue forgot its files, and the files it holds
// when it comes back are taken as they are then).
func (c *Cache) forgetKeptOn(id int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := c.keptq.head; e != nil; {
		next := e.lingerNext
		if e.disk == id {
			c.forgetLocked(e)
		}
		e = next
	}
}
