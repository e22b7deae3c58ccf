package checksum

import "golang.org/x/sys/cpu"

// haveBlocks: adler32Blocks may be used (AVX2).
var haveBlocks = cpu.X86.HasAVX2

// adler32Blocks sums p, whose length is a multiple of 32 and at most
// maxBlocksLen, 32 bytes at a time with AVX2. For p = blocks B_0..B_{k-1}
// it stores in out, as 8 lanes each to be added up: the byte sum of p
// (out[0:8]), the sum over j of the byte sums of B_0..B_{j-1} (out[8:16]),
// and the sum over the blocks of their bytes weighted 32, 31, ..., 1
// (out[16:24]).
//
//go:noescape
func adler32Blocks(p []byte, out *[24]uint32)
