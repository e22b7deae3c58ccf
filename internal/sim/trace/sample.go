package trace

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Sampler implements SHARDS spatial sampling (Waldspurger et al., FAST '15),
// stratified for heavy hitters: a file is kept when the salted hash of its key
// falls in a 1-in-M share (it then stands for M files: weight M), and the
// heaviest files, found beforehand, are kept whole (weight 1). Every access of
// a kept file is kept. Without the heavy stratum, a single file read tens of
// thousands of times would swing each sample's hit rate by many points.
type Sampler struct {
	m         int32
	seed      uint64
	threshold uint64
	heavy     map[uint64]struct{}
}

// NewSampler returns a sampler keeping about rate (0 < rate <= 1) of the
// files: 1 in M = round(1/rate). Different seeds select independent samples.
func NewSampler(rate float64, seed uint64) (Sampler, error) {
	if !(rate > 0 && rate <= 1) {
		return Sampler{}, fmt.Errorf("trace: sampling rate %g outside (0, 1]", rate)
	}
	m := math.Round(1 / rate)
	if m > math.MaxInt32 {
		return Sampler{}, fmt.Errorf("trace: sampling rate %g too small", rate)
	}
	return Sampler{m: int32(m), seed: mix64(seed), threshold: math.MaxUint64 / uint64(m)}, nil
}

// WithHeavy returns a copy of s that also keeps the files whose key hashes
// are in heavy, with weight 1.
func (s Sampler) WithHeavy(heavy map[uint64]struct{}) Sampler {
	s.heavy = heavy
	return s
}

// Rate returns the sampling rate, 1/M.
func (s Sampler) Rate() float64 { return 1 / float64(s.m) }

// Scale returns M.
func (s Sampler) Scale() int32 { return s.m }

// Weight returns how many files of the full trace the file with key hash h
// (from KeyHash) stands for: 0 if not sampled, 1 if heavy, M otherwise.
func (s Sampler) Weight(h uint64) int32 {
	if _, ok := s.heavy[h]; ok {
		return 1
	}
	if s.m == 1 || mix64(h+s.seed) < s.threshold {
		return s.m
	}
	return 0
}

// KeyHash hashes a file key (FNV-1a, 64 bits).
func KeyHash(key []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range key {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// mix64 is the splitmix64 finaliser: it spreads FNV's weak low bits.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// heavyFiles is the number of files the heavy stratum can hold at most.
const heavyFiles = 10000

// pickHeavy chooses the heavy stratum from (hash, count) pairs: the most read
// files first, as long as they hold at most share of the total accesses and
// number at most heavyFiles. A file read fewer than M times gains little.
func pickHeavy(counts []hashCount, total int64, share float64, m int32) map[uint64]struct{} {
	slices.SortFunc(counts, func(a, b hashCount) int { return cmp.Compare(b.n, a.n) })
	heavy := map[uint64]struct{}{}
	budget := int64(share * float64(total))
	var used int64
	for _, c := range counts {
		if len(heavy) == heavyFiles || c.n < int64(m) || used+c.n > budget {
			break
		}
		heavy[c.h] = struct{}{}
		used += c.n
	}
	return heavy
}

type hashCount struct {
	h uint64
	n int64
}

// spaceSaving counts the most frequent key hashes of a stream in bounded
// memory (Metwally et al. 2005): k counters; a new hash replaces the smallest
// counter and inherits its count plus one, so counts are overestimates by at
// most the smallest count, and every hash more frequent than total/k is kept.
type spaceSaving struct {
	k     int
	idx   map[uint64]int // hash -> heap position
	heap  []hashCount    // min-heap on n
	total int64
}

func newSpaceSaving(k int) *spaceSaving {
	return &spaceSaving{k: k, idx: make(map[uint64]int, k)}
}

func (s *spaceSaving) add(h uint64) {
	s.total++
	if i, ok := s.idx[h]; ok {
		s.heap[i].n++
		s.down(i)
		return
	}
	if len(s.heap) < s.k {
		s.heap = append(s.heap, hashCount{h, 1})
		s.idx[h] = len(s.heap) - 1
		s.up(len(s.heap) - 1)
		return
	}
	delete(s.idx, s.heap[0].h)
	s.heap[0] = hashCount{h, s.heap[0].n + 1}
	s.idx[h] = 0
	s.down(0)
}

func (s *spaceSaving) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if s.heap[p].n <= s.heap[i].n {
			return
		}
		s.swap(i, p)
		i = p
	}
}

func (s *spaceSaving) down(i int) {
	for {
		c := 2*i + 1
		if c >= len(s.heap) {
			return
		}
		if c+1 < len(s.heap) && s.heap[c+1].n < s.heap[c].n {
			c++
		}
		if s.heap[i].n <= s.heap[c].n {
			return
		}
		s.swap(i, c)
		i = c
	}
}

func (s *spaceSaving) swap(i, j int) {
	s.heap[i], s.heap[j] = s.heap[j], s.heap[i]
	s.idx[s.heap[i].h] = i
	s.idx[s.heap[j].h] = j
}

// Samples returns SHARDS samples of an in-memory trace, one per seed, at
// rate, with the heavy stratum chosen from exact counts (heavyShare: the
// largest share of accesses it may hold; 0 disables it).
func Samples(tr *Trace, rate float64, seeds []uint64, heavyShare float64) ([]*Trace, error) {
	counts := make([]int64, tr.NumFiles())
	for _, f := range tr.File {
		counts[f]++
	}
	hashes := make([]uint64, tr.NumFiles())
	hc := make([]hashCount, tr.NumFiles())
	for id, name := range tr.Name {
		hashes[id] = KeyHash([]byte(name))
		hc[id] = hashCount{hashes[id], counts[id]}
	}
	out := make([]*Trace, len(seeds))
	for i, seed := range seeds {
		s, err := NewSampler(rate, seed)
		if err != nil {
			return nil, err
		}
		if heavyShare > 0 {
			s = s.WithHeavy(pickHeavy(slices.Clone(hc), int64(tr.Len()), heavyShare, s.Scale()))
		}
		out[i] = sampleWith(tr, s, hashes)
	}
	return out, nil
}

// Sample returns the SHARDS sample of an in-memory trace that s keeps, with
// file ids renumbered densely and per-file weights.
func Sample(tr *Trace, s Sampler) *Trace {
	hashes := make([]uint64, tr.NumFiles())
	for id, name := range tr.Name {
		hashes[id] = KeyHash([]byte(name))
	}
	return sampleWith(tr, s, hashes)
}

func sampleWith(tr *Trace, s Sampler, hashes []uint64) *Trace {
	keep := make([]int32, tr.NumFiles())
	out := &Trace{Info: tr.Info, Scale: s.Scale(), Weight: []int32{}}
	for id, name := range tr.Name {
		keep[id] = -1
		if w := s.Weight(hashes[id]); w > 0 {
			keep[id] = int32(len(out.Size))
			out.Size = append(out.Size, tr.Size[id])
			out.Name = append(out.Name, name)
			out.Weight = append(out.Weight, w)
		}
	}
	for i, f := range tr.File {
		if k := keep[f]; k >= 0 {
			out.Time = append(out.Time, tr.Time[i])
			out.File = append(out.File, uint32(k))
			out.Bytes = append(out.Bytes, tr.Bytes[i])
		}
	}
	out.Info.Accesses = len(out.File)
	out.Info.SampleRate = s.Rate()
	return out
}
