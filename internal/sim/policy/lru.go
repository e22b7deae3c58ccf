package policy

// lru evicts the least recently used files whenever an insertion overflows the
// capacity. Its hit rate at every size follows from one pass of stack
// distances (package sweep), which must agree with it exactly.
type lru struct {
	l     lists
	cap   int64
	used  int64
	stats Stats
	// fifo: hits do not reorder, so the file stored longest ago goes first.
	fifo bool
}

var _ Policy = (*lru)(nil)

func newLRU(c *Config) *lru {
	return &lru{l: newLists(c.NumFiles, 1), cap: c.Capacity}
}

// Access is the hot loop of every LRU replay: two slice lookups and a few
// link updates, no allocation. See Policy.
func (c *lru) Access(id uint32, need, now int64) (int64, bool) {
	had := c.l.n[id].size
	if had >= 0 {
		if !c.fifo {
			c.l.moveFront(0, id)
		}
		if need <= had {
			return had, true
		}
		if need > c.cap {
			c.drop(id)
			return had, false
		}
		c.used += need - had
		c.l.n[id].size = need
	} else {
		if need > c.cap {
			return 0, false
		}
		had = 0
		c.l.n[id].size = need
		c.used += need
		c.l.pushFront(0, id)
		c.stats.Inserted++
	}
	for c.used > c.cap {
		// Never id: under LRU it is the newest, so the oldest is another
		// file while used > cap; under FIFO a growing file keeps its place.
		v, _ := c.l.oldest(0, id)
		c.drop(v)
	}
	return had, true
}

func (c *lru) drop(v uint32) {
	s := c.l.n[v].size
	c.l.remove(v)
	c.l.n[v].size = absent
	c.used -= s
	c.stats.Evicted++
	c.stats.EvictedBytes += s
}

// Used returns the bytes held. See Policy.
func (c *lru) Used() int64 { return c.used }

// Stats returns the counters. See Policy.
func (c *lru) Stats() Stats { return c.stats }

// admit2 is LRU with a second-access admission filter: a file is stored only
// when it has been requested before (ever, in this trace), so files read once
// never displace others. The history is one bit per file.
type admit2 struct {
	lru
	seen []bool
}

func newAdmit2(c *Config) *admit2 {
	return &admit2{lru: *newLRU(c), seen: make([]bool, c.NumFiles)}
}

// Access applies the filter, then LRU. See Policy.
func (c *admit2) Access(id uint32, need, now int64) (int64, bool) {
	if c.l.n[id].size < 0 && !c.seen[id] {
		c.seen[id] = true
		return 0, false
	}
	c.seen[id] = true
	return c.lru.Access(id, need, now)
}

// newFIFO returns a policy that evicts the file stored longest ago; hits do
// not reorder.
func newFIFO(c *Config) *lru {
	f := newLRU(c)
	f.fifo = true
	return f
}

// infinite never evicts: its misses are the compulsory ones.
type infinite struct {
	size  []int64
	used  int64
	stats Stats
}

func newInfinite(c *Config) *infinite {
	s := make([]int64, c.NumFiles)
	for i := range s {
		s[i] = absent
	}
	return &infinite{size: s}
}

// Access stores everything. See Policy.
func (c *infinite) Access(id uint32, need, now int64) (int64, bool) {
	had := c.size[id]
	if had < 0 {
		had = 0
		c.stats.Inserted++
		c.size[id] = 0
	}
	if need > had {
		c.used += need - had
		c.size[id] = need
	}
	return had, true
}

// Used returns the bytes held. See Policy.
func (c *infinite) Used() int64 { return c.used }

// Stats returns the counters. See Policy.
func (c *infinite) Stats() Stats { return c.stats }
