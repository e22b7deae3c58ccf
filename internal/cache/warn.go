package cache

import (
	"sync"
	"time"
)

// warnInterval is the least time between two warnings of one kind: a full
// disk or a dead origin fails every block of every file, and one line per
// failure would flood the log.
const warnInterval = 10 * time.Second

// rateLimitedWarn logs warnings of one kind at most once per warnInterval,
// with the number of warnings suppressed since the last one.
type rateLimitedWarn struct {
	// mu protects last, skipped and once.
	mu      sync.Mutex
	last    map[string]time.Time
	skipped map[string]int
	// once holds the keys of warnings given once per process.
	once map[string]bool
}

// maxWarnOnce bounds the keys warnOnce remembers (one per origin and
// algorithm: few, but forwarding mode names origins at clients' will).
const maxWarnOnce = 1024

// warnOnce logs msg with args the first time it is called with key, and
// never again for that key.
func (c *Cache) warnOnce(key, msg string, args ...any) {
	w := &c.warns
	w.mu.Lock()
	if w.once == nil {
		w.once = map[string]bool{}
	}
	if w.once[key] || len(w.once) >= maxWarnOnce {
		w.mu.Unlock()
		return
	}
	w.once[key] = true
	w.mu.Unlock()
	c.cfg.Logger.Warn(msg, args...)
}

// warn logs msg with args unless a warning of the same msg was logged less
// than warnInterval ago.
func (c *Cache) warn(msg string, args ...any) {
	w := &c.warns
	now := c.cfg.now()
	w.mu.Lock()
	if w.last == nil {
		w.last, w.skipped = map[string]time.Time{}, map[string]int{}
	}
	if now.Sub(w.last[msg]) < warnInterval {
		w.skipped[msg]++
		w.mu.Unlock()
		return
	}
	skipped := w.skipped[msg]
	w.last[msg], w.skipped[msg] = now, 0
	w.mu.Unlock()
	if skipped > 0 {
		args = append(args, "similar_warnings_suppressed", skipped)
	}
	c.cfg.Logger.Warn(msg, args...)
}
