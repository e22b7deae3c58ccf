package xrdpfc

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/hepcache/hepcache/internal/checksum"
)

// A cache run with `pfc.cschk cache` writes its data files through
// XrdOssCsi, which keeps a tag file per data file: a 20-byte header
// (magic "RDT0", the tracked data length, flags, a CRC32C of the first 16
// bytes), then one CRC32C per 4 KiB page of the data file. Page CRCs
// combine into the CRC32C of any run of whole pages, so the CRC of a block
// follows from the tags without reading the data.

// PageSize is the unit of the tag file's CRCs.
const PageSize = 4096

// TagDir and TagExt place the tag file of /a/b.root at
// <localroot>/.xrdt/a/b.root.xrdt (XrdOssCsi's default prefix).
const (
	TagDir = ".xrdt"
	TagExt = ".xrdt"
)

const (
	tagMagic  = 0x30544452
	tagHeader = 20
)

// Tags are the page CRC32Cs of one data file.
type Tags struct {
	// Tracked is the data length the tags cover.
	Tracked int64
	crcs    []uint32
}

// ParseTags decodes a tag file, in either byte order.
func ParseTags(b []byte) (*Tags, error) {
	if len(b) < tagHeader {
		return nil, fmt.Errorf("%w: tag file of %d bytes", ErrFormat, len(b))
	}
	var bo binary.ByteOrder = binary.LittleEndian
	if binary.LittleEndian.Uint32(b) != tagMagic {
		if binary.BigEndian.Uint32(b) != tagMagic {
			return nil, fmt.Errorf("%w: tag file magic %08x", ErrFormat, binary.LittleEndian.Uint32(b))
		}
		bo = binary.BigEndian
	}
	if got, want := crc32.Checksum(b[:16], checksum.Castagnoli), bo.Uint32(b[16:]); got != want {
		return nil, fmt.Errorf("%w: tag header checksum %08x, recorded %08x", ErrFormat, got, want)
	}
	t := &Tags{Tracked: int64(bo.Uint64(b[4:]))}
	if t.Tracked < 0 {
		return nil, fmt.Errorf("%w: tracked length %d", ErrFormat, t.Tracked)
	}
	for p := b[tagHeader:]; len(p) >= 4; p = p[4:] {
		t.crcs = append(t.crcs, bo.Uint32(p))
	}
	return t, nil
}

// CRC returns the CRC32C of the data in [off, off+n), off a multiple of
// PageSize and off+n a page boundary or the end of a file of size bytes,
// from the page CRCs; false if the tags do not cover the range.
func (t *Tags) CRC(off, n, size int64) (uint32, bool) {
	if off%PageSize != 0 || n <= 0 || off+n > size || off+n > t.Tracked || (off+n)%PageSize != 0 && off+n != size {
		return 0, false
	}
	var crc uint32
	for p := off; p < off+n; p += PageSize {
		i := p / PageSize
		if i >= int64(len(t.crcs)) {
			return 0, false
		}
		l := min(PageSize, size-p)
		if p == off {
			crc = t.crcs[i]
		} else {
			crc = checksum.CRC32CCombine(crc, t.crcs[i], l)
		}
	}
	return crc, true
}

// TagFileSize is the size of the tag file of a data file of size bytes.
func TagFileSize(size int64) int64 { return tagHeader + 4*((size+PageSize-1)/PageSize) }
