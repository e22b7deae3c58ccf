package xrdpfc

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/checksum"
)

// cinfo encodes a version 4 .cinfo with the given synced blocks and
// access records (hit, missed, bypassed).
func cinfo(bs, size int64, synced []int, recs [][3]int64) []byte {
	return Encode(bs, size, time.Unix(1700000000, 0), synced, recs)
}

func TestParse(t *testing.T) {
	b := cinfo(128<<10, 1<<20+5, []int{0, 3, 8}, [][3]int64{{1, 2, 3}, {4, 5, 6}})
	in, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if in.BlockSize != 128<<10 || in.FileSize != 1<<20+5 || in.Synced.Len() != 9 || in.Synced.Count() != 3 || !in.Synced.Test(8) || in.Complete() {
		t.Fatalf("decoded %+v, bitmap %d of %d", in, in.Synced.Count(), in.Synced.Len())
	}
	if len(in.Records) != 2 || in.Records[1].BytesMissed != 5 || in.Records[1].Bypass != 6 || in.LastAccess().Unix() != 1700000015 {
		t.Fatalf("records %+v, last access %v", in.Records, in.LastAccess())
	}
	for name, mut := range map[string]func([]byte){
		"store":   func(b []byte) { b[12]++ },
		"bitmap":  func(b []byte) { b[4+storeSize+4]++ },
		"version": func(b []byte) { b[0] = 3 },
	} {
		c := append([]byte(nil), b...)
		mut(c)
		if _, err := Parse(c); !errors.Is(err, ErrFormat) {
			t.Errorf("%s corrupted: %v", name, err)
		}
	}
	if _, err := Parse(b[:len(b)-1]); !errors.Is(err, ErrFormat) {
		t.Errorf("truncated: %v", err)
	}
}

// TestTagsCRC: the CRC of a run of pages made from their tags equals the
// CRC32C of the bytes, in both byte orders, including a short last page.
func TestTagsCRC(t *testing.T) {
	data := make([]byte, 5*PageSize+1234)
	for i := range data {
		data[i] = byte(rand.Uint32())
	}
	size := int64(len(data))
	for _, bo := range []binary.AppendByteOrder{binary.LittleEndian, binary.BigEndian} {
		b := make([]byte, 16)
		b = bo.AppendUint32(b[:0], tagMagic)
		b = bo.AppendUint32(bo.AppendUint64(b, uint64(size)), 0)
		b = bo.AppendUint32(b, crc32.Checksum(b, checksum.Castagnoli))
		for p := int64(0); p < size; p += PageSize {
			b = bo.AppendUint32(b, crc32.Checksum(data[p:min(p+PageSize, size)], checksum.Castagnoli))
		}
		tags, err := ParseTags(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range [][2]int64{{0, size}, {PageSize, 2 * PageSize}, {4 * PageSize, size - 4*PageSize}, {0, PageSize}} {
			crc, ok := tags.CRC(r[0], r[1], size)
			if want := crc32.Checksum(data[r[0]:r[0]+r[1]], checksum.Castagnoli); !ok || crc != want {
				t.Errorf("%v: CRC [%d,+%d) = %08x %v, want %08x", bo, r[0], r[1], crc, ok, want)
			}
		}
		if _, ok := tags.CRC(100, PageSize, size); ok {
			t.Error("unaligned range accepted")
		}
	}
}
