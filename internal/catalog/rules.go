package catalog

import "strings"

// Quota bounds the space the files under a path prefix may hold.
type Quota struct {
	// Prefix is an absolute path prefix of the cached path ("/store/user/";
	// the path after name mapping, which is the client's path unless
	// [[map]] rules rewrite it).
	Prefix string
	// Size is the quota in bytes; or Share, a fraction of the cache's
	// capacity (0 < Share <= 1). Exactly one of the two is set.
	Size  int64
	Share float64
	// HighWatermark and LowWatermark are fractions of the quota (or byte
	// counts, if above 1). Default: the cache's watermarks when those are
	// fractions, else 0.95 and 0.90.
	HighWatermark, LowWatermark float64
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

// Rules classify the catalogue's files: the quota each counts against
// (the longest prefix covering it) and the pins, which purge never evicts
// while pinned files hold at most PinShare of the capacity.
type Rules struct {
	Quotas   []Quota
	Pins     []string
	PinShare float64
}

// quotaOf returns the index of the quota with the longest prefix covering
// p, or -1.
func (r *Rules) quotaOf(p string) int {
	best, bestLen := -1, -1
	for i, q := range r.Quotas {
		if l := len(q.Prefix); l > bestLen && HasPathPrefix(p, q.Prefix) {
			best, bestLen = i, l
		}
	}
	return best
}

// pinned reports whether p is under a pinned prefix.
func (r *Rules) pinned(p string) bool {
	for _, pre := range r.Pins {
		if HasPathPrefix(p, pre) {
			return true
		}
	}
	return false
}

// HasPathPrefix reports whether p is prefix or lies under it, on whole path
// components ("/store/user" covers "/store/user/x", not "/store/username").
func HasPathPrefix(p, prefix string) bool {
	prefix = strings.TrimSuffix(prefix, "/")
	if prefix == "" {
		return true
	}
	return p == prefix || strings.HasPrefix(p, prefix) && p[len(prefix)] == '/'
}

// Watermark is v of total: v itself when above 1 (a size in bytes), else
// the fraction v of total.
func Watermark(v float64, total int64) int64 {
	if v <= 1 {
		return int64(v * float64(total))
	}
	return int64(v)
}

// quotaLimitLocked is q's size in bytes; 0 while a share quota's capacity
// is unknown (then it is not enforced). MUST be called with c.mu held.
func (c *Catalog) quotaLimitLocked(q Quota) int64 {
	if q.Size > 0 {
		return q.Size
	}
	return int64(q.Share * float64(c.total))
}

// quotaHighLocked is where purging q starts (no limit while unknown).
func (c *Catalog) quotaHighLocked(q Quota) int64 {
	lim := c.quotaLimitLocked(q)
	if lim <= 0 {
		return 1<<63 - 1
	}
	return Watermark(q.HighWatermark, lim)
}

func (c *Catalog) quotaLowLocked(q Quota) int64 {
	return Watermark(q.LowWatermark, c.quotaLimitLocked(q))
}

// pinLimitLocked is the most pinned files may hold: the pin share of the
// capacity; 0 (no limit) while the capacity is unknown.
// MUST be called with c.mu held.
func (c *Catalog) pinLimitLocked() int64 {
	return int64(c.rules.PinShare * float64(c.total))
}

// unpinOverLocked unpins the least recently used pinned items until the
// pinned bytes are within the limit, and returns how many it unpinned.
// MUST be called with c.mu held.
func (c *Catalog) unpinOverLocked() (n int) {
	lim := c.pinLimitLocked()
	if lim <= 0 {
		return 0
	}
	unpin := func(l *list) {
		for i := l.tail; i != none && c.pinnedBytes > lim; i = c.at(i).prev {
			if it := c.at(i); it.flags&flagPinned != 0 {
				it.flags &^= flagPinned
				c.pinnedBytes -= it.bytes
				n++
			}
		}
	}
	unpin(&c.pending) // not yet in LRU order: taken as the oldest
	unpin(&c.lru)
	return n
}

// SetCapacity records the capacity share quotas and the pin share refer
// to; pins over the share of a capacity now known (or smaller) are
// dropped, least recently used first. It returns how many were.
func (c *Catalog) SetCapacity(total int64) (unpinned int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total = total
	return c.unpinOverLocked()
}

// Pinned returns the pinned bytes and their limit (0: unknown).
func (c *Catalog) Pinned() (pinned, limit int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pinnedBytes, c.pinLimitLocked()
}

// Quotas returns the state of every quota, in the order of the rules.
func (c *Catalog) Quotas() []QuotaUsage {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]QuotaUsage, len(c.groups))
	for i := range c.groups {
		g := &c.groups[i]
		out[i] = QuotaUsage{Prefix: g.quota.Prefix, Limit: c.quotaLimitLocked(g.quota),
			Low: c.quotaLowLocked(g.quota), Bytes: g.bytes, Files: g.files,
			EvictedFiles: g.evictedFiles, EvictedBytes: g.evictedBytes}
		if out[i].Limit > 0 {
			out[i].High = c.quotaHighLocked(g.quota)
		}
	}
	return out
}
