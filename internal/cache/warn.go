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
	// mu protects last and skipped.
	mu      sync.Mutex
	last    map[string]time.Time
	skipped map[string]int
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
