package cache

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"time"
)

// spaceRules are the space settings that can change while the cache runs
// (SetSpace, on SIGHUP): watermarks, age and count limits, quotas and pins.
// A value is never modified; SetSpace swaps in a new one.
type spaceRules struct {
	high, low float64
	maxAge    time.Duration
	maxFiles  int
	quotas    []Quota
	pins      []string
	pinShare  float64
	// capacity is Config.Capacity (0: the file systems' size).
	capacity int64
	// verifyChecksum and purgeInterval are Config's.
	verifyChecksum string
	purgeInterval  time.Duration
}

func rulesOf(c *Config) *spaceRules {
	return &spaceRules{high: c.HighWatermark, low: c.LowWatermark, maxAge: c.MaxAge, maxFiles: c.MaxFiles,
		quotas: append([]Quota(nil), c.Quotas...), pins: append([]string(nil), c.Pin...), pinShare: c.PinShare,
		capacity: c.Capacity, verifyChecksum: c.VerifyChecksum, purgeInterval: c.PurgeInterval}
}

// quotaOf returns the index of the quota with the longest prefix covering
// p, or -1.
func (r *spaceRules) quotaOf(p string) int {
	best, bestLen := -1, -1
	for i, q := range r.quotas {
		if l := len(q.Prefix); l > bestLen && hasPathPrefix(p, q.Prefix) {
			best, bestLen = i, l
		}
	}
	return best
}

// pinned reports whether p is under a pinned prefix.
func (r *spaceRules) pinned(p string) bool {
	for _, pre := range r.pins {
		if hasPathPrefix(p, pre) {
			return true
		}
	}
	return false
}

// quotaLimitLocked is q's size in bytes; 0 while a share quota's capacity
// is unknown (then it is not enforced). MUST be called with x.mu held.
func (x *index) quotaLimitLocked(q Quota) int64 {
	if q.Size > 0 {
		return q.Size
	}
	return int64(q.Share * float64(x.total))
}

// quotaHighLocked is where purging q starts (no limit while unknown).
func (x *index) quotaHighLocked(q Quota) int64 {
	lim := x.quotaLimitLocked(q)
	if lim <= 0 {
		return 1<<63 - 1
	}
	return watermark(q.HighWatermark, lim)
}

func (x *index) quotaLowLocked(q Quota) int64 {
	return watermark(q.LowWatermark, x.quotaLimitLocked(q))
}

// setTotal records the capacity; pins over the share of a capacity now
// known (or smaller) are dropped, least recently used first.
func (x *index) setTotal(total int64) (unpinned int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.total = total
	return x.unpinOverLocked()
}

// pinLimitLocked is the most pinned files may hold: the pin share of the
// capacity; 0 (no limit) while the capacity is unknown.
// MUST be called with x.mu held.
func (x *index) pinLimitLocked() int64 {
	return int64(x.rules.pinShare * float64(x.total))
}

// unpinOverLocked unpins the least recently used pinned items until the
// pinned bytes are within the limit, and returns how many it unpinned.
// MUST be called with x.mu held.
func (x *index) unpinOverLocked() (n int) {
	lim := x.pinLimitLocked()
	if lim <= 0 {
		return 0
	}
	for it := x.tail; it != nil && x.pinnedBytes > lim; it = it.prev {
		if it.pinned {
			it.pinned = false
			x.pinnedBytes -= it.bytes
			n++
		}
	}
	return n
}

// validSpaceRules checks quotas and pins.
func validSpaceRules(quotas []Quota, pins []string) []error {
	var errs []error
	absPrefix := func(what, p string) error {
		if !strings.HasPrefix(p, "/") || path.Clean(p) != strings.TrimSuffix(p, "/") && p != "/" || strings.Contains(p, "..") {
			return fmt.Errorf("%s %q: want a clean absolute path prefix such as /store/user/", what, p)
		}
		return nil
	}
	seen := map[string]bool{}
	for _, q := range quotas {
		if err := absPrefix("quota prefix", q.Prefix); err != nil {
			errs = append(errs, err)
		}
		key := strings.TrimSuffix(q.Prefix, "/")
		if seen[key] {
			errs = append(errs, fmt.Errorf("quota prefix %q: given twice", q.Prefix))
		}
		seen[key] = true
		switch {
		case q.Size < 0 || q.Share < 0:
			errs = append(errs, fmt.Errorf("quota %s: size %d, share %v: must not be negative", q.Prefix, q.Size, q.Share))
		case (q.Size > 0) == (q.Share > 0):
			errs = append(errs, fmt.Errorf("quota %s: give exactly one of size and share", q.Prefix))
		case q.Share > 1:
			errs = append(errs, fmt.Errorf("quota %s: share %v: a fraction of the capacity, at most 1", q.Prefix, q.Share))
		}
		if q.LowWatermark <= 0 || q.HighWatermark <= 0 || q.LowWatermark >= q.HighWatermark ||
			(q.LowWatermark <= 1) != (q.HighWatermark <= 1) {
			errs = append(errs, fmt.Errorf("quota %s: watermarks low %v, high %v: want 0 < low < high, both fractions or both sizes", q.Prefix, q.LowWatermark, q.HighWatermark))
		}
	}
	for _, p := range pins {
		if err := absPrefix("pin", p); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// Space holds the settings SetSpace changes while the cache runs.
type Space struct {
	HighWatermark, LowWatermark float64
	MaxAge                      time.Duration
	MaxFiles                    int
	Quotas                      []Quota
	Pin                         []string
	PinShare                    float64
	// Capacity, VerifyChecksum and PurgeInterval are Config's; zero
	// values mean their defaults, as in Config (Capacity 0: the file
	// systems' size).
	Capacity       int64
	VerifyChecksum string
	PurgeInterval  time.Duration
}

// SetSpace replaces the watermarks, age and count limits, quotas and pins
// of a running cache (a configuration reload), with the defaults and
// checks of New. A purge follows at once. On error nothing changes.
func (c *Cache) SetSpace(s Space) error {
	nc := c.cfg
	nc.HighWatermark, nc.LowWatermark = s.HighWatermark, s.LowWatermark
	nc.MaxAge, nc.MaxFiles = s.MaxAge, s.MaxFiles
	nc.Quotas = append([]Quota(nil), s.Quotas...)
	nc.Pin = append([]string(nil), s.Pin...)
	nc.PinShare = s.PinShare
	nc.Capacity, nc.VerifyChecksum, nc.PurgeInterval = s.Capacity, s.VerifyChecksum, s.PurgeInterval
	nc.EnsureDefaults()
	if err := nc.Validate(); err != nil {
		return fmt.Errorf("cache space settings: %w", err)
	}
	r := rulesOf(&nc)
	c.rules.Store(r)
	c.index.setRules(r)
	c.kickPurge()
	return nil
}

// QuotaUsage is the state of one quota.
type QuotaUsage struct {
	Prefix string
	// Limit is the quota in bytes (0 while a share quota's capacity is
	// unknown); High and Low its watermarks in bytes.
	Limit, High, Low int64
	// Bytes and Files are what the quota's files hold on disk.
	Bytes int64
	Files int
	// EvictedFiles and EvictedBytes count what purges of this quota (and
	// of the whole cache) removed from it since start-up.
	EvictedFiles, EvictedBytes int64
}

// Quotas returns the state of every quota, in configuration order.
func (c *Cache) Quotas() []QuotaUsage {
	x := c.index
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]QuotaUsage, len(x.groups))
	for i, g := range x.groups {
		out[i] = QuotaUsage{Prefix: g.quota.Prefix, Limit: x.quotaLimitLocked(g.quota),
			Low: x.quotaLowLocked(g.quota), Bytes: g.bytes, Files: g.files,
			EvictedFiles: g.evictedFiles, EvictedBytes: g.evictedBytes}
		if out[i].Limit > 0 {
			out[i].High = x.quotaHighLocked(g.quota)
		}
	}
	return out
}

// errPinnedOverHigh is logged when pinned files alone keep the cache over
// its high watermark.
var errPinnedOverHigh = errors.New("cache: pinned files alone exceed the high watermark")

// errPinShareFull is logged when a file in a pinned namespace is not pinned
// because pinned files already hold their share of the capacity.
var errPinShareFull = errors.New("cache: pinned files hold space.pin_share of the capacity")
