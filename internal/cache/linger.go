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
	e.mu.Lock()
	e.st.resume()
	e.mu.Unlock()
	// This open finds what the entry holds now, not what the first did:
	// blocks on disk and blocks in RAM on their way there.
	e.mu.Lock()
	held := e.st.present.Count()
	for _, f := range e.fetches {
		if f.landed() {
			held++
		}
	}
	e.wasState = openState(held, e.st.present.Len())
	e.mu.Unlock()
	return true
}

// lingerEnd ends e after its linger, unless a client took it back.
func (c *Cache) lingerEnd(e *entry) {
	c.mu.Lock()
	if e.refs > 0 || e.linger == nil {
		c.mu.Unlock()
		return
	}
	e.linger = nil
	if e.detached {
		// Spoiled while lingering: it is already out of Cache.files.
		c.mu.Unlock()
		c.finishDetached(e)
		return
	}
	c.finishLocked(e, true)
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
