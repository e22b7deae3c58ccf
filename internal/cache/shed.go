package cache

import (
	"fmt"

	"github.com/hepcache/hepcache/internal/backend"
)

// shedRetryAfter is the wait a shed client is told: a second, as
// Pelican's own cache tells the clients it sheds; by then most of the
// queue it would have joined has been fetched.
const shedRetryAfter = 1

// overloaded reports whether the fetches clients wait for, queued for
// want of fetch memory (an origin's window or the global budget), are
// more than Config.ShedAfter: a new download would only queue behind
// them (an ask of the OSDF: give up fast, xrootd#2198).
func (c *Cache) overloaded() bool {
	bound := c.cfg.ShedAfter
	if bound == 0 {
		// FetchMemory's, whichever way it was set (not filled in by
		// EnsureDefaults, which may run before FetchMemory is set).
		bound = c.cfg.FetchMemory
	}
	return bound > 0 && c.FetchWaiting() > bound
}

// FetchWaiting returns the bytes of the block fetches clients wait for
// that are queued for want of fetch memory (an origin's window or the
// global budget full).
func (c *Cache) FetchWaiting() int64 { return c.windows.Waiting() + c.budget.Waiting() }

// heldWhole reports whether the cache holds every block of k.
func (c *Cache) heldWhole(k Key) bool {
	c.mu.Lock()
	e := c.files[k]
	c.mu.Unlock()
	if e != nil && e.initialized() {
		return e.complete()
	}
	in := c.readSidecar(k)
	return in != nil && in.Complete()
}

// shed refuses an open of k for overload (counted).
func (c *Cache) shed(k Key) error {
	c.stats.OpensShed.Add(1)
	return fmt.Errorf("open %s: %w", k, &backend.WaitError{Seconds: shedRetryAfter, Err: backend.ErrOverloaded,
		Reason: "the cache's fetches are queued beyond its bound: try another cache or come back"})
}
