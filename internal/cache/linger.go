package cache

import (
	"time"

	"github.com/hepcache/hepcache/internal/blockstore"
)

// An entry whose last client closed stays for Config.CloseLinger before
// it ends (its fetches stopped, its blocks synced and recorded, its files
// closed): a new open of the file meanwhile takes it back as it is,
// instead of waiting for that final sync. The final sync waits for every
// block still being written, and a file read whole at network speed ends
// with blocks queued for a slower disk: a client opening it again right
// after (the next job, a second pass) would wait for the disk; XCache's
// page cache writes back without such a wait. While an entry lingers its
// blocks are synced every SyncInterval as an open file's are, it fetches
// nothing (its read-ahead stops at the last close: stopReadAhead), and it
// counts as closed for purge's least recently used order.

// defaultCloseLinger is Config.CloseLinger's default.
const defaultCloseLinger = 5 * time.Second

// defaultMaxLingering is Config.MaxLingering's default.
const defaultMaxLingering = 1024

// lingerLocked starts e's linger, if lingering is on, and reports whether
// it did. MUST be called with c.mu held, e without clients.
func (c *Cache) lingerLocked(e *entry) bool {
	if c.cfg.CloseLinger <= 0 || !e.initialized() || e.spoilErr() != nil {
		return false
	}
	select {
	case <-c.shutdownCh:
		return false
	default:
	}
	e.linger = time.AfterFunc(c.cfg.CloseLinger, func() { c.lingerEnd(e) })
	c.lingerq.push(e)
	e.stopReadAhead()
	return true
}

// stopReadAhead pauses e's read-ahead and cancels the read-ahead fetches
// no reader has joined: a file without clients fetches nothing for
// nobody (a 1-byte read of a 1 GiB file costs its block and what was
// already on its way, not the file). Fetches a reader waited for run to
// their end.
func (e *entry) stopReadAhead() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.st == nil {
		return
	}
	e.st.pause()
	for _, f := range e.fetches {
		if f.prefetch && f.reader == blockstore.Internal {
			f.cancel()
		}
	}
}

// unlingerLocked takes a lingering e back for a new client and reports
// whether it was lingering. MUST be called with c.mu held.
func (c *Cache) unlingerLocked(e *entry) bool {
	if e.linger == nil {
		return false
	}
	e.linger.Stop() // a callback already running finds refs > 0
	e.linger = nil
	c.lingerq.remove(e)
	c.unlingerStateLocked(e)
	return true
}

// unlingerStateLocked readies an entry without clients for a new one: the
// open finds what it holds now, not what the first found (blocks on disk,
// and blocks in RAM on their way there), and read-ahead may start again.
// MUST be called with c.mu held.
func (c *Cache) unlingerStateLocked(e *entry) {
	e.mu.Lock()
	held := e.st.present.Count()
	for _, f := range e.fetches {
		if f.landed() {
			held++
		}
	}
	e.wasState = openState(held, e.st.present.Len())
	e.st.resume()
	e.mu.Unlock()
}

// lingerEnd ends e's linger, unless a client took it back: it is retired
// (fetches stopped, data file closed, state durable at the next sync).
func (c *Cache) lingerEnd(e *entry) {
	c.mu.Lock()
	if e.refs > 0 || e.linger == nil {
		c.mu.Unlock()
		return
	}
	e.linger.Stop()
	e.linger = nil
	c.lingerq.remove(e)
	if e.detached {
		// Spoiled while lingering: it is already out of Cache.files.
		c.mu.Unlock()
		c.finishDetached(e)
		return
	}
	c.retireLocked(e, true)
}

// trimLingering ends the lingers of the oldest lingering files beyond
// Config.MaxLingering: each holds a descriptor of its data file, and
// files opened and closed at a high rate would otherwise take thousands.
func (c *Cache) trimLingering() {
	for {
		c.mu.Lock()
		oldest := c.lingerq.head
		if c.lingerq.n <= c.cfg.MaxLingering || oldest == nil {
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		c.lingerEnd(oldest)
	}
}

// lingerQueue lists the lingering entries, oldest first; guarded by
// Cache.mu.
type lingerQueue struct {
	head, tail *entry
	n          int
}

func (q *lingerQueue) push(e *entry) {
	e.lingerPrev, e.lingerNext = q.tail, nil
	if q.tail != nil {
		q.tail.lingerNext = e
	} else {
		q.head = e
	}
	q.tail = e
	q.n++
}

func (q *lingerQueue) remove(e *entry) {
	if e.lingerPrev != nil {
		e.lingerPrev.lingerNext = e.lingerNext
	} else if q.head == e {
		q.head = e.lingerNext
	} else {
		return // not queued
	}
	if e.lingerNext != nil {
		e.lingerNext.lingerPrev = e.lingerPrev
	} else {
		q.tail = e.lingerPrev
	}
	e.lingerPrev, e.lingerNext = nil, nil
	q.n--
}

// endLingering ends every lingering entry at once (the cache closes).
func (c *Cache) endLingering() {
	c.mu.Lock()
	var list []*entry
	for _, e := range c.files {
		if e.linger != nil && e.refs == 0 {
			list = append(list, e)
		}
	}
	c.mu.Unlock()
	for _, e := range list {
		c.lingerEnd(e)
	}
}
