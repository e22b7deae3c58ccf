package checksum

import "sync"

// zeroOps[k] is the GF(2) operator that appends 2^k zero bytes to a
// CRC32C: combining with a length then costs one matrix-vector product per
// set bit of the length, with no squaring at run time.
var zeroOps = sync.OnceValue(func() *[64][32]uint32 {
	var ops [64][32]uint32
	var odd [32]uint32
	odd[0] = castagnoliReflected // one zero bit
	row := uint32(1)
	for n := 1; n < 32; n++ {
		odd[n] = row
		row <<= 1
	}
	var two, four [32]uint32
	gf2Square(&two, &odd)
	gf2Square(&four, &two)
	gf2Square(&ops[0], &four) // one zero byte
	for k := 1; k < 64; k++ {
		gf2Square(&ops[k], &ops[k-1])
	}
	return &ops
})
