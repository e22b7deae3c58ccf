package policy

// sieve is SIEVE (Zhang et al., NSDI '24): a FIFO queue where a hit only sets
// a visited bit; a hand moves from the oldest file toward the newest, clearing
// set bits and evicting the first file whose bit is clear, and remembers where
// it stopped.
type sieve struct {
	l       lists
	visited []bool
	hand    uint32 // next file to examine, or noPin: start at the oldest
	cap     int64
	used    int64
	stats   Stats
}

func newSIEVE(c *Config) *sieve {
	return &sieve{l: newLists(c.NumFiles, 1), visited: make([]bool, c.NumFiles), hand: noPin, cap: c.Capacity}
}

// Access marks hits and evicts before storing. See Policy.
func (c *sieve) Access(id uint32, need, now int64) (int64, bool) {
	had := c.l.n[id].size
	if had >= 0 {
		c.visited[id] = true
		if need <= had {
			return had, true
		}
		if need > c.cap {
			c.drop(id)
			return had, false
		}
		c.used += need - had
		c.l.n[id].size = need
		for c.used > c.cap {
			c.evictOne(id)
		}
		return had, true
	}
	if need > c.cap {
		return 0, false
	}
	for c.used+need > c.cap {
		c.evictOne(noPin)
	}
	c.l.n[id].size = need
	c.visited[id] = false
	c.used += need
	c.l.pushFront(0, id)
	c.stats.Inserted++
	return 0, true
}

// evictOne runs the hand to the first clear bit, passing over pin.
func (c *sieve) evictOne(pin uint32) {
	s := c.l.sentinel(0)
	o := c.hand
	if o == noPin {
		o = c.l.n[s].prev
	}
	for {
		if o == s {
			o = c.l.n[s].prev // wrap to the oldest
		}
		if o == pin {
			o = c.l.n[o].prev
			continue
		}
		if c.visited[o] {
			c.visited[o] = false
			o = c.l.n[o].prev
			continue
		}
		break
	}
	c.hand = o // drop moves the hand to o's newer neighbour
	c.drop(o)
}

func (c *sieve) drop(v uint32) {
	if c.hand == v {
		c.hand = c.l.n[v].prev
		if c.hand == c.l.sentinel(0) {
			c.hand = noPin
		}
	}
	s := c.l.n[v].size
	c.l.remove(v)
	c.l.n[v].size = absent
	c.used -= s
	c.stats.Evicted++
	c.stats.EvictedBytes += s
}

// Used returns the bytes held. See Policy.
func (c *sieve) Used() int64 { return c.used }

// Stats returns the counters. See Policy.
func (c *sieve) Stats() Stats { return c.stats }
