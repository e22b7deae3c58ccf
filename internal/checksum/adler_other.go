//go:build !amd64

package checksum

const haveBlocks = false

func adler32Blocks(p []byte, out *[24]uint32) { panic("checksum: adler32Blocks without AVX2") }
