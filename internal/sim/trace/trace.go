// Package trace loads file-access traces into flat, time-ordered arrays.
//
// File keys (origin + path) are interned to dense integer ids at load time, so the
// simulators index plain slices instead of hashing strings in their hot loops.
// Readers exist for hepcache's access log, CSV and XRootD g-stream file_close records.
package trace

import (
	"hash/maphash"
	"slices"
	"time"
)

// Trace is a time-ordered list of file accesses. All slices indexed by access have
// Len() elements; those indexed by file id have NumFiles() elements. A Trace is
// read-only once built and safe for concurrent readers.
type Trace struct {
	// Time is when each access happened, in Unix nanoseconds, non-decreasing.
	Time []int64
	// File is the dense file id of each access, in [0, NumFiles()).
	File []uint32
	// Bytes is the number of bytes delivered to the client by each access.
	Bytes []int64
	// Size is the size of each file in bytes: the largest size seen for it.
	Size []int64
	// Name is the key of each file: origin and path as one URL-like string.
	Name []string
	// Weight is set for a SHARDS sample: how many files of the full trace each
	// kept file stands for (Scale for a file sampled by hash, 1 for a heavy
	// hitter kept whole). Nil for a full trace: every weight is 1.
	Weight []int32
	// Scale is the sampling divisor M of a SHARDS sample (rate 1/M); 0 or 1
	// for a full trace.
	Scale int32
	// Info describes what the reader saw (lines, bad lines, format).
	Info ReadInfo
}

// W returns the weight of file id (1 in a full trace).
func (t *Trace) W(id uint32) int64 {
	if t.Weight == nil {
		return 1
	}
	return int64(t.Weight[id])
}

// M returns the sampling divisor: 1 for a full trace.
func (t *Trace) M() int64 { return max(1, int64(t.Scale)) }

// Estimated returns the estimated accesses and files of the full trace a
// sample stands for (the exact counts for a full trace).
func (t *Trace) Estimated() (accesses, files int64) {
	if t.Weight == nil {
		return int64(t.Len()), int64(t.NumFiles())
	}
	for _, f := range t.File {
		accesses += int64(t.Weight[f])
	}
	for _, w := range t.Weight {
		files += int64(w)
	}
	return accesses, files
}

// Len returns the number of accesses.
func (t *Trace) Len() int { return len(t.File) }

// NumFiles returns the number of distinct files.
func (t *Trace) NumFiles() int { return len(t.Size) }

// Start returns the time of the first access (0 for an empty trace).
func (t *Trace) Start() int64 {
	if len(t.Time) == 0 {
		return 0
	}
	return t.Time[0]
}

// End returns the time of the last access (0 for an empty trace).
func (t *Trace) End() int64 {
	if len(t.Time) == 0 {
		return 0
	}
	return t.Time[len(t.Time)-1]
}

// Days returns the span of the trace in days, at least one second's worth so
// that per-day rates of a tiny trace stay finite.
func (t *Trace) Days() float64 {
	d := float64(t.End()-t.Start()) / float64(24*time.Hour)
	return max(d, 1.0/86400)
}

// MaxFileSize returns the size of the largest file.
func (t *Trace) MaxFileSize() int64 {
	var m int64
	for _, s := range t.Size {
		m = max(m, s)
	}
	return m
}

// Footprint returns the total size of all distinct files: the capacity of a
// cache that never has to evict.
func (t *Trace) Footprint() int64 {
	var s int64
	for _, v := range t.Size {
		s += v
	}
	return s
}

// TotalBytes returns the bytes delivered to clients over the whole trace.
func (t *Trace) TotalBytes() int64 {
	var s int64
	for _, v := range t.Bytes {
		s += v
	}
	return s
}

// NextUse returns, for every access i, the index of the next access to the same
// file, or len (Len()) when the file is never accessed again. Belady's OPT needs it.
func (t *Trace) NextUse() []int32 {
	n := len(t.File)
	next := make([]int32, n)
	last := make([]int32, t.NumFiles())
	for i := range last {
		last[i] = int32(n)
	}
	for i := n - 1; i >= 0; i-- {
		f := t.File[i]
		next[i] = last[f]
		last[f] = int32(i)
	}
	return next
}

// Builder assembles a Trace access by access, interning file keys. The zero
// value is not usable; call NewBuilder.
type Builder struct {
	// ids maps a key's 64-bit hash to its file id; the rare keys whose hash
	// collides with another key's live in spill. Hashing once and comparing
	// integers is much cheaper than a map keyed by long path strings.
	ids    map[uint64]uint32
	spill  map[string]uint32
	seed   maphash.Seed
	tr     Trace
	sorted bool
	last   int64
	// weight is the weight of the file being added (AddWeighted).
	weight int32
}

// NewBuilder returns an empty Builder.
func NewBuilder() *Builder {
	return &Builder{ids: make(map[uint64]uint32), spill: make(map[string]uint32), seed: maphash.MakeSeed(), sorted: true}
}

// intern returns key's file id and whether the file is new.
func (b *Builder) intern(key []byte, size int64) (uint32, bool) {
	h := maphash.Bytes(b.seed, key)
	id, ok := b.ids[h]
	if ok && b.tr.Name[id] == string(key) {
		return id, false
	}
	if ok { // hash collision: fall back to the exact map
		if id, ok := b.spill[string(key)]; ok {
			return id, false
		}
	}
	name := string(key)
	id = uint32(len(b.tr.Size))
	if ok {
		b.spill[name] = id
	} else {
		b.ids[h] = id
	}
	b.tr.Size = append(b.tr.Size, size)
	b.tr.Name = append(b.tr.Name, name)
	if b.weight > 0 {
		b.tr.Weight = append(b.tr.Weight, b.weight)
	}
	return id, true
}

// AddWeighted is Add for a SHARDS sample: a new file gets weight w. All
// files of a Builder must be added either with Add or with AddWeighted.
func (b *Builder) AddWeighted(key []byte, t, size, bytes int64, w int32) (sizeConflict bool) {
	b.weight = w
	return b.Add(key, t, size, bytes)
}

// Add appends one access of bytes bytes to the file named key of size size at
// time t (Unix nanoseconds). key is copied only when it is new. Add reports
// whether the size disagrees with an earlier access of the same file.
func (b *Builder) Add(key []byte, t, size, bytes int64) (sizeConflict bool) {
	id, isNew := b.intern(key, size)
	if s := b.tr.Size[id]; !isNew && s != size {
		sizeConflict = true
		// Files are immutable in HEP; a differing size is a truncated or
		// mis-logged record, and the largest size is the safe estimate.
		b.tr.Size[id] = max(s, size)
	}
	if t < b.last {
		b.sorted = false
	}
	b.last = t
	b.tr.Time = append(b.tr.Time, t)
	b.tr.File = append(b.tr.File, id)
	b.tr.Bytes = append(b.tr.Bytes, bytes)
	return sizeConflict
}

// Len returns the number of accesses added so far.
func (b *Builder) Len() int { return len(b.tr.File) }

// Finish sorts the accesses by time (stable, so equal times keep log order) and
// returns the Trace. The Builder must not be used afterwards.
func (b *Builder) Finish() *Trace {
	tr := b.tr
	b.tr = Trace{}
	b.ids, b.spill = nil, nil
	if !b.sorted {
		perm := make([]int32, len(tr.Time))
		for i := range perm {
			perm[i] = int32(i)
		}
		slices.SortStableFunc(perm, func(x, y int32) int {
			tx, ty := tr.Time[x], tr.Time[y]
			switch {
			case tx < ty:
				return -1
			case tx > ty:
				return 1
			}
			return 0
		})
		tr.Time = permute(tr.Time, perm)
		tr.File = permute(tr.File, perm)
		tr.Bytes = permute(tr.Bytes, perm)
	}
	return &tr
}

func permute[T any](s []T, perm []int32) []T {
	out := make([]T, len(s))
	for i, p := range perm {
		out[i] = s[p]
	}
	return out
}
