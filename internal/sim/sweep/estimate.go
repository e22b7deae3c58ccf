package sweep

import (
	"math"
)

// estimate combines the curves of several SHARDS samples into a mean; with a
// single exact curve it is that curve.
type estimate struct {
	curves []*Curve
}

func (e *estimate) exact() bool { return len(e.curves) == 1 }

func (e *estimate) requests() int64 { return e.mean(func(c *Curve) int64 { return c.Requests() }) }

func (e *estimate) footprint() int64 { return e.mean(func(c *Curve) int64 { return c.Footprint() }) }

// minCapacity is the largest file (scaled): the smallest exact capacity.
func (e *estimate) minCapacity() int64 {
	var m int64
	for _, c := range e.curves {
		m = max(m, c.MinCapacity())
	}
	return m
}

func (e *estimate) mean(f func(*Curve) int64) int64 {
	var s float64
	for _, c := range e.curves {
		s += float64(f(c))
	}
	return int64(math.Round(s / float64(len(e.curves))))
}

func (e *estimate) infinite() Point {
	return e.combine(func(c *Curve) Point { return c.Infinite() })
}

func (e *estimate) at(capa int64) Point {
	p := e.combine(func(c *Curve) Point { return c.At(capa) })
	p.Capacity = capa
	return p
}

// atSD returns the mean point and the spread of the samples' hit rates.
func (e *estimate) atSD(capa int64) (Point, float64) {
	p := e.at(capa)
	if len(e.curves) < 2 {
		return p, 0
	}
	var ss float64
	for _, c := range e.curves {
		d := c.At(capa).HitRate - p.HitRate
		ss += d * d
	}
	return p, math.Sqrt(ss / float64(len(e.curves)-1))
}

func (e *estimate) hitRate(capa int64) float64 { return e.at(capa).HitRate }

// combine averages points over the samples; rates are recomputed from the
// averaged counts.
func (e *estimate) combine(f func(*Curve) Point) Point {
	if len(e.curves) == 1 {
		return f(e.curves[0])
	}
	var acc [9]float64
	for _, c := range e.curves {
		p := f(c)
		for i, v := range []int64{p.Capacity, p.Requests, p.Hits, p.BytesOut, p.BytesHit, p.BytesIn, p.FilesCreated, p.FilesDeleted} {
			acc[i] += float64(v)
		}
		acc[8] += p.HitRate
	}
	n := float64(len(e.curves))
	r := func(i int) int64 { return int64(math.Round(acc[i] / n)) }
	p := Point{Capacity: r(0), Requests: r(1), Hits: r(2), BytesOut: r(3), BytesHit: r(4), BytesIn: r(5), FilesCreated: r(6), FilesDeleted: r(7)}
	p.HitRate = acc[8] / n // each sample's rate is already a ratio estimate; average those
	p.ByteHitRate = ratio(p.BytesHit, p.BytesOut)
	p.OutInRatio = ratio(p.BytesOut, p.BytesIn)
	return p
}

// smallestFor returns the smallest capacity in [lo, hi] whose hit rate
// reaches target: exact for one curve, by bisection on the mean otherwise.
func (e *estimate) smallestFor(target float64, lo, hi int64) int64 {
	if e.exact() {
		if c, ok := e.curves[0].SmallestFor(target); ok {
			return c
		}
		return hi
	}
	if e.hitRate(lo) >= target {
		return lo
	}
	for hi-lo > max(1, lo/1000) { // 0.1 % is finer than any sampling error
		mid := lo + (hi-lo)/2
		if e.hitRate(mid) >= target {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// knee returns the Kneedle point: exact for one curve, on a 2000-point
// linear grid of the mean curve otherwise.
func (e *estimate) knee(lo, hi int64) (int64, float64) {
	if e.exact() {
		return e.curves[0].Knee()
	}
	const n = 2000
	y0, y1 := e.hitRate(lo), e.hitRate(hi)
	if hi <= lo || y1 <= y0 {
		return lo, y0
	}
	best, bc, bh := math.Inf(-1), lo, y0
	for i := range n + 1 {
		c := lo + int64(float64(hi-lo)*float64(i)/n)
		h := e.hitRate(c)
		if s := (h-y0)/(y1-y0) - float64(c-lo)/float64(hi-lo); s > best {
			best, bc, bh = s, c, h
		}
	}
	return bc, bh
}
