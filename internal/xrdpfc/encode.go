package xrdpfc

import (
	"encoding/binary"
	"hash/crc32"
	"time"

	"github.com/hepcache/hepcache/internal/checksum"
)

// Encode writes a version 4 .cinfo as XrdPfc 5.5.3 does on x86-64: block
// size bs, file size size, created at created, the blocks synced, one
// access record per recs entry (bytes hit, missed, bypassed; ten seconds
// apart from created). hepcache never writes XCache's files: this is for
// tests that need XCache trees, honest or forged.
func Encode(bs, size int64, created time.Time, synced []int, recs [][3]int64) []byte {
	le := binary.LittleEndian
	t0 := created.Unix()
	st := make([]byte, storeSize)
	le.PutUint64(st[0:], uint64(bs))
	le.PutUint64(st[8:], uint64(size))
	le.PutUint64(st[16:], uint64(t0))
	le.PutUint64(st[32:], uint64(len(recs)))
	le.PutUint32(st[40:], CkSumNet)
	le.PutUint32(st[44:], uint32(len(recs)))
	b := le.AppendUint32(nil, version)
	b = append(b, st...)
	b = le.AppendUint32(b, crc32.Checksum(st, checksum.Castagnoli))
	nb := NumBlocks(size, bs)
	bm := make([]byte, (nb-1)/8+1)
	for _, i := range synced {
		bm[i/8] |= 1 << (i % 8)
	}
	body := bm
	for i, r := range recs {
		a := make([]byte, astatSize)
		le.PutUint64(a[0:], uint64(t0+int64(10*i)))
		le.PutUint64(a[8:], uint64(t0+int64(10*i)+5))
		le.PutUint64(a[32:], uint64(r[0]))
		le.PutUint64(a[40:], uint64(r[1]))
		le.PutUint64(a[48:], uint64(r[2]))
		body = append(body, a...)
	}
	b = append(b, body...)
	return le.AppendUint32(b, crc32.Checksum(body, checksum.Castagnoli))
}
