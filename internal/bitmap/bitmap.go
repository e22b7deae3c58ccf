// Package bitmap is a fixed-size bit set, used to record which blocks of a
// cached file are present.
package bitmap

import "math/bits"

// Bitmap is a set of n bits. It is not safe for concurrent use; callers guard
// it with their own lock.
type Bitmap struct {
	n     int
	words []uint64
}

// New returns a bitmap of n zero bits.
func New(n int) *Bitmap {
	return &Bitmap{n: n, words: make([]uint64, (n+63)/64)}
}

// FromBytes rebuilds a bitmap of n bits from the encoding of Bytes. Bits
// beyond n are ignored; a short encoding leaves the rest zero.
func FromBytes(n int, b []byte) *Bitmap {
	bm := New(n)
	for i := 0; i < n && i/8 < len(b); i++ {
		if b[i/8]&(1<<(i%8)) != 0 {
			bm.Set(i)
		}
	}
	return bm
}

// Len is the number of bits.
func (b *Bitmap) Len() int { return b.n }

// Set sets bit i.
func (b *Bitmap) Set(i int) { b.words[i/64] |= 1 << (uint(i) % 64) }

// Clear clears bit i.
func (b *Bitmap) Clear(i int) { b.words[i/64] &^= 1 << (uint(i) % 64) }

// Test reports whether bit i is set.
func (b *Bitmap) Test(i int) bool { return b.words[i/64]&(1<<(uint(i)%64)) != 0 }

// Count returns the number of set bits.
func (b *Bitmap) Count() int {
	c := 0
	for _, w := range b.words {
		c += bits.OnesCount64(w)
	}
	return c
}

// Full reports whether every bit is set.
func (b *Bitmap) Full() bool { return b.Count() == b.n }

// NextClear returns the first clear bit at or after i, or -1.
func (b *Bitmap) NextClear(i int) int {
	for ; i < b.n; i++ {
		w := b.words[i/64] >> (uint(i) % 64)
		if w == ^uint64(0)>>(uint(i)%64) {
			// Rest of this word is set: jump to the next word.
			i = (i/64+1)*64 - 1
			continue
		}
		if j := i + bits.TrailingZeros64(^w); j < b.n {
			return j
		}
		return -1
	}
	return -1
}

// Clone returns an independent copy.
func (b *Bitmap) Clone() *Bitmap {
	c := &Bitmap{n: b.n, words: make([]uint64, len(b.words))}
	copy(c.words, b.words)
	return c
}

// Bytes encodes the bitmap, bit i in byte i/8 at position i%8.
func (b *Bitmap) Bytes() []byte {
	out := make([]byte, (b.n+7)/8)
	for i := range out {
		out[i] = byte(b.words[i/8] >> (uint(i%8) * 8))
	}
	return out
}
