// Package checksum computes the checksums XRootD sites use (adler32 and
// CRC32C) and combines the checksums of consecutive pieces into the checksum
// of the whole, so a cache can checksum a file from blocks that arrived out
// of order without reading it back from disk.
package checksum

import (
	"crypto/md5"
	"crypto/sha256"
	"hash"
	"hash/crc32"
	"strings"
)

// Castagnoli is the CRC32C table.
var Castagnoli = crc32.MakeTable(crc32.Castagnoli)

// castagnoliReflected is the bit-reflected CRC32C polynomial.
const castagnoliReflected = 0x82F63B78

const adlerBase = 65521

// Sums are the adler32 and CRC32C of some bytes and their length.
type Sums struct {
	Adler32 uint32
	CRC32C  uint32
	Len     int64
}

// Empty is the Sums of no bytes.
var Empty = Sums{Adler32: 1}

// Of computes the Sums of p.
func Of(p []byte) Sums {
	return Sums{Adler32: Adler32(p), CRC32C: crc32.Checksum(p, Castagnoli), Len: int64(len(p))}
}

// Append returns the Sums of the bytes of a followed by those of b.
func Append(a, b Sums) Sums {
	if a.Len == 0 {
		return b
	}
	return Sums{
		Adler32: Adler32Combine(a.Adler32, b.Adler32, b.Len),
		CRC32C:  CRC32CCombine(a.CRC32C, b.CRC32C, b.Len),
		Len:     a.Len + b.Len,
	}
}

// Adler32Combine returns the adler32 of A||B from adler32(A), adler32(B) and
// len(B).
func Adler32Combine(a1, a2 uint32, len2 int64) uint32 {
	rem := uint32(len2 % adlerBase)
	sum1 := a1 & 0xffff
	sum2 := (rem * sum1) % adlerBase
	sum1 += (a2 & 0xffff) + adlerBase - 1
	sum2 += (a1 >> 16) + (a2 >> 16) + adlerBase - rem
	if sum1 >= adlerBase {
		sum1 -= adlerBase
	}
	if sum1 >= adlerBase {
		sum1 -= adlerBase
	}
	if sum2 >= adlerBase<<1 {
		sum2 -= adlerBase << 1
	}
	if sum2 >= adlerBase {
		sum2 -= adlerBase
	}
	return sum1 | sum2<<16
}

// CRC32CCombine returns the CRC32C of A||B from crc(A), crc(B) and len(B):
// it appends len(B) zero bytes to crc(A) with the precomputed operators
// for the powers of two in len(B), then adds crc(B).
func CRC32CCombine(c1, c2 uint32, len2 int64) uint32 {
	if len2 <= 0 {
		return c1
	}
	ops := zeroOps()
	for k := 0; len2 != 0; k, len2 = k+1, len2>>1 {
		if len2&1 != 0 {
			c1 = gf2Times(&ops[k], c1)
		}
	}
	return c1 ^ c2
}

func gf2Times(mat *[32]uint32, vec uint32) uint32 {
	var sum uint32
	for i := 0; vec != 0; i, vec = i+1, vec>>1 {
		if vec&1 != 0 {
			sum ^= mat[i]
		}
	}
	return sum
}

func gf2Square(square, mat *[32]uint32) {
	for n := 0; n < 32; n++ {
		square[n] = gf2Times(mat, mat[n])
	}
}

// New returns a hash for the checksum algorithm named algo (as XRootD and
// HTTP Digest name them, case-insensitive): adler32, crc32c, md5, sha256
// (or sha-256); false for any other. Sum of adler32 and crc32c is 4
// big-endian bytes, as their hex checksums print.
func New(algo string) (hash.Hash, bool) {
	switch strings.ToLower(algo) {
	case "adler32":
		return NewAdler32(), true
	case "crc32c":
		return crc32.New(Castagnoli), true
	case "md5":
		return md5.New(), true
	case "sha256", "sha-256":
		return sha256.New(), true
	}
	return nil, false
}
