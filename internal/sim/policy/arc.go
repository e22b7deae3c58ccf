package policy

// arc is ARC (Megiddo and Modha, FAST '03) measured in bytes: T1 holds files
// read once, T2 files read again, B1 and B2 remember files evicted from them;
// p is the byte target for T1. A hit in B1 raises p by the file's size times
// max(1, |B2|/|B1|) (bytes), a hit in B2 lowers it symmetrically. REPLACE
// evicts from T1 when it exceeds p, else from T2. Directory bounds, in bytes:
// |T1|+|B1| <= c and |T1|+|T2|+|B1|+|B2| <= 2c.
type arc struct {
	l     lists // 0 T1, 1 T2, 2 B1, 3 B2
	where []uint8
	b     [4]int64 // bytes per list
	p     int64
	cap   int64
	stats Stats
}

const (
	lT1 = 0
	lT2 = 1
	lB1 = 2
	lB2 = 3
)

func newARC(c *Config) *arc {
	return &arc{l: newLists(c.NumFiles, 4), where: make([]uint8, c.NumFiles), cap: c.Capacity}
}

func (c *arc) used() int64 { return c.b[lT1] + c.b[lT2] }

// Access follows ARC's four cases. See Policy.
func (c *arc) Access(id uint32, need, now int64) (int64, bool) {
	switch c.where[id] {
	case inT1, inT2:
		had := c.l.n[id].size
		if c.where[id] == inT1 {
			c.move(id, lT1, lT2)
		} else {
			c.l.moveFront(lT2, id)
		}
		if need <= had {
			return had, true
		}
		if need > c.cap {
			c.drop(id)
			c.trim()
			return had, false
		}
		c.b[lT2] += need - had
		c.l.n[id].size = need
		for c.used() > c.cap {
			c.replace(false, id)
		}
		c.trim()
		return had, true
	case inB1, inB2:
		if need > c.cap {
			return 0, false
		}
		inB2 := c.where[id] == inB2
		b1, b2 := float64(c.b[lB1]), float64(c.b[lB2])
		if inB2 {
			b1, b2 = b2, b1
		}
		ratio := 1.0
		if b1 > 0 && b2 > b1 {
			ratio = b2 / b1
		}
		delta := int64(float64(need) * ratio)
		if inB2 {
			c.p = max(0, c.p-delta)
		} else {
			c.p = min(c.cap, c.p+delta)
		}
		c.forget(id)
		for c.used()+need > c.cap {
			c.replace(inB2, noPin)
		}
		c.insert(id, need, lT2)
		c.trim()
		return 0, true
	}
	if need > c.cap {
		return 0, false
	}
	for !c.l.empty(lB1) && c.b[lT1]+c.b[lB1]+need > c.cap {
		g, _ := c.l.oldest(lB1, noPin)
		c.forget(g)
	}
	for !c.l.empty(lB2) && c.b[lT1]+c.b[lT2]+c.b[lB1]+c.b[lB2]+need > 2*c.cap {
		g, _ := c.l.oldest(lB2, noPin)
		c.forget(g)
	}
	for c.used()+need > c.cap {
		c.replace(false, noPin)
	}
	c.insert(id, need, lT1)
	c.trim()
	return 0, true
}

func (c *arc) insert(id uint32, need int64, k int) {
	c.l.n[id].size = need
	c.where[id] = uint8(inT1 + k)
	c.b[k] += need
	c.l.pushFront(k, id)
	c.stats.Inserted++
}

// move transfers id from list a to the front of list b.
func (c *arc) move(id uint32, a, b int) {
	s := c.l.n[id].size
	c.l.remove(id)
	c.b[a] -= s
	c.b[b] += s
	c.where[id] = uint8(inT1 + b)
	c.l.pushFront(b, id)
}

// replace evicts one file (not pin) from T1 or T2 into its ghost list.
func (c *arc) replace(inB2 bool, pin uint32) {
	useT1 := !c.l.empty(lT1) && (c.b[lT1] > c.p || (inB2 && c.b[lT1] == c.p))
	if !useT1 {
		if _, ok := c.l.oldest(lT2, pin); !ok {
			useT1 = true
		}
	}
	from, to := lT2, lB2
	if useT1 {
		from, to = lT1, lB1
	}
	v, _ := c.l.oldest(from, pin)
	s := c.l.n[v].size
	c.move(v, from, to)
	c.stats.Evicted++
	c.stats.EvictedBytes += s
}

// trim enforces the directory bounds on the ghost lists.
func (c *arc) trim() {
	for !c.l.empty(lB1) && c.b[lT1]+c.b[lB1] > c.cap {
		g, _ := c.l.oldest(lB1, noPin)
		c.forget(g)
	}
	for k := lB2; k >= lB1; k-- { // B2 first, then B1
		for !c.l.empty(k) && c.b[lT1]+c.b[lT2]+c.b[lB1]+c.b[lB2] > 2*c.cap {
			g, _ := c.l.oldest(k, noPin)
			c.forget(g)
		}
	}
}

// drop deletes a cached file without remembering it.
func (c *arc) drop(v uint32) {
	s := c.l.n[v].size
	c.b[c.where[v]-inT1] -= s
	c.l.remove(v)
	c.where[v] = inNone
	c.l.n[v].size = absent
	c.stats.Evicted++
	c.stats.EvictedBytes += s
}

// forget removes a ghost entry.
func (c *arc) forget(g uint32) {
	c.b[c.where[g]-inT1] -= c.l.n[g].size
	c.l.remove(g)
	c.where[g] = inNone
	c.l.n[g].size = absent
}

// Used returns the bytes held. See Policy.
func (c *arc) Used() int64 { return c.used() }

// Stats returns the counters. See Policy.
func (c *arc) Stats() Stats { return c.stats }
