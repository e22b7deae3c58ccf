//go:build !amd64

package checksum

// haveBlocks is false: no vector path here (a variable, as on amd64, so
// that the tests can switch paths).
var haveBlocks = false

func adler32Blocks(p []byte, out *[24]uint32) { panic("checksum: adler32Blocks without AVX2") }
