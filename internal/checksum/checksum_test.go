package checksum

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

func TestCombineEqualsWhole(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	for trial := 0; trial < 200; trial++ {
		n := r.IntN(len(data))
		cut := r.IntN(n + 1)
		want := Of(data[:n])
		got := Append(Of(data[:cut]), Of(data[cut:n]))
		if got != want {
			t.Fatalf("n=%d cut=%d: combined %+v, whole %+v", n, cut, got, want)
		}
	}
	// Many pieces, as blocks of a file.
	acc := Empty
	for off := 0; off < len(data); off += 4096 * 3 {
		end := min(off+4096*3, len(data))
		acc = Append(acc, Of(data[off:end]))
	}
	if acc != Of(data) {
		t.Fatal("piecewise combination differs from whole-file sums")
	}
}

func TestKnownValues(t *testing.T) {
	s := Of([]byte("123456789"))
	if s.CRC32C != 0xE3069283 {
		t.Fatalf("crc32c=%08x", s.CRC32C)
	}
	if s.Adler32 != 0x091E01DE {
		t.Fatalf("adler32=%08x", s.Adler32)
	}
}

// TestCRC32CCombineAgainstDirect checks the table-driven combine on lengths
// up to 2^40 against appending zero bytes (in pieces) directly.
func TestCRC32CCombineAgainstDirect(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	zeros := make([]byte, 1<<16)
	for trial := 0; trial < 50; trial++ {
		c1, n := r.Uint32(), int64(r.IntN(1<<20))
		want := c1
		for left := n; left > 0; left -= int64(len(zeros)) {
			want = crc32.Update(want, Castagnoli, zeros[:min(left, int64(len(zeros)))])
		}
		// crc of n zero bytes from the initial state, then XOR-combine.
		cz := crc32.Update(0, Castagnoli, nil)
		for left := n; left > 0; left -= int64(len(zeros)) {
			cz = crc32.Update(cz, Castagnoli, zeros[:min(left, int64(len(zeros)))])
		}
		if got := CRC32CCombine(c1, cz, n); got != want {
			t.Fatalf("len %d: %08x, want %08x", n, got, want)
		}
	}
}

func BenchmarkCRC32CCombine(b *testing.B) {
	for range b.N {
		CRC32CCombine(0x12345678, 0x9abcdef0, 1<<20)
	}
}
