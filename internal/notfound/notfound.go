// Package notfound remembers an origin's "not found" answers for a short
// time (negative caching), so that jobs probing for files that do not exist
// (a missing input, a retry loop, an `xrdfs stat` in a script) cost one
// origin round trip per path and TTL, not one per request.
//
// Only Stat and Open answers that wrap origin.ErrNotFound are remembered; any
// other error, and every success, forgets the path. A remembered answer is
// returned wrapped with the same sentinel, so callers map it to
// kXR_NotFound / 404 exactly as the origin's own answer.
package notfound

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hepcache/hepcache/origin"
)

// Defaults. A zero Config field means "use the default".
const (
	// defaultTTL is short: a file written at the origin becomes visible
	// through the cache within half a minute, while a storm of failed
	// opens for one path reaches the origin twice a minute at most.
	defaultTTL = 30 * time.Second
	// defaultMaxEntries and defaultMaxBytes bound the memory of one
	// origin's remembered paths: each costs its length plus
	// entryOverhead (measured by TestEntryMemory: about 110 bytes of map
	// entry and queue slot, more with the allocator's rounding), so
	// 100 000 short paths take some 17 MB, and long ones (4 KB is
	// allowed) stop at defaultMaxBytes instead of 480 MB.
	defaultMaxEntries = 100_000
	defaultMaxBytes   = 32 << 20
	entryOverhead     = 160
)

// Config configures negative caching for every origin a resolver returns.
type Config struct {
	// TTL is how long a "not found" is remembered. Default 30 s; negative
	// turns negative caching off.
	TTL time.Duration
	// PerOrigin overrides TTL for origins by their canonical URL
	// ("root://host:1094"); a negative value turns it off for that origin.
	PerOrigin map[string]time.Duration
	// MaxEntries bounds the paths remembered per origin; the oldest are
	// forgotten first. Default 100 000.
	MaxEntries int
	// MaxBytes bounds the memory of the paths remembered per origin (each
	// costs its length plus about 160 bytes); the oldest are forgotten
	// first. Default 32 MiB.
	MaxBytes int64

	// now is the clock; a test seam.
	now func() time.Time
}

// EnsureDefaults fills zero fields with their defaults.
func (c *Config) EnsureDefaults() {
	if c.TTL == 0 {
		c.TTL = defaultTTL
	}
	if c.MaxEntries == 0 {
		c.MaxEntries = defaultMaxEntries
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = defaultMaxBytes
	}
	if c.now == nil {
		c.now = time.Now
	}
}

// Validate reports every problem with the configuration in one error.
func (c *Config) Validate() error {
	var errs []error
	if c.MaxEntries < 0 {
		errs = append(errs, fmt.Errorf("max entries %d: must not be negative", c.MaxEntries))
	}
	if c.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("max bytes %d: must not be negative", c.MaxBytes))
	}
	for o, ttl := range c.PerOrigin {
		if o == "" {
			errs = append(errs, fmt.Errorf("per-origin TTL %v: empty origin URL", ttl))
		}
	}
	return errors.Join(errs...)
}

// ttl returns the TTL for origin o; <= 0 means off.
func (c *Config) ttl(o string) time.Duration {
	if t, ok := c.PerOrigin[o]; ok {
		return t
	}
	return c.TTL
}

// Stats are the counters of a Resolver, summed over its origins.
type Stats struct {
	// Hits counts requests answered "not found" without the origin.
	Hits atomic.Int64
	// Remembered counts "not found" answers stored.
	Remembered atomic.Int64
}

// Resolver wraps an origin.Resolver so that every origin it returns
// remembers "not found" answers. Safe for concurrent use.
type Resolver struct {
	cfg   Config
	next  origin.Resolver
	stats Stats

	// mu protects wrapped.
	mu      sync.Mutex
	wrapped map[origin.Origin]origin.Origin
}

var _ origin.Resolver = (*Resolver)(nil)

// New returns a Resolver over next.
func New(cfg *Config, next origin.Resolver) (*Resolver, error) {
	c := *cfg
	c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("negative cache config: %w", err)
	}
	return &Resolver{cfg: c, next: next, wrapped: map[origin.Origin]origin.Origin{}}, nil
}

// Stats returns the live counters.
func (r *Resolver) Stats() *Stats { return &r.stats }

// Resolve implements origin.Resolver.
func (r *Resolver) Resolve(ctx context.Context, url string) (origin.Origin, error) {
	o, err := r.next.Resolve(ctx, url)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if w, ok := r.wrapped[o]; ok {
		return w, nil
	}
	var w origin.Origin = o
	if ttl := r.cfg.ttl(o.String()); ttl > 0 {
		w = &negOrigin{Origin: o, ttl: ttl, max: r.cfg.MaxEntries, maxBytes: r.cfg.MaxBytes, now: r.cfg.now, stats: &r.stats, seen: map[string]time.Time{}}
	}
	r.wrapped[o] = w
	return w, nil
}

// negOrigin is an Origin that remembers the paths it answered "not found".
type negOrigin struct {
	origin.Origin
	ttl      time.Duration
	max      int
	maxBytes int64
	now      func() time.Time
	stats    *Stats

	// mu protects seen, bytes and order.
	mu sync.Mutex
	// seen maps a path to when its "not found" expires; bytes is what
	// its entries cost (entryCost).
	seen  map[string]time.Time
	bytes int64
	// order holds the paths in the order they were remembered (with
	// duplicates for re-remembered paths), to forget the oldest first.
	order []string
}

// ListEach implements origin.ListEacher, passing the origin's own through
// (listings are not remembered).
func (o *negOrigin) ListEach(ctx context.Context, p string, withStat bool, fn func(origin.FileInfo) error) error {
	return origin.ListEach(ctx, o.Origin, p, withStat, fn)
}

// remembered reports whether p is known not to exist; it forgets expired
// answers.
func (o *negOrigin) remembered(p string) (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	exp, ok := o.seen[p]
	if !ok {
		return time.Time{}, false
	}
	if !o.now().Before(exp) {
		o.forgetLocked(p)
		return time.Time{}, false
	}
	return exp, true
}

func entryCost(p string) int64 { return int64(len(p)) + entryOverhead }

// forgetLocked drops p. MUST be called with o.mu held.
func (o *negOrigin) forgetLocked(p string) {
	if _, ok := o.seen[p]; ok {
		delete(o.seen, p)
		o.bytes -= entryCost(p)
	}
}

// note records the outcome of an origin request for p.
func (o *negOrigin) note(p string, err error) {
	notFound := errors.Is(err, origin.ErrNotFound)
	o.mu.Lock()
	defer o.mu.Unlock()
	if !notFound {
		o.forgetLocked(p)
		return
	}
	if _, ok := o.seen[p]; !ok {
		o.bytes += entryCost(p)
	}
	o.seen[p] = o.now().Add(o.ttl)
	o.order = append(o.order, p)
	o.stats.Remembered.Add(1)
	for (len(o.seen) > o.max || o.bytes > o.maxBytes) && len(o.order) > 0 {
		q := o.order[0]
		o.order[0] = "" // the array must not keep a forgotten path alive
		o.order = o.order[1:]
		o.forgetLocked(q)
	}
	if len(o.order) > 2*len(o.seen)+16 {
		// Compact: drop queue entries of paths already forgotten or
		// re-remembered later, so the queue (and the paths it keeps
		// alive) stays proportional to seen.
		kept := make([]string, 0, len(o.seen))
		last := make(map[string]int, len(o.seen))
		for i, q := range o.order {
			last[q] = i
		}
		for i, q := range o.order {
			if _, ok := o.seen[q]; ok && last[q] == i {
				kept = append(kept, q)
			}
		}
		o.order = kept
	}
}

func (o *negOrigin) hit(op, p string, exp time.Time) error {
	o.stats.Hits.Add(1)
	return fmt.Errorf("%s %s: not found at %s (answer remembered until %s): %w",
		op, p, o.Origin.String(), exp.UTC().Format(time.RFC3339), origin.ErrNotFound)
}

// Stat implements origin.Origin.
func (o *negOrigin) Stat(ctx context.Context, p string) (origin.FileInfo, error) {
	if exp, ok := o.remembered(p); ok {
		return origin.FileInfo{}, o.hit("stat", p, exp)
	}
	fi, err := o.Origin.Stat(ctx, p)
	if ctx.Err() == nil {
		o.note(p, err)
	}
	return fi, err
}

// Open implements origin.Origin.
func (o *negOrigin) Open(ctx context.Context, p string) (origin.File, error) {
	if exp, ok := o.remembered(p); ok {
		return nil, o.hit("open", p, exp)
	}
	f, err := o.Origin.Open(ctx, p)
	if ctx.Err() == nil {
		o.note(p, err)
	}
	return f, err
}
