package checksum

import (
	"encoding/binary"
	"hash"
)

// adler32 runs 32 bytes at a time with AVX2 where the CPU has it
// (adler_amd64.s). Elsewhere, and for the tail, it reads bytes eight at a
// time as one 64-bit word and sums them with a few multiplications instead
// of one addition chain per byte (SWAR): the even and odd bytes are spread over four 16-bit lanes and a
// multiplication by a word of lane weights leaves their weighted sum in the
// top lane. For each 8-byte step, with the bytes b0..b7 in order:
//
//	s2 += 8*s1 + 8*b0 + 7*b1 + ... + 1*b7
//	s1 += b0 + b1 + ... + b7
//
// The sums are reduced modulo 65521 every nmaxBlock bytes, before they can
// overflow 64 bits.
const (
	lanes     = 0x00ff00ff00ff00ff
	sumK      = 0x0001000100010001
	evenK     = 0x0008000600040002 // weights of b0, b2, b4, b6 (top lane first)
	oddK      = 0x0007000500030001 // weights of b1, b3, b5, b7
	nmaxBlock = 1 << 20
)

// Adler32 returns the adler32 of p (equal to hash/adler32's).
func Adler32(p []byte) uint32 { return adler32Update(1, p) }

// maxBlocksLen bounds one adler32Blocks call so that its 32-bit lanes
// cannot overflow: the prefix sums grow as the square of the blocks
// (1024 blocks: at most 2^30 per lane).
const maxBlocksLen = 32 << 10

func adler32Update(adler uint32, p []byte) uint32 {
	s1, s2 := uint64(adler&0xffff), uint64(adler>>16)
	if haveBlocks {
		// 32 bytes per step with AVX2 (4x the SWAR loop below); with the
		// n bytes b_i of a call:
		//	s2 += n*s1 + sum (n-i)*b_i = n*s1 + 32*prefix + weighted
		//	s1 += sum b_i
		for len(p) >= 64 {
			n := min(len(p), maxBlocksLen) &^ 31
			var v [24]uint32
			adler32Blocks(p[:n], &v)
			var sum, prefix, weighted uint64
			for i := 0; i < 8; i++ {
				sum += uint64(v[i])
				prefix += uint64(v[8+i])
				weighted += uint64(v[16+i])
			}
			s2 = (s2 + uint64(n)*s1 + 32*prefix + weighted) % adlerBase
			s1 = (s1 + sum) % adlerBase
			p = p[n:]
		}
	}
	for len(p) > 0 {
		q := p[:min(len(p), nmaxBlock)]
		p = p[len(q):]
		for len(q) >= 16 {
			x := binary.LittleEndian.Uint64(q)
			y := binary.LittleEndian.Uint64(q[8:])
			xe, xo := x&lanes, (x>>8)&lanes
			ye, yo := y&lanes, (y>>8)&lanes
			sx := ((xe + xo) * sumK) >> 48
			wx := ((xe*evenK)>>48 + (xo*oddK)>>48)
			sy := ((ye + yo) * sumK) >> 48
			wy := ((ye*evenK)>>48 + (yo*oddK)>>48)
			s2 += 16*s1 + 8*sx + wx + wy
			s1 += sx + sy
			q = q[16:]
		}
		for _, c := range q {
			s1 += uint64(c)
			s2 += s1
		}
		s1 %= adlerBase
		s2 %= adlerBase
	}
	return uint32(s2<<16 | s1)
}

// NewAdler32 returns a hash.Hash32 computing adler32 with the SWAR update.
func NewAdler32() hash.Hash32 { a := adlerHash(1); return &a }

type adlerHash uint32

func (a *adlerHash) Write(p []byte) (int, error) {
	*a = adlerHash(adler32Update(uint32(*a), p))
	return len(p), nil
}
func (a *adlerHash) Sum(b []byte) []byte { return binary.BigEndian.AppendUint32(b, uint32(*a)) }
func (a *adlerHash) Sum32() uint32       { return uint32(*a) }
func (a *adlerHash) Reset()              { *a = 1 }
func (a *adlerHash) Size() int           { return 4 }
func (a *adlerHash) BlockSize() int      { return 4 }
