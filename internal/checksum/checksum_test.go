package checksum

import (
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
