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
	}{{"stdlib", adler32.Checksum}, {"swar", func(p []byte) uint32 {
		saved := haveBlocks
		haveBlocks = false
		defer func() { haveBlocks = saved }()
		return Adler32(p)
	}}, {"avx2", Adler32}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(p)))
			for range b.N {
				c.f(p)
			}
		})
	}
}

// TestAdler32BothPathsAllOffsets: the AVX2 path (where the CPU has it) and
// the SWAR path agree with hash/adler32 at every start offset and at the
// lengths around the 32-byte steps and the per-call bound, and when the
// running sums start high.
func TestAdler32BothPathsAllOffsets(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	buf := make([]byte, 3*maxBlocksLen+200)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	lengths := []int{0, 1, 31, 32, 33, 63, 64, 65, 95, 96, 127, 128, 1000, maxBlocksLen - 32, maxBlocksLen - 1, maxBlocksLen, maxBlocksLen + 31, maxBlocksLen + 32, 2*maxBlocksLen + 77, 3 * maxBlocksLen}
	saved := haveBlocks
	defer func() { haveBlocks = saved }()
	for _, blocks := range []bool{false, saved} {
		haveBlocks = blocks
		for off := 0; off < 40; off++ {
			for _, n := range lengths {
				p := buf[off : off+n]
				if got, want := Adler32(p), adler32.Checksum(p); got != want {
					t.Fatalf("blocks=%v off %d len %d: %08x, want %08x", blocks, off, n, got, want)
				}
				// Continuing from a state with large sums.
				start := adler32.Checksum(buf[:65521+off])
				h := adler32.New()
				h.Write(buf[:65521+off])
				h.Write(p)
				if got, want := adler32Update(start, p), h.Sum32(); got != want {
					t.Fatalf("blocks=%v update off %d len %d: %08x, want %08x", blocks, off, n, got, want)
				}
			}
		}
	}
}
