package checksum

import (
	"hash/adler32"
	"math/rand/v2"
	"testing"
)

// TestAdler32AgainstStdlib: the SWAR adler32 equals hash/adler32 on random
// inputs of many lengths, and on long runs of 0xff (the largest sums).
func TestAdler32AgainstStdlib(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 300; trial++ {
		n := r.IntN(3 << 20)
		if trial < 64 {
			n = trial
		}
		b := make([]byte, n)
		for i := range b {
			if trial%5 == 0 {
				b[i] = 0xff
			} else {
				b[i] = byte(r.Uint32())
			}
		}
		if got, want := Adler32(b), adler32.Checksum(b); got != want {
			t.Fatalf("len %d: %08x, want %08x", n, got, want)
		}
		h := NewAdler32() // in two writes, through the hash.Hash
		h.Write(b[:n/3])
		h.Write(b[n/3:])
		if got, want := h.Sum32(), adler32.Checksum(b); got != want {
			t.Fatalf("hash, len %d: %08x, want %08x", n, got, want)
		}
	}
}

func BenchmarkAdler32(b *testing.B) {
	p := make([]byte, 1<<20)
	for i := range p {
		p[i] = byte(i * 7)
	}
	for _, c := range []struct {
		name string
		f    func([]byte) uint32
	}{{"stdlib", adler32.Checksum}, {"swar", Adler32}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(p)))
			for range b.N {
				c.f(p)
			}
		})
	}
}
