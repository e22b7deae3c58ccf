// Package reference holds slow, obviously-correct versions of every policy in
// package policy, written from the same specification with plain slices and
// linear scans. Tests replay random traces through both and demand identical
// results request by request.
package reference

import (
	"fmt"
	"slices"

	"github.com/hepcache/hepcache/internal/sim/policy"
)

// New returns the reference implementation of cfg.Name.
func New(cfg policy.Config) (policy.Policy, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := cfg.Capacity
	switch cfg.Name {
	case "lru":
		return &lru{cap: c, move: true}, nil
	case "fifo":
		return &lru{cap: c, move: false}, nil
	case "admit2":
		return &admit2{lru: lru{cap: c, move: true}, seen: map[uint32]bool{}}, nil
	case "xcache":
		return &xcache{lru: lru{cap: c, move: true},
			high: int64(cfg.HighWatermark * float64(c)), low: int64(cfg.LowWatermark * float64(c)),
			interval: int64(cfg.PurgeInterval)}, nil
	case "infinite":
		return &infinite{size: map[uint32]int64{}}, nil
	case "lfu":
		return &lfu{cap: c}, nil
	case "gdsf":
		return &lfu{cap: c, gdsf: true}, nil
	case "opt":
		return &opt{cap: c, next: cfg.Next}, nil
	case "sieve":
		return &sieve{cap: c, hand: -1}, nil
	case "s3fifo":
		small := int64(cfg.SmallRatio * float64(c))
		return &s3fifo{cap: c, smallCap: small, mainCap: c - small, ghostCap: int64(cfg.GhostRatio * float64(c))}, nil
	case "arc":
		return &arc{cap: c}, nil
	}
	return nil, fmt.Errorf("reference: no policy %q", cfg.Name)
}

type item struct {
	id      uint32
	size    int64
	freq    int64
	last    int64
	h       float64
	next    int64
	visited bool
}

// list is a slice of items, newest first.
type list []item

func (l list) find(id uint32) int {
	for i, it := range l {
		if it.id == id {
			return i
		}
	}
	return -1
}

func (l list) bytes() int64 {
	var s int64
	for _, it := range l {
		s += it.size
	}
	return s
}

// oldest returns the index of the oldest item that is not pin, or -1.
func (l list) oldest(pin uint32) int {
	for i := len(l) - 1; i >= 0; i-- {
		if l[i].id != pin {
			return i
		}
	}
	return -1
}

func (l *list) removeAt(i int) item {
	it := (*l)[i]
	*l = slices.Delete(*l, i, i+1)
	return it
}

func (l *list) pushFront(it item) { *l = slices.Insert(*l, 0, it) }

const none = ^uint32(0)

// lru is LRU (move on hit) or FIFO (no move), evicting the oldest non-pinned.
type lru struct {
	items list
	cap   int64
	move  bool
	stats policy.Stats
}

func (c *lru) Access(id uint32, need, now int64) (int64, bool) {
	i := c.items.find(id)
	if i >= 0 {
		had := c.items[i].size
		if c.move {
			c.items.pushFront(c.items.removeAt(i))
			i = 0
		}
		if need <= had {
			return had, true
		}
		if need > c.cap {
			c.evictAt(i)
			return had, false
		}
		c.items[i].size = need
		c.evictDownTo(c.cap, id)
		return had, true
	}
	if need > c.cap {
		return 0, false
	}
	c.items.pushFront(item{id: id, size: need})
	c.stats.Inserted++
	c.evictDownTo(c.cap, id)
	return 0, true
}

func (c *lru) evictDownTo(limit int64, pin uint32) int {
	n := 0
	for c.items.bytes() > limit {
		j := c.items.oldest(pin)
		if j < 0 {
			break
		}
		c.evictAt(j)
		n++
	}
	return n
}

func (c *lru) evictAt(i int) {
	it := c.items.removeAt(i)
	c.stats.Evicted++
	c.stats.EvictedBytes += it.size
}

func (c *lru) Used() int64         { return c.items.bytes() }
func (c *lru) Stats() policy.Stats { return c.stats }

type admit2 struct {
	lru
	seen map[uint32]bool
}

func (c *admit2) Access(id uint32, need, now int64) (int64, bool) {
	seen := c.seen[id]
	c.seen[id] = true
	if !seen && c.items.find(id) < 0 {
		return 0, false
	}
	return c.lru.Access(id, need, now)
}

type xcache struct {
	lru
	high, low int64
	interval  int64
	next      int64
	started   bool
}

func (c *xcache) purge(above, to int64, pin uint32) {
	if c.items.bytes() > above && c.evictDownTo(to, pin) > 0 {
		c.stats.Purges++
	}
}

func (c *xcache) Access(id uint32, need, now int64) (int64, bool) {
	if c.interval > 0 {
		if !c.started {
			c.started = true
			c.next = now + c.interval
		} else if now >= c.next {
			c.purge(c.high, c.low, none)
			for c.next <= now {
				c.next += c.interval
			}
		}
	}
	var had, add int64
	i := c.items.find(id)
	if i >= 0 {
		had = c.items[i].size
		c.items.pushFront(c.items.removeAt(i))
		if need <= had {
			return had, true
		}
		if need > c.cap {
			c.evictAt(0)
			return had, false
		}
		add = need - had
	} else {
		if need > c.cap {
			return 0, false
		}
		add = need
	}
	if c.items.bytes()+add > c.cap {
		c.purge(c.cap-add, c.low-add, id)
	}
	if i >= 0 {
		c.items[c.items.find(id)].size = need
	} else {
		c.items.pushFront(item{id: id, size: need})
		c.stats.Inserted++
	}
	if c.interval <= 0 {
		c.purge(c.high, c.low, id)
	}
	return had, true
}

type infinite struct {
	size  map[uint32]int64
	stats policy.Stats
}

func (c *infinite) Access(id uint32, need, now int64) (int64, bool) {
	had, ok := c.size[id]
	if !ok {
		c.stats.Inserted++
	}
	c.size[id] = max(had, need)
	return had, true
}

func (c *infinite) Used() int64 {
	var s int64
	for _, v := range c.size {
		s += v
	}
	return s
}
func (c *infinite) Stats() policy.Stats { return c.stats }

// lfu is LFU, or GDSF when gdsf is set: evict the minimum (key, last).
type lfu struct {
	items list
	cap   int64
	gdsf  bool
	L     float64
	seq   int64
	stats policy.Stats
}

func (c *lfu) key(it item) float64 {
	if c.gdsf {
		return it.h
	}
	return float64(it.freq)
}

func (c *lfu) prio(it item) float64 {
	return c.L + float64(it.freq)*1e9/float64(max(it.size, 1))
}

func (c *lfu) evictDownTo(limit int64, pin uint32) {
	for c.items.bytes() > limit {
		best := -1
		for j, it := range c.items {
			if it.id == pin {
				continue
			}
			if best < 0 || c.key(it) < c.key(c.items[best]) || (c.key(it) == c.key(c.items[best]) && it.last < c.items[best].last) {
				best = j
			}
		}
		v := c.items.removeAt(best)
		if c.gdsf {
			c.L = v.h
		}
		c.stats.Evicted++
		c.stats.EvictedBytes += v.size
	}
}

func (c *lfu) Access(id uint32, need, now int64) (int64, bool) {
	c.seq++
	i := c.items.find(id)
	if i >= 0 {
		had := c.items[i].size
		c.items[i].freq++
		c.items[i].last = c.seq
		if need <= had {
			c.items[i].h = c.prio(c.items[i])
			return had, true
		}
		if need > c.cap {
			v := c.items.removeAt(i)
			c.stats.Evicted++
			c.stats.EvictedBytes += v.size
			return had, false
		}
		c.items[i].size = need
		c.evictDownTo(c.cap, id)
		i = c.items.find(id)
		c.items[i].h = c.prio(c.items[i])
		return had, true
	}
	if need > c.cap {
		return 0, false
	}
	c.evictDownTo(c.cap-need, none)
	it := item{id: id, size: need, freq: 1, last: c.seq}
	it.h = c.prio(it)
	c.items = append(c.items, it)
	c.stats.Inserted++
	return 0, true
}

func (c *lfu) Used() int64         { return c.items.bytes() }
func (c *lfu) Stats() policy.Stats { return c.stats }

type opt struct {
	items  list
	cap    int64
	next   []int32
	cursor int
	stats  policy.Stats
}

// room evicts files used later than nx (furthest first, larger id first) until
// add bytes fit; if impossible it changes nothing and returns false.
func (c *opt) room(add, nx int64, pin uint32) bool {
	var cand []item
	for _, it := range c.items {
		if it.id != pin && it.next > nx {
			cand = append(cand, it)
		}
	}
	slices.SortFunc(cand, func(a, b item) int {
		if a.next != b.next {
			return int(b.next - a.next)
		}
		return int(int64(b.id) - int64(a.id))
	})
	free := c.cap - c.items.bytes()
	k := 0
	for free < add && k < len(cand) {
		free += cand[k].size
		k++
	}
	if free < add {
		return false
	}
	for _, v := range cand[:k] {
		c.items.removeAt(c.items.find(v.id))
		c.stats.Evicted++
		c.stats.EvictedBytes += v.size
	}
	return true
}

func (c *opt) Access(id uint32, need, now int64) (int64, bool) {
	nx := int64(c.next[c.cursor])
	c.cursor++
	i := c.items.find(id)
	if i >= 0 {
		had := c.items[i].size
		c.items[i].next = nx
		if need <= had {
			return had, true
		}
		if need > c.cap {
			c.items.removeAt(i)
			c.stats.Evicted++
			c.stats.EvictedBytes += had
			return had, false
		}
		if !c.room(need-had, nx, id) {
			return had, false
		}
		c.items[c.items.find(id)].size = need
		return had, true
	}
	if need > c.cap || !c.room(need, nx, none) {
		return 0, false
	}
	c.items = append(c.items, item{id: id, size: need, next: nx})
	c.stats.Inserted++
	return 0, true
}

func (c *opt) Used() int64         { return c.items.bytes() }
func (c *opt) Stats() policy.Stats { return c.stats }

type sieve struct {
	items list // newest first; the hand moves from the end toward index 0
	cap   int64
	hand  int64 // file id, or -1
	stats policy.Stats
}

func (c *sieve) drop(i int) {
	if c.hand == int64(c.items[i].id) {
		c.hand = -1
		if i > 0 {
			c.hand = int64(c.items[i-1].id)
		}
	}
	v := c.items.removeAt(i)
	c.stats.Evicted++
	c.stats.EvictedBytes += v.size
}

func (c *sieve) evictOne(pin uint32) {
	i := len(c.items) - 1
	if c.hand >= 0 {
		i = c.items.find(uint32(c.hand))
	}
	for {
		if i < 0 {
			i = len(c.items) - 1
		}
		if c.items[i].id == pin {
			i--
			continue
		}
		if c.items[i].visited {
			c.items[i].visited = false
			i--
			continue
		}
		break
	}
	c.hand = int64(c.items[i].id)
	c.drop(i)
}

func (c *sieve) Access(id uint32, need, now int64) (int64, bool) {
	i := c.items.find(id)
	if i >= 0 {
		had := c.items[i].size
		c.items[i].visited = true
		if need <= had {
			return had, true
		}
		if need > c.cap {
			c.drop(i)
			return had, false
		}
		c.items[i].size = need
		for c.items.bytes() > c.cap {
			c.evictOne(id)
		}
		return had, true
	}
	if need > c.cap {
		return 0, false
	}
	for c.items.bytes()+need > c.cap {
		c.evictOne(none)
	}
	c.items.pushFront(item{id: id, size: need})
	c.stats.Inserted++
	return 0, true
}

func (c *sieve) Used() int64         { return c.items.bytes() }
func (c *sieve) Stats() policy.Stats { return c.stats }

type s3fifo struct {
	small, main, ghost list
	cap, smallCap      int64
	mainCap, ghostCap  int64
	stats              policy.Stats
}

func (c *s3fifo) Access(id uint32, need, now int64) (int64, bool) {
	for _, q := range []*list{&c.small, &c.main} {
		i := q.find(id)
		if i < 0 {
			continue
		}
		had := (*q)[i].size
		(*q)[i].freq = min((*q)[i].freq+1, 3)
		if need <= had {
			return had, true
		}
		if need > c.cap {
			v := q.removeAt(i)
			c.stats.Evicted++
			c.stats.EvictedBytes += v.size
			return had, false
		}
		(*q)[i].size = need
		for c.small.bytes()+c.main.bytes() > c.cap {
			c.evictOne(id)
		}
		return had, true
	}
	if need > c.cap {
		return 0, false
	}
	toMain := need > c.smallCap
	if g := c.ghost.find(id); g >= 0 {
		c.ghost.removeAt(g)
		toMain = true
	}
	for c.small.bytes()+c.main.bytes()+need > c.cap {
		c.evictOne(none)
	}
	if toMain {
		c.main.pushFront(item{id: id, size: need})
	} else {
		c.small.pushFront(item{id: id, size: need})
	}
	c.stats.Inserted++
	return 0, true
}

func (c *s3fifo) evictOne(pin uint32) {
	smallOK := c.small.oldest(pin) >= 0
	mainOK := c.main.oldest(pin) >= 0
	if smallOK && (c.main.bytes() <= c.mainCap || !mainOK) {
		for {
			j := c.small.oldest(pin)
			if j < 0 {
				return
			}
			t := c.small.removeAt(j)
			if t.freq >= 2 {
				t.freq = 0
				c.main.pushFront(t)
				continue
			}
			c.stats.Evicted++
			c.stats.EvictedBytes += t.size
			if c.ghostCap > 0 && t.size <= c.ghostCap {
				c.ghost.pushFront(item{id: t.id, size: t.size})
				for c.ghost.bytes() > c.ghostCap {
					c.ghost.removeAt(len(c.ghost) - 1)
				}
			}
			return
		}
	}
	for {
		j := c.main.oldest(pin)
		if j < 0 {
			return
		}
		if c.main[j].freq > 0 {
			t := c.main.removeAt(j)
			t.freq--
			c.main.pushFront(t)
			continue
		}
		t := c.main.removeAt(j)
		c.stats.Evicted++
		c.stats.EvictedBytes += t.size
		return
	}
}

func (c *s3fifo) Used() int64         { return c.small.bytes() + c.main.bytes() }
func (c *s3fifo) Stats() policy.Stats { return c.stats }

type arc struct {
	t1, t2, b1, b2 list
	p, cap         int64
	stats          policy.Stats
}

func (c *arc) used() int64 { return c.t1.bytes() + c.t2.bytes() }
func (c *arc) dir() int64  { return c.t1.bytes() + c.t2.bytes() + c.b1.bytes() + c.b2.bytes() }

func (c *arc) replace(inB2 bool, pin uint32) {
	t1 := c.t1.bytes()
	useT1 := len(c.t1) > 0 && (t1 > c.p || (inB2 && t1 == c.p))
	if !useT1 && c.t2.oldest(pin) < 0 {
		useT1 = true
	}
	from, to := &c.t2, &c.b2
	if useT1 {
		from, to = &c.t1, &c.b1
	}
	v := from.removeAt(from.oldest(pin))
	to.pushFront(item{id: v.id, size: v.size})
	c.stats.Evicted++
	c.stats.EvictedBytes += v.size
}

func (c *arc) trim() {
	for len(c.b1) > 0 && c.t1.bytes()+c.b1.bytes() > c.cap {
		c.b1.removeAt(len(c.b1) - 1)
	}
	for len(c.b2) > 0 && c.dir() > 2*c.cap {
		c.b2.removeAt(len(c.b2) - 1)
	}
	for len(c.b1) > 0 && c.dir() > 2*c.cap {
		c.b1.removeAt(len(c.b1) - 1)
	}
}

func (c *arc) Access(id uint32, need, now int64) (int64, bool) {
	if i := c.t1.find(id); i >= 0 {
		c.t2.pushFront(c.t1.removeAt(i))
	} else if i := c.t2.find(id); i >= 0 {
		c.t2.pushFront(c.t2.removeAt(i))
	}
	if len(c.t2) > 0 && c.t2[0].id == id {
		had := c.t2[0].size
		if need <= had {
			return had, true
		}
		if need > c.cap {
			c.t2.removeAt(0)
			c.stats.Evicted++
			c.stats.EvictedBytes += had
			c.trim()
			return had, false
		}
		c.t2[0].size = need
		for c.used() > c.cap {
			c.replace(false, id)
		}
		c.trim()
		return had, true
	}
	g1, g2 := c.b1.find(id), c.b2.find(id)
	if g1 >= 0 || g2 >= 0 {
		if need > c.cap {
			return 0, false
		}
		inB2 := g2 >= 0
		mine, other := float64(c.b1.bytes()), float64(c.b2.bytes())
		if inB2 {
			mine, other = other, mine
		}
		ratio := 1.0
		if mine > 0 && other > mine {
			ratio = other / mine
		}
		delta := int64(float64(need) * ratio)
		if inB2 {
			c.p = max(0, c.p-delta)
			c.b2.removeAt(g2)
		} else {
			c.p = min(c.cap, c.p+delta)
			c.b1.removeAt(g1)
		}
		for c.used()+need > c.cap {
			c.replace(inB2, none)
		}
		c.t2.pushFront(item{id: id, size: need})
		c.stats.Inserted++
		c.trim()
		return 0, true
	}
	if need > c.cap {
		return 0, false
	}
	for len(c.b1) > 0 && c.t1.bytes()+c.b1.bytes()+need > c.cap {
		c.b1.removeAt(len(c.b1) - 1)
	}
	for len(c.b2) > 0 && c.dir()+need > 2*c.cap {
		c.b2.removeAt(len(c.b2) - 1)
	}
	for c.used()+need > c.cap {
		c.replace(false, none)
	}
	c.t1.pushFront(item{id: id, size: need})
	c.stats.Inserted++
	c.trim()
	return 0, true
}

func (c *arc) Used() int64         { return c.used() }
func (c *arc) Stats() policy.Stats { return c.stats }
