package policy

// Queue membership of a file (where).
const (
	inNone = iota
	inSmall
	inMain
	inGhost
	inT1
	inT2
	inB1
	inB2
)

// s3fifo is S3-FIFO (Yang et al., SOSP '23) with byte-sized queues: new files
// enter a small FIFO (10 % of the capacity); a file leaving it that was read
// at least twice meanwhile moves to the main FIFO, the others are evicted and
// remembered in a ghost FIFO; a miss on a remembered file goes straight to
// main. Main is a CLOCK with a 2-bit counter. Files larger than the small FIFO
// also go straight to main. Eviction takes from small while it holds at least
// its share, else from main.
type s3fifo struct {
	l                  lists // 0 small, 1 main, 2 ghost
	where              []uint8
	freq               []uint8
	cap, smallCap      int64
	mainCap, ghostCap  int64
	small, main, ghost int64 // bytes per queue
	stats              Stats
}

const (
	qSmall = 0
	qMain  = 1
	qGhost = 2
	// moveToMain is the small-queue read count that earns a place in main.
	moveToMain = 2
)

func newS3FIFO(c *Config) *s3fifo {
	small := int64(c.SmallRatio * float64(c.Capacity))
	return &s3fifo{
		l:        newLists(c.NumFiles, 3),
		where:    make([]uint8, c.NumFiles),
		freq:     make([]uint8, c.NumFiles),
		cap:      c.Capacity,
		smallCap: small,
		mainCap:  c.Capacity - small,
		ghostCap: int64(c.GhostRatio * float64(c.Capacity)),
	}
}

// Access counts hits and inserts through small or main. See Policy.
func (c *s3fifo) Access(id uint32, need, now int64) (int64, bool) {
	w := c.where[id]
	if w == inSmall || w == inMain {
		had := c.l.n[id].size
		c.freq[id] = min(c.freq[id]+1, 3)
		if need <= had {
			return had, true
		}
		if need > c.cap {
			c.drop(id)
			return had, false
		}
		if w == inSmall {
			c.small += need - had
		} else {
			c.main += need - had
		}
		c.l.n[id].size = need
		for c.small+c.main > c.cap {
			c.evictOne(id)
		}
		return had, true
	}
	if need > c.cap {
		return 0, false
	}
	toMain := need > c.smallCap
	if w == inGhost {
		c.forget(id)
		toMain = true
	}
	for c.small+c.main+need > c.cap {
		c.evictOne(noPin)
	}
	c.l.n[id].size = need
	c.freq[id] = 0
	if toMain {
		c.where[id] = inMain
		c.main += need
		c.l.pushFront(qMain, id)
	} else {
		c.where[id] = inSmall
		c.small += need
		c.l.pushFront(qSmall, id)
	}
	c.stats.Inserted++
	return 0, true
}

func (c *s3fifo) evictOne(pin uint32) {
	_, smallOK := c.l.oldest(qSmall, pin)
	_, mainOK := c.l.oldest(qMain, pin)
	if smallOK && (c.main <= c.mainCap || !mainOK) {
		c.evictSmall(pin)
	} else {
		c.evictMain(pin)
	}
}

// evictSmall promotes read-again files to main until it evicts one.
func (c *s3fifo) evictSmall(pin uint32) {
	for {
		t, ok := c.l.oldest(qSmall, pin)
		if !ok {
			return
		}
		s := c.l.n[t].size
		c.l.remove(t)
		c.small -= s
		if c.freq[t] >= moveToMain {
			c.freq[t] = 0
			c.where[t] = inMain
			c.main += s
			c.l.pushFront(qMain, t)
			continue
		}
		c.stats.Evicted++
		c.stats.EvictedBytes += s
		c.where[t] = inNone
		c.l.n[t].size = absent
		if c.ghostCap > 0 && s <= c.ghostCap {
			c.where[t] = inGhost
			c.l.n[t].size = s
			c.ghost += s
			c.l.pushFront(qGhost, t)
			for c.ghost > c.ghostCap {
				g, _ := c.l.oldest(qGhost, noPin)
				c.forget(g)
			}
		}
		return
	}
}

// evictMain runs the CLOCK: read files go around again with one count less.
func (c *s3fifo) evictMain(pin uint32) {
	for {
		t, ok := c.l.oldest(qMain, pin)
		if !ok {
			return
		}
		if c.freq[t] > 0 {
			c.freq[t]--
			c.l.moveFront(qMain, t)
			continue
		}
		c.drop(t)
		return
	}
}

// drop deletes a cached file without remembering it.
func (c *s3fifo) drop(v uint32) {
	s := c.l.n[v].size
	if c.where[v] == inSmall {
		c.small -= s
	} else {
		c.main -= s
	}
	c.l.remove(v)
	c.where[v] = inNone
	c.l.n[v].size = absent
	c.stats.Evicted++
	c.stats.EvictedBytes += s
}

// forget removes a ghost entry.
func (c *s3fifo) forget(g uint32) {
	c.ghost -= c.l.n[g].size
	c.l.remove(g)
	c.where[g] = inNone
	c.l.n[g].size = absent
}

// Used returns the bytes held. See Policy.
func (c *s3fifo) Used() int64 { return c.small + c.main }

// Stats returns the counters. See Policy.
func (c *s3fifo) Stats() Stats { return c.stats }
