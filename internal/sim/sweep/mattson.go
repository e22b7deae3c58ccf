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
	cumW     []int64 // prefix sums of request weights, in dist order (len(dist)+1)
	cumRead  []int64 // prefix sums of bytes read (weighted), in dist order
	cumSize  []int64 // prefix sums of file sizes (weighted), in dist order
	finalCum []int64 // prefix sums of (weighted) sizes of the final recency stack, newest first
	finalW   []int64 // prefix sums of file weights of the final recency stack

	requests  int64 // sum of request weights
	bytesOut  int64
	sizeAll   int64 // sum of file sizes over all requests (what an empty cache fetches)
	maxSize   int64
	footprint int64
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

// NewCurve computes the stack distances of tr. For a SHARDS sample every
// file counts as many files as its weight (trace.Trace.Weight), so distances,
// counts and bytes come out for the full trace. progress, if set, is called
// with the number of requests done. Memory: about 50 bytes per request.
func NewCurve(ctx context.Context, tr *trace.Trace, progress func(done int)) (*Curve, error) {
	n := tr.Len()
	if n == 0 {
		return nil, fmt.Errorf("sweep: empty trace")
	}
	if n >= math.MaxInt32 {
		return nil, fmt.Errorf("sweep: %d requests is too many for one pass; sample with SHARDS", n)
	}
	c := &Curve{}
	fen := make([]int64, n+1) // Fenwick tree, 1-based
	last := make([]int32, tr.NumFiles())
	for i := range last {
		last[i] = -1
	}
	type rec struct{ d, w, r, s int64 }
	recs := make([]rec, 0, n)
	var total int64 // sum of the tree: sizes of all files seen
	files, reads, sizes := tr.File, tr.Bytes, tr.Size
	for i, f := range files {
		w := tr.W(f)
		s := size(sizes[f]) * w
		c.requests += w
		c.bytesOut += reads[i] * w
		c.sizeAll += s
		if p := last[f]; p >= 0 {
			// Sum of positions [1, p] is everything requested before f's last request.
			var before int64
			for j := int(p); j > 0; j &= j - 1 {
				before += fen[j]
			}
			recs = append(recs, rec{d: total - before, w: w, r: reads[i] * w, s: s})
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
	c.cumW = make([]int64, len(recs)+1)
	c.cumRead = make([]int64, len(recs)+1)
	c.cumSize = make([]int64, len(recs)+1)
	for i, r := range recs {
		c.dist[i] = r.d
		c.cumW[i+1] = c.cumW[i] + r.w
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
	c.finalW = make([]int64, len(order)+1)
	for i, p := range order {
		f := files[p]
		c.finalCum[i+1] = c.finalCum[i] + size(sizes[f])*tr.W(f)
		c.finalW[i+1] = c.finalW[i] + tr.W(f)
	}
	for f, s := range sizes {
		ws := size(s) * tr.W(uint32(f))
		c.maxSize = max(c.maxSize, ws)
		c.footprint += ws
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

// MinCapacity is the smallest capacity At answers exactly: the largest file
// (in a sample, times its weight).
func (c *Curve) MinCapacity() int64 { return c.maxSize }

// Footprint is the total size of distinct files: beyond it nothing changes.
func (c *Curve) Footprint() int64 { return c.footprint }

// Requests returns the number of requests (estimated, for a sample).
func (c *Curve) Requests() int64 { return c.requests }

// ColdMisses returns the requests that miss in any cache (first requests).
func (c *Curve) ColdMisses() int64 { return c.requests - c.cumW[len(c.dist)] }

// Infinite returns the outcome of a cache that never evicts.
func (c *Curve) Infinite() Point { return c.at(math.MaxInt64, len(c.dist)) }

// hitsAt returns how many distances are at most capa.
func (c *Curve) hitsAt(capa int64) int {
	return sort.Search(len(c.dist), func(i int) bool { return c.dist[i] > capa })
}

// At returns the LRU outcome at capacity capa; exact for capa >= MinCapacity.
func (c *Curve) At(capa int64) Point {
	p := c.at(capa, c.hitsAt(capa))
	p.Capacity = capa
	return p
}

func (c *Curve) at(capa int64, k int) Point {
	hits := c.cumW[k]
	p := Point{Capacity: capa, Requests: c.requests, Hits: hits, BytesOut: c.bytesOut, BytesHit: c.cumRead[k]}
	p.BytesIn = c.sizeAll - c.cumSize[k]
	p.FilesCreated = c.requests - hits
	files := sort.Search(len(c.finalCum)-1, func(i int) bool { return c.finalCum[i+1] > capa })
	p.FilesDeleted = p.FilesCreated - c.finalW[files]
	p.HitRate = float64(hits) / float64(c.requests)
	p.ByteHitRate = ratio(p.BytesHit, p.BytesOut)
	p.OutInRatio = ratio(p.BytesOut, p.BytesIn)
	return p
}

// SmallestFor returns the smallest capacity whose LRU hit rate reaches rate,
// exactly (a stack distance), and whether any capacity does.
func (c *Curve) SmallestFor(rate float64) (int64, bool) {
	need := int64(math.Ceil(rate*float64(c.requests) - 1e-9))
	if need > c.cumW[len(c.dist)] {
		return 0, false
	}
	if need <= 0 {
		return c.MinCapacity(), true
	}
	k := sort.Search(len(c.dist), func(i int) bool { return c.cumW[i+1] >= need })
	return max(c.dist[k], c.MinCapacity()), true
}

// Knee returns the capacity where the hit-rate curve (linear axes, from
// MinCapacity to the footprint) is furthest above its chord: the Kneedle
// point, where further disk buys markedly less. It scans every step exactly.
func (c *Curve) Knee() (int64, float64) {
	lo, hi := c.maxSize, c.footprint
	k0 := c.hitsAt(lo)
	y0, y1 := float64(c.cumW[k0]), float64(c.cumW[len(c.dist)])
	if hi <= lo || y1 <= y0 {
		return c.MinCapacity(), y0 / float64(c.requests)
	}
	best, bestY, bestD := -1.0, y0, lo
	for k := k0; k < len(c.dist); k++ {
		d := c.dist[k]
		if k+1 < len(c.dist) && c.dist[k+1] == d {
			continue // evaluate each distinct distance once, with all its hits
		}
		y := float64(c.cumW[k+1])
		score := (y-y0)/(y1-y0) - float64(d-lo)/float64(hi-lo)
		if score > best {
			best, bestY, bestD = score, y, d
		}
	}
	return bestD, bestY / float64(c.requests)
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
