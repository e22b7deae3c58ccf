// Package sidecar encodes the metadata file kept next to every cached data
// file: block size, file size, origin identity, the bitmap of blocks that are
// durable on disk, checksums and access history. The encoding ends with a
// CRC32C of itself, so a torn or corrupt sidecar is detected and the cached
// file is treated as absent rather than served.
package sidecar

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"slices"
	"time"

	"github.com/hepcache/hepcache/internal/checksum"

	"github.com/hepcache/hepcache/internal/bitmap"
)

// ErrCorrupt marks a sidecar that fails its checksum or does not parse.
var ErrCorrupt = errors.New("sidecar: corrupt")

const (
	magic = "HCINFO\x00\x01"
	// version 2 adds the per-block CRC32Cs, version 3 the flags, version
	// 4 the digests; older sidecars still load (their blocks have no known
	// CRC, no flag set, no digest).
	version = 4
	// maxDigests bounds the digests a sidecar may hold.
	maxDigests = 16
	// MaxRecords is how many access records a sidecar keeps (the newest).
	MaxRecords = 20
)

var castagnoli = checksum.Castagnoli // the tree's one CRC32C table

// ChecksumState says what is known about a complete file's checksums.
type ChecksumState uint8

// Checksum states. ONLY APPEND: the value is stored on disk.
const (
	ChecksumNone     ChecksumState = iota // not computed yet
	ChecksumComputed                      // computed from the cached bytes; origin offers none
	ChecksumVerified                      // computed and equal to the origin's
)

func (s ChecksumState) String() string {
	switch s {
	case ChecksumComputed:
		return "computed"
	case ChecksumVerified:
		return "verified"
	default:
		return "none"
	}
}

// Access is one access to the file, from open to close.
type Access struct {
	Open, Close                   time.Time
	BytesHit, BytesMissed, Bypass int64
}

// Info is the decoded sidecar.
type Info struct {
	BlockSize int64
	FileSize  int64
	// Origin and Path identify the file upstream; ModTime and ETag are the
	// origin's version of it at first fetch.
	Origin  string
	Path    string
	ModTime time.Time
	ETag    string
	// Created is when the file entered the cache.
	Created time.Time
	// LastAccess is the last open or close; purge evicts the oldest first.
	LastAccess  time.Time
	AccessCount int64
	// Durable has a bit per block, set only once the block is on disk and
	// synced.
	Durable *bitmap.Bitmap
	// Adler32 and CRC32C of the complete file when ChecksumState != None.
	ChecksumState ChecksumState
	Adler32       uint32
	CRC32C        uint32
	// Records are the newest accesses, oldest first.
	Records []Access
	// BlockCRC holds each block's CRC32C (Castagnoli) as written, valid
	// where CRCKnown has its bit (blocks cached by a version without them
	// have none), so blocks read back from disk can be checked.
	BlockCRC []uint32
	CRCKnown *bitmap.Bitmap
	// Flags are the Flag* bits.
	Flags uint8
	// Digests of the complete file that cannot be combined from its
	// blocks' (md5, sha1, sha256, crc32), computed from the cached bytes
	// when first asked for: by algorithm, as lower-case hex. Cleared with
	// any block (ForgetBlock).
	Digests map[string]string
}

// Flag bits. ONLY APPEND: the value is stored on disk.
const (
	// FlagUnconfirmed marks a copy whose origin version is not known yet
	// (adopted from XCache, which keeps neither the origin's modification
	// time nor its ETag): the first open while the origin answers compares
	// size and modification time with the origin's file, records them, and
	// drops a copy that does not match.
	FlagUnconfirmed uint8 = 1 << iota
)

// Unconfirmed reports whether FlagUnconfirmed is set.
func (in *Info) Unconfirmed() bool { return in.Flags&FlagUnconfirmed != 0 }

// SetBlockCRC records block b's CRC32C.
func (in *Info) SetBlockCRC(b int, crc uint32) {
	in.BlockCRC[b] = crc
	in.CRCKnown.Set(b)
}

// ForgetBlock clears block b: not durable, no CRC.
func (in *Info) ForgetBlock(b int) {
	in.Durable.Clear(b)
	in.CRCKnown.Clear(b)
	in.BlockCRC[b] = 0
	in.Digests = nil
}

// NumBlocks returns how many blocks a file of size bytes has.
func NumBlocks(size, blockSize int64) int {
	if size <= 0 {
		return 0
	}
	return int((size + blockSize - 1) / blockSize)
}

// New returns the sidecar of a file that has no block yet.
func New(origin, path string, size, blockSize int64, modTime time.Time, etag string, now time.Time) *Info {
	return &Info{
		BlockSize: blockSize, FileSize: size, Origin: origin, Path: path,
		ModTime: modTime, ETag: etag, Created: now, LastAccess: now,
		Durable:  bitmap.New(NumBlocks(size, blockSize)),
		BlockCRC: make([]uint32, NumBlocks(size, blockSize)),
		CRCKnown: bitmap.New(NumBlocks(size, blockSize)),
	}
}

// Complete reports whether every block is durable.
func (in *Info) Complete() bool { return in.Durable.Full() }

// AddRecord appends an access record, keeping the newest MaxRecords.
func (in *Info) AddRecord(a Access) {
	in.Records = append(in.Records, a)
	if len(in.Records) > MaxRecords {
		in.Records = append(in.Records[:0], in.Records[len(in.Records)-MaxRecords:]...)
	}
}

// Marshal encodes the sidecar.
func (in *Info) Marshal() []byte {
	bm := in.Durable.Bytes()
	b := make([]byte, 0, 128+len(in.Origin)+len(in.Path)+len(in.ETag)+len(bm)+len(in.Records)*40)
	b = append(b, magic...)
	b = binary.LittleEndian.AppendUint32(b, version)
	b = binary.LittleEndian.AppendUint64(b, uint64(in.BlockSize))
	b = binary.LittleEndian.AppendUint64(b, uint64(in.FileSize))
	b = appendString(b, in.Origin)
	b = appendString(b, in.Path)
	b = appendTime(b, in.ModTime)
	b = appendString(b, in.ETag)
	b = appendTime(b, in.Created)
	b = appendTime(b, in.LastAccess)
	b = binary.LittleEndian.AppendUint64(b, uint64(in.AccessCount))
	b = append(b, byte(in.ChecksumState))
	b = binary.LittleEndian.AppendUint32(b, in.Adler32)
	b = binary.LittleEndian.AppendUint32(b, in.CRC32C)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(in.Records)))
	for _, r := range in.Records {
		b = appendTime(b, r.Open)
		b = appendTime(b, r.Close)
		b = binary.LittleEndian.AppendUint64(b, uint64(r.BytesHit))
		b = binary.LittleEndian.AppendUint64(b, uint64(r.BytesMissed))
		b = binary.LittleEndian.AppendUint64(b, uint64(r.Bypass))
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(bm)))
	b = append(b, bm...)
	b = append(b, in.CRCKnown.Bytes()...)
	for _, c := range in.BlockCRC {
		b = binary.LittleEndian.AppendUint32(b, c)
	}
	b = append(b, in.Flags)
	algos := slices.Sorted(maps.Keys(in.Digests))
	b = append(b, byte(min(len(algos), maxDigests)))
	for _, a := range algos[:min(len(algos), maxDigests)] {
		b = appendString(b, a)
		b = appendString(b, in.Digests[a])
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// Unmarshal decodes a sidecar, failing with ErrCorrupt on any inconsistency.
func Unmarshal(b []byte) (*Info, error) {
	if len(b) < len(magic)+8 {
		return nil, fmt.Errorf("%w: %d bytes", ErrCorrupt, len(b))
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	d := decoder{b: body}
	if string(d.bytes(len(magic))) != magic {
		return nil, fmt.Errorf("%w: bad magic", ErrCorrupt)
	}
	v := d.u32()
	if v < 1 || v > version {
		return nil, fmt.Errorf("%w: version %d", ErrCorrupt, v)
	}
	in := &Info{}
	in.BlockSize = int64(d.u64())
	in.FileSize = int64(d.u64())
	in.Origin = d.str()
	in.Path = d.str()
	in.ModTime = d.time()
	in.ETag = d.str()
	in.Created = d.time()
	in.LastAccess = d.time()
	in.AccessCount = int64(d.u64())
	in.ChecksumState = ChecksumState(d.u8())
	in.Adler32 = d.u32()
	in.CRC32C = d.u32()
	n := int(d.u16())
	for i := 0; i < n && d.err == nil; i++ {
		var r Access
		r.Open = d.time()
		r.Close = d.time()
		r.BytesHit = int64(d.u64())
		r.BytesMissed = int64(d.u64())
		r.Bypass = int64(d.u64())
		in.Records = append(in.Records, r)
	}
	bmLen := int(d.u32())
	bm := d.bytes(bmLen)
	if d.err != nil {
		return nil, d.err
	}
	if in.BlockSize <= 0 || in.FileSize < 0 {
		return nil, fmt.Errorf("%w: block size %d, file size %d", ErrCorrupt, in.BlockSize, in.FileSize)
	}
	nb := NumBlocks(in.FileSize, in.BlockSize)
	if bmLen != (nb+7)/8 {
		return nil, fmt.Errorf("%w: bitmap of %d bytes for %d blocks", ErrCorrupt, bmLen, nb)
	}
	in.Durable = bitmap.FromBytes(nb, bm)
	in.BlockCRC = make([]uint32, nb)
	in.CRCKnown = bitmap.New(nb)
	if v >= 2 {
		in.CRCKnown = bitmap.FromBytes(nb, d.bytes(bmLen))
		for i := range in.BlockCRC {
			in.BlockCRC[i] = d.u32()
		}
		if d.err != nil {
			return nil, d.err
		}
	}
	if v >= 3 {
		in.Flags = d.u8()
		if d.err != nil {
			return nil, d.err
		}
	}
	if v >= 4 {
		n := int(d.u8())
		if n > maxDigests {
			return nil, fmt.Errorf("%w: %d digests", ErrCorrupt, n)
		}
		for i := 0; i < n && d.err == nil; i++ {
			a, v := d.str(), d.str()
			if in.Digests == nil {
				in.Digests = map[string]string{}
			}
			in.Digests[a] = v
		}
		if d.err != nil {
			return nil, d.err
		}
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(d.b))
	}
	return in, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

func appendTime(b []byte, t time.Time) []byte {
	var ns int64
	if !t.IsZero() {
		ns = t.UnixNano()
	}
	return binary.LittleEndian.AppendUint64(b, uint64(ns))
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) bytes(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.err = fmt.Errorf("%w: truncated", ErrCorrupt)
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u8() uint8 {
	if v := d.bytes(1); v != nil {
		return v[0]
	}
	return 0
}

func (d *decoder) u16() uint16 {
	if v := d.bytes(2); v != nil {
		return binary.LittleEndian.Uint16(v)
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if v := d.bytes(4); v != nil {
		return binary.LittleEndian.Uint32(v)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if v := d.bytes(8); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}

func (d *decoder) str() string {
	n := d.u32()
	if n > 1<<16 {
		d.err = fmt.Errorf("%w: string of %d bytes", ErrCorrupt, n)
		return ""
	}
	return string(d.bytes(int(n)))
}

func (d *decoder) time() time.Time {
	ns := int64(d.u64())
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}
