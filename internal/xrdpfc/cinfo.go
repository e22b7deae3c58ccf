// Package xrdpfc reads what XRootD's file cache (XrdPfc, XCache) keeps
// next to each cached data file: the .cinfo file (block size, file size,
// the bitmap of blocks synced to disk, access statistics) and, when the
// cache ran with `pfc.cschk cache`, the XrdOssCsi tag file holding a
// CRC32C per 4 KiB page. Written from the format as XRootD 5.5.3 lays it
// out on x86-64 (little endian, version 4); it only reads.
package xrdpfc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/hepcache/hepcache/internal/bitmap"
	"github.com/hepcache/hepcache/internal/checksum"
)

// ErrFormat marks a .cinfo or tag file that does not parse or fails its
// own checksum.
var ErrFormat = errors.New("xrdpfc: bad format")

// Ext is the name suffix of the .cinfo files.
const Ext = ".cinfo"

// The layout of version 4 (XrdPfcInfo's Store and AStat as a 64-bit
// compiler pads them): a 4-byte version, the 48-byte store, its CRC32C,
// the synced-blocks bitmap, the access records (56 bytes each) and the
// CRC32C of bitmap and records together.
const (
	version   = 4
	storeSize = 48
	astatSize = 56
	// maxRecords bounds the access records a file may claim (XrdPfc keeps
	// at most pfc.acchistorysize, itself at most 200).
	maxRecords = 4096
)

// MaxFileSize bounds the file size a .cinfo may claim (1 TiB: far above
// any file XCache serves, far below what would make the description of
// its blocks a memory hazard).
const MaxFileSize = 1 << 40

// Checksum states of the store's status (XrdPfc's CkSumCheck_e bits).
const (
	CkSumCache = 1 // blocks written with page CRC32Cs (tag files)
	CkSumNet   = 2 // blocks checked against the origin's page CRC32Cs
)

// Access is one access record: from attach to detach, the bytes read
// from the cache (hit), from the origin and cached (missed), and from the
// origin without caching (bypassed).
type Access struct {
	Attach, Detach                time.Time
	NumIOs, Duration, NumMerged   int32
	BytesHit, BytesMissed, Bypass int64
}

// Info is a decoded .cinfo file.
type Info struct {
	BlockSize int64
	FileSize  int64
	// Created is when XCache first cached the file.
	Created time.Time
	// AccessCount is the number of opens XCache counted.
	AccessCount int64
	// CkSumState has the CkSum* bits the blocks were written with.
	CkSumState int
	// Synced has a bit per block, set when the block is on disk.
	Synced  *bitmap.Bitmap
	Records []Access
}

// NumBlocks returns the blocks of a file of size bytes as XrdPfc counts
// them (a file of 0 bytes has one, empty, block).
func NumBlocks(size, blockSize int64) int {
	if size <= 0 {
		return 1
	}
	return int((size-1)/blockSize + 1)
}

// Complete reports whether every block is synced.
func (in *Info) Complete() bool { return in.Synced.Full() }

// LastAccess is the latest detach (or attach) time, else the creation.
func (in *Info) LastAccess() time.Time {
	t := in.Created
	for _, r := range in.Records {
		for _, c := range []time.Time{r.Attach, r.Detach} {
			if c.After(t) {
				t = c
			}
		}
	}
	return t
}

// Parse decodes a version 4 .cinfo file, checking both of its CRC32Cs.
func Parse(b []byte) (*Info, error) {
	if len(b) < 4+storeSize+4 {
		return nil, fmt.Errorf("%w: %d bytes", ErrFormat, len(b))
	}
	le := binary.LittleEndian
	if v := int32(le.Uint32(b)); v != version {
		return nil, fmt.Errorf("%w: version %d (only %d, written by XRootD 5, is read)", ErrFormat, v, version)
	}
	st := b[4 : 4+storeSize]
	if got, want := crc32.Checksum(st, checksum.Castagnoli), le.Uint32(b[4+storeSize:]); got != want {
		return nil, fmt.Errorf("%w: store checksum %08x, recorded %08x", ErrFormat, got, want)
	}
	in := &Info{
		BlockSize:   int64(le.Uint64(st[0:])),
		FileSize:    int64(le.Uint64(st[8:])),
		Created:     unix(int64(le.Uint64(st[16:]))),
		AccessCount: int64(le.Uint64(st[32:])),
		CkSumState:  int(le.Uint32(st[40:]) & 7),
	}
	nrec := int64(int32(le.Uint32(st[44:])))
	if in.BlockSize < 4096 || in.BlockSize > 1<<30 || in.FileSize < 0 || in.FileSize > MaxFileSize || nrec < 0 || nrec > maxRecords {
		return nil, fmt.Errorf("%w: block size %d, file size %d, %d access records", ErrFormat, in.BlockSize, in.FileSize, nrec)
	}
	nb := NumBlocks(in.FileSize, in.BlockSize)
	bmLen := int64((nb-1)/8 + 1)
	rest := b[4+storeSize+4:]
	if int64(len(rest)) != bmLen+nrec*astatSize+4 {
		return nil, fmt.Errorf("%w: %d bytes after the store, want %d", ErrFormat, len(rest), bmLen+nrec*astatSize+4)
	}
	body := rest[:len(rest)-4]
	if got, want := crc32.Checksum(body, checksum.Castagnoli), le.Uint32(rest[len(rest)-4:]); got != want {
		return nil, fmt.Errorf("%w: bitmap and records checksum %08x, recorded %08x", ErrFormat, got, want)
	}
	in.Synced = bitmap.FromBytes(nb, body[:bmLen])
	for r := body[bmLen:]; len(r) >= astatSize; r = r[astatSize:] {
		in.Records = append(in.Records, Access{
			Attach: unix(int64(le.Uint64(r[0:]))), Detach: unix(int64(le.Uint64(r[8:]))),
			NumIOs: int32(le.Uint32(r[16:])), Duration: int32(le.Uint32(r[20:])), NumMerged: int32(le.Uint32(r[24:])),
			BytesHit: int64(le.Uint64(r[32:])), BytesMissed: int64(le.Uint64(r[40:])), Bypass: int64(le.Uint64(r[48:])),
		})
	}
	return in, nil
}

func unix(s int64) time.Time {
	if s <= 0 {
		return time.Time{}
	}
	return time.Unix(s, 0).UTC()
}
