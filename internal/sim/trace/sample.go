package trace

import "fmt"

// Sampler implements SHARDS spatial sampling (Waldspurger et al., FAST '15):
// a file is kept when the salted hash of its key falls below rate * 2^64, so
// every access of a kept file is kept and each file is in or out as a whole.
type Sampler struct {
	rate      float64
	seed      uint64
	threshold uint64
}

// NewSampler returns a sampler keeping a share rate (0 < rate <= 1) of the
// files; different seeds select independent samples.
func NewSampler(rate float64, seed uint64) (Sampler, error) {
	if !(rate > 0 && rate <= 1) {
		return Sampler{}, fmt.Errorf("trace: sampling rate %g outside (0, 1]", rate)
	}
	th := ^uint64(0)
	if rate < 1 {
		th = uint64(rate * (1 << 63) * 2)
	}
	return Sampler{rate: rate, seed: mix64(seed), threshold: th}, nil
}

// Rate returns the sampling rate.
func (s Sampler) Rate() float64 { return s.rate }

// Keep reports whether the file with key hash h (from KeyHash) is sampled.
func (s Sampler) Keep(h uint64) bool {
	return s.rate >= 1 || mix64(h+s.seed) < s.threshold
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

// Sample returns the SHARDS sample of an in-memory trace: the accesses of the
// files the sampler keeps, with file ids renumbered densely.
func Sample(tr *Trace, s Sampler) *Trace {
	keep := make([]int32, tr.NumFiles())
	out := &Trace{Info: tr.Info}
	out.Info.SampleRate = tr.Info.SampleRate * s.Rate()
	if tr.Info.SampleRate == 0 {
		out.Info.SampleRate = s.Rate()
	}
	for id, name := range tr.Name {
		keep[id] = -1
		if s.Keep(KeyHash([]byte(name))) {
			keep[id] = int32(len(out.Size))
			out.Size = append(out.Size, tr.Size[id])
			out.Name = append(out.Name, name)
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
	return out
}
