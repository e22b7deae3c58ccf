package policy

// lfu evicts the file with the fewest requests since it was stored, the least
// recently used among equals. Counts restart when a file is stored again.
type lfu struct {
	q     keyHeap
	size  []int64
	freq  []int64
	cap   int64
	used  int64
	seq   int64 // request counter: the recency tie-break
	stats Stats
}

func newLFU(c *Config) *lfu {
	return &lfu{q: newKeyHeap(c.NumFiles), size: absentSizes(c.NumFiles), freq: make([]int64, c.NumFiles), cap: c.Capacity}
}

func absentSizes(n int) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = absent
	}
	return s
}

// Access counts the request and evicts by (count, recency). See Policy.
func (c *lfu) Access(id uint32, need, now int64) (int64, bool) {
	c.seq++
	had := c.size[id]
	if had >= 0 {
		c.freq[id]++
		c.q.set(id, float64(c.freq[id]), c.seq)
		if need <= had {
			return had, true
		}
		if need > c.cap {
			c.drop(id)
			return had, false
		}
		c.used += need - had
		c.size[id] = need
		c.q.remove(id) // pinned while making room
		c.evict()
		c.q.set(id, float64(c.freq[id]), c.seq)
		return had, true
	}
	if need > c.cap {
		return 0, false
	}
	c.size[id] = need
	c.freq[id] = 1
	c.used += need
	c.stats.Inserted++
	c.evict()
	c.q.set(id, 1, c.seq)
	return 0, true
}

func (c *lfu) evict() {
	for c.used > c.cap {
		c.drop(c.q.top().id)
	}
}

func (c *lfu) drop(v uint32) {
	s := c.size[v]
	c.q.remove(v)
	c.size[v] = absent
	c.used -= s
	c.stats.Evicted++
	c.stats.EvictedBytes += s
}

// Used returns the bytes held. See Policy.
func (c *lfu) Used() int64 { return c.used }

// Stats returns the counters. See Policy.
func (c *lfu) Stats() Stats { return c.stats }

// gdsfScale turns freq/size into numbers near 1 for GB-sized files.
const gdsfScale = 1e9

// gdsf is GreedyDual-Size-Frequency (Cherkasova 1998) with unit cost: a file's
// priority is L + freq * 1e9 / size, the lowest priority is evicted and L
// becomes its priority. Small, frequently read files stay; this maximises the
// request hit rate rather than the byte hit rate.
type gdsf struct {
	lfu
	L float64
}

func newGDSF(c *Config) *gdsf { return &gdsf{lfu: *newLFU(c)} }

func (c *gdsf) prio(id uint32) float64 {
	return c.L + float64(c.freq[id])*gdsfScale/float64(max(c.size[id], 1))
}

// Access updates the priority and evicts the lowest. See Policy.
func (c *gdsf) Access(id uint32, need, now int64) (int64, bool) {
	c.seq++
	had := c.size[id]
	if had >= 0 {
		c.freq[id]++
		if need <= had {
			c.q.set(id, c.prio(id), c.seq)
			return had, true
		}
		if need > c.cap {
			c.drop(id)
			return had, false
		}
		c.used += need - had
		c.size[id] = need
		c.q.remove(id) // pinned while making room
		c.evict()
		c.q.set(id, c.prio(id), c.seq)
		return had, true
	}
	if need > c.cap {
		return 0, false
	}
	c.size[id] = need
	c.freq[id] = 1
	c.used += need
	c.stats.Inserted++
	c.evict()
	c.q.set(id, c.prio(id), c.seq)
	return 0, true
}

func (c *gdsf) evict() {
	for c.used > c.cap {
		e := c.q.top()
		c.L = e.k1
		c.drop(e.id)
	}
}

// opt is Belady's MIN: on overflow it evicts the file whose next request is
// furthest away, and it declines to store a file if that would mean evicting
// files needed sooner than it. With equal sizes it is optimal; with unequal
// sizes (exact OPT is NP-hard) it is the standard offline bound.
type opt struct {
	q      keyHeap // min-heap on (-next, -id): top is the furthest next use
	size   []int64
	next   []int32
	cursor int
	cap    int64
	used   int64
	stats  Stats
	popped []heapEntry
}

func newOPT(c *Config) *opt {
	return &opt{q: newKeyHeap(c.NumFiles), size: absentSizes(c.NumFiles), next: c.Next, cap: c.Capacity}
}

// Access must see the trace's requests in order. See Policy.
func (c *opt) Access(id uint32, need, now int64) (int64, bool) {
	nx := int64(c.next[c.cursor])
	c.cursor++
	had := c.size[id]
	if had >= 0 {
		if need <= had {
			c.q.set(id, -float64(nx), -int64(id))
			return had, true
		}
		if need > c.cap {
			c.drop(id)
			return had, false
		}
		c.q.remove(id)
		ok := c.makeRoom(need-had, nx)
		c.q.set(id, -float64(nx), -int64(id))
		if !ok {
			return had, false // keeps its blocks; the new ones pass through
		}
		c.used += need - had
		c.size[id] = need
		return had, true
	}
	if need > c.cap || !c.makeRoom(need, nx) {
		return 0, false
	}
	c.size[id] = need
	c.used += need
	c.stats.Inserted++
	c.q.set(id, -float64(nx), -int64(id))
	return 0, true
}

// makeRoom evicts files used later than nx, furthest first, until add more
// bytes fit. If that cannot free enough, it evicts nothing and returns false.
func (c *opt) makeRoom(add, nx int64) bool {
	free := c.cap - c.used
	c.popped = c.popped[:0]
	for free < add && c.q.len() > 0 && -c.q.top().k1 > float64(nx) {
		e := c.q.pop()
		c.popped = append(c.popped, e)
		free += c.size[e.id]
	}
	if free < add {
		for _, e := range c.popped {
			c.q.set(e.id, e.k1, e.k2)
		}
		return false
	}
	for _, e := range c.popped {
		c.drop(e.id)
	}
	return true
}

func (c *opt) drop(v uint32) {
	s := c.size[v]
	c.q.remove(v)
	c.size[v] = absent
	c.used -= s
	c.stats.Evicted++
	c.stats.EvictedBytes += s
}

// Used returns the bytes held. See Policy.
func (c *opt) Used() int64 { return c.used }

// Stats returns the counters. See Policy.
func (c *opt) Stats() Stats { return c.stats }
