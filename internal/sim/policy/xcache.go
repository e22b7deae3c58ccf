package policy

// xcache models XRootD's XCache (XrdPfc) disk management: files are ordered by
// last access; nothing is evicted on insertion, but every purge interval of
// trace time a check runs, and if occupancy is above the high watermark the
// least recently accessed files are deleted until it is at or below the low
// watermark.
//
// The disk cannot hold more than the capacity: a request that would overflow
// it triggers an immediate purge (to the low watermark, counting the incoming
// bytes). With a negative interval the check runs after every request; then
// xcache's hits are exactly bounded by LRU at low*capacity (below) and LRU at
// high*capacity (above), which the tests check. XCache skips open files when
// purging; traces carry no open intervals, so only the file being read is kept.
type xcache struct {
	lru
	high, low int64 // watermarks in bytes
	interval  int64 // ns; <= 0: check after every request
	nextCheck int64
	started   bool
}

func newXCache(c *Config) *xcache {
	return &xcache{
		lru:      *newLRU(c),
		high:     int64(c.HighWatermark * float64(c.Capacity)),
		low:      int64(c.LowWatermark * float64(c.Capacity)),
		interval: int64(c.PurgeInterval),
	}
}

// Access runs a due purge check, then serves the request. See Policy.
func (c *xcache) Access(id uint32, need, now int64) (int64, bool) {
	if c.interval > 0 {
		if !c.started {
			c.started = true
			c.nextCheck = now + c.interval
		} else if now >= c.nextCheck {
			c.purge(c.high, c.low, noPin)
			c.nextCheck += ((now-c.nextCheck)/c.interval + 1) * c.interval
		}
	}
	had := c.l.n[id].size
	var add int64
	if had >= 0 {
		c.l.moveFront(0, id)
		if need <= had {
			return had, true
		}
		if need > c.cap {
			c.drop(id)
			return had, false
		}
		add = need - had
	} else {
		if need > c.cap {
			return 0, false
		}
		had, add = 0, need
	}
	if c.used+add > c.cap { // disk full: purge now, making room for the new bytes
		c.purge(c.cap-add, c.low-add, id)
	}
	if c.l.n[id].size < 0 {
		c.l.pushFront(0, id)
		c.stats.Inserted++
	}
	c.l.n[id].size = need
	c.used += add
	if c.interval <= 0 {
		c.purge(c.high, c.low, id)
	}
	return had, true
}

// purge deletes least recently used files other than pin until used <= to,
// if used > above.
func (c *xcache) purge(above, to int64, pin uint32) {
	if c.used <= above {
		return
	}
	n := 0
	for c.used > to {
		v, ok := c.l.oldest(0, pin)
		if !ok {
			break
		}
		c.drop(v)
		n++
	}
	if n > 0 {
		c.stats.Purges++
	}
}
