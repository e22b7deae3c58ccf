package sweep

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/hepcache/hepcache/internal/sim/trace"
)

// Curve is the exact whole-file LRU outcome of a trace at every capacity,
// computed in one pass from byte-weighted stack distances (Mattson et al. 1970).
//
// # Why it is exact
//
// LRU's content is always the longest prefix of the recency stack (files by
// last request, newest first) whose sizes sum to at most the capacity C, as
// long as every file fits (C >= MaxFileSize). A request hits iff the sizes of
// its file and of all distinct files requested since its previous request sum
// to at most C: that sum is the request's stack distance. A Fenwick tree over
// request positions, holding each file's size at its latest position, yields
// it in O(log n). Sorting the distances once answers any C by binary search.
//
// Below MaxFileSize a file larger than the cache passes through without
// disturbing it, LRU is no longer a stack algorithm, and the sweep replays.
type Curve struct {
	dist     []int64 // finite stack distances, ascending
	cumRead  []int64 // prefix sums of bytes read, in dist order (len(dist)+1)
	cumSize  []int64 // prefix sums of file sizes, in dist order
	finalCum []int64 // prefix sums of sizes of the final recency stack, newest first

	requests  int64
	bytesOut  int64
	sizeAll   int64 // sum of file sizes over all requests (what an empty cache fetches)
	maxSize   int64
	footprint int64
	// scale is 1/R for a SHARDS sample of rate R: capacities are scaled down
	// and counts up by it.
	scale float64
}

// Point is the outcome at one capacity. Rates are fractions.
type Point struct {
	Capacity     int64   `json:"capacity"`
	Requests     int64   `json:"requests"`
	Hits         int64   `json:"hits"`
	HitRate      float64 `json:"hit_rate"`
	ByteHitRate  float64 `json:"byte_hit_rate"`
	BytesOut     int64   `json:"bytes_out"`
	BytesHit     int64   `json:"bytes_hit"`
	BytesIn      int64   `json:"bytes_in"`
	OutInRatio   float64 `json:"out_in_ratio"`
	FilesCreated int64   `json:"files_created"`
	FilesDeleted int64   `json:"files_deleted"`
}

// size is the bytes a request of a file needs in whole-file mode; replay uses
// the same floor of one byte so that empty files behave like tiny ones.
func size(s int64) int64 { return max(s, 1) }

// NewCurve computes the stack distances of tr. progress, if set, is called
// with the number of requests done. Memory: about 40 bytes per request.
func NewCurve(ctx context.Context, tr *trace.Trace, progress func(done int)) (*Curve, error) {
	n := tr.Len()
	if n == 0 {
		return nil, fmt.Errorf("sweep: empty trace")
	}
	if n >= math.MaxInt32 {
		return nil, fmt.Errorf("sweep: %d requests is too many for one pass; sample with SHARDS", n)
	}
	c := &Curve{requests: int64(n), scale: 1}
	fen := make([]int64, n+1) // Fenwick tree, 1-based
	last := make([]int32, tr.NumFiles())
	for i := range last {
		last[i] = -1
	}
	type rec struct{ d, r, s int64 }
	recs := make([]rec, 0, n)
	var total int64 // sum of the tree: sizes of all files seen
	files, reads, sizes := tr.File, tr.Bytes, tr.Size
	for i, f := range files {
		s := size(sizes[f])
		c.bytesOut += reads[i]
		c.sizeAll += s
		if p := last[f]; p >= 0 {
			// Sum of positions [1, p] is everything requested before f's last request.
			var before int64
			for j := int(p); j > 0; j &= j - 1 {
				before += fen[j]
			}
			recs = append(recs, rec{d: total - before, r: reads[i], s: s})
			for j := int(p) + 1; j <= n; j += j & -j {
				fen[j] -= s
			}
		} else {
			total += s
		}
		for j := i + 1; j <= n; j += j & -j {
			fen[j] += s
		}
		last[f] = int32(i)
		if progress != nil && i&(1<<18-1) == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("sweep: %w", err)
			}
			progress(i)
		}
	}
	slices.SortFunc(recs, func(a, b rec) int { return cmpInt(a.d, b.d) })
	c.dist = make([]int64, len(recs))
	c.cumRead = make([]int64, len(recs)+1)
	c.cumSize = make([]int64, len(recs)+1)
	for i, r := range recs {
		c.dist[i] = r.d
		c.cumRead[i+1] = c.cumRead[i] + r.r
		c.cumSize[i+1] = c.cumSize[i] + r.s
	}
	// The final recency stack: files by last request, newest first.
	order := make([]int32, 0, tr.NumFiles())
	for _, p := range last {
		if p >= 0 {
			order = append(order, p)
		}
	}
	slices.SortFunc(order, func(a, b int32) int { return cmpInt(int64(b), int64(a)) })
	c.finalCum = make([]int64, len(order)+1)
	for i, p := range order {
		c.finalCum[i+1] = c.finalCum[i] + size(sizes[files[p]])
	}
	for _, s := range sizes {
		c.maxSize = max(c.maxSize, size(s))
		c.footprint += size(s)
	}
	if progress != nil {
		progress(n)
	}
	return c, nil
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Scaled returns the curve of a SHARDS sample taken at rate (0 < rate <= 1)
// expressed for the full trace: capacities divided and counts multiplied by it.
func (c *Curve) Scaled(rate float64) *Curve {
	d := *c
	d.scale = 1 / rate
	return &d
}

// MinCapacity is the smallest capacity At answers exactly: the largest file.
func (c *Curve) MinCapacity() int64 { return int64(math.Ceil(float64(c.maxSize) * c.scale)) }

// Footprint is the total size of distinct files: beyond it nothing changes.
func (c *Curve) Footprint() int64 { return int64(float64(c.footprint) * c.scale) }

// Requests returns the number of requests (scaled for a sample).
func (c *Curve) Requests() int64 { return c.up(c.requests) }

// ColdMisses returns the requests that miss in any cache (first requests).
func (c *Curve) ColdMisses() int64 { return c.up(c.requests - int64(len(c.dist))) }

func (c *Curve) up(v int64) int64 { return int64(math.Round(float64(v) * c.scale)) }

// Infinite returns the outcome of a cache that never evicts.
func (c *Curve) Infinite() Point { return c.at(math.MaxInt64, len(c.dist)) }

// hitsAt returns how many requests hit at capacity capa (in sample units).
func (c *Curve) hitsAt(capa int64) int {
	return sort.Search(len(c.dist), func(i int) bool { return c.dist[i] > capa })
}

// At returns the LRU outcome at capacity capa; exact for capa >= MinCapacity.
func (c *Curve) At(capa int64) Point {
	inner := capa
	if c.scale != 1 {
		inner = int64(float64(capa) / c.scale)
	}
	p := c.at(inner, c.hitsAt(inner))
	p.Capacity = capa
	return p
}

func (c *Curve) at(inner int64, k int) Point {
	hits := int64(k)
	p := Point{Capacity: inner, Requests: c.requests, Hits: hits, BytesOut: c.bytesOut, BytesHit: c.cumRead[k]}
	p.BytesIn = c.sizeAll - c.cumSize[k]
	p.FilesCreated = c.requests - hits
	resident := int64(sort.Search(len(c.finalCum)-1, func(i int) bool { return c.finalCum[i+1] > inner }))
	p.FilesDeleted = p.FilesCreated - resident
	p.HitRate = float64(hits) / float64(c.requests)
	p.ByteHitRate = ratio(p.BytesHit, p.BytesOut)
	p.OutInRatio = ratio(p.BytesOut, p.BytesIn)
	if c.scale != 1 {
		p.Requests, p.Hits, p.BytesOut, p.BytesHit = c.up(p.Requests), c.up(p.Hits), c.up(p.BytesOut), c.up(p.BytesHit)
		p.BytesIn, p.FilesCreated, p.FilesDeleted = c.up(p.BytesIn), c.up(p.FilesCreated), c.up(p.FilesDeleted)
	}
	return p
}

// SmallestFor returns the smallest capacity whose LRU hit rate reaches rate,
// exactly (a stack distance), and whether any capacity does.
func (c *Curve) SmallestFor(rate float64) (int64, bool) {
	k := int(math.Ceil(rate*float64(c.requests) - 1e-9))
	if k > len(c.dist) {
		return 0, false
	}
	if k <= 0 {
		return c.MinCapacity(), true
	}
	capa := int64(math.Ceil(float64(c.dist[k-1]) * c.scale))
	return max(capa, c.MinCapacity()), true
}

// Knee returns the capacity where the hit-rate curve (linear axes, from
// MinCapacity to the footprint) is furthest above its chord: the Kneedle
// point, where further disk buys markedly less. It scans every step exactly.
func (c *Curve) Knee() (int64, float64) {
	lo, hi := c.maxSize, c.footprint
	k0 := c.hitsAt(lo)
	y0, y1 := float64(k0), float64(len(c.dist))
	if hi <= lo || y1 <= y0 {
		return c.MinCapacity(), float64(k0) / float64(c.requests)
	}
	best, bestK, bestD := -1.0, k0, lo
	for k := k0; k < len(c.dist); k++ {
		d := c.dist[k]
		if k+1 < len(c.dist) && c.dist[k+1] == d {
			continue // evaluate each distinct distance once, with all its hits
		}
		score := (float64(k+1)-y0)/(y1-y0) - float64(d-lo)/float64(hi-lo)
		if score > best {
			best, bestK, bestD = score, k+1, d
		}
	}
	return int64(math.Ceil(float64(bestD) * c.scale)), float64(bestK) / float64(c.requests)
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
