package catalog

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
	"unsafe"

	"github.com/hepcache/hepcache/disk"
	"github.com/hepcache/hepcache/internal/checksum"
)

// A snapshot is the catalogue written at a clean shutdown, so that the
// next start loads it at the speed of a sequential read (tens of MB/s of
// records, each ~35 bytes plus the path) instead of opening every sidecar
// (a random read each; 200,000 took 7.4 s, 10 million would take many
// minutes). It is trusted only as written at a clean shutdown: the start
// marks it used before anything changes, so that after a crash it is not
// taken for the truth, and the walk then rebuilds the catalogue from the
// sidecars. Either way the walk checks the catalogue against the trees in
// the background, which also catches what offline tools changed. The
// sidecars stay the truth of what a file holds: the catalogue only ranks
// files for purge and counts their bytes.
//
// Layout: a 32-byte header (magic, flags, version, items, time written),
// then blocks of [payload length u32][CRC32C u32][payload]: the first
// names the origins and the disks (by marker), the others hold records
// (origin, disk, bytes, last access, path; uvarints), most recently used
// first, and an empty block whose CRC is that of the item count ends it.

// SnapshotName is the snapshot's file in the cache directory.
const SnapshotName = "catalog.snap"

const (
	snapMagic   = "HCCATLG1"
	snapVersion = 1
	snapHeader  = 32
	// snapClean is the flag of a snapshot written at a clean shutdown
	// and not used since.
	snapClean = 1
	// snapBlock is the target payload of a block.
	snapBlock = 64 << 10
)

var errSnapshot = errors.New("catalog: snapshot corrupt")

// WriteSnapshot writes the catalogue to dir/SnapshotName (through a
// temporary file, synced, then renamed), marked clean. It holds the
// catalogue's lock throughout, file writes included: call it when nothing
// else changes the catalogue (at Close, once every file is closed), when
// only readers of figures would wait. disks name the data disks by id.
func (c *Catalog) WriteSnapshot(fsys disk.FS, dir string, disks []Disk) (err error) {
	final := filepath.Join(dir, SnapshotName)
	tmp := final + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("write index snapshot: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			fsys.Remove(tmp)
			err = fmt.Errorf("write index snapshot %s: %w", final, err)
		}
	}()
	w := bufio.NewWriterSize(io.NewOffsetWriter(f, 0), 1<<20)
	c.mu.Lock()
	err = c.encodeLocked(w, disks)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if err = w.Flush(); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = fsys.Rename(tmp, final); err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}

func (c *Catalog) encodeLocked(w *bufio.Writer, disks []Disk) error {
	var h [snapHeader]byte
	copy(h[:], snapMagic)
	binary.LittleEndian.PutUint32(h[8:], snapClean)
	binary.LittleEndian.PutUint32(h[12:], snapVersion)
	binary.LittleEndian.PutUint64(h[16:], uint64(c.n))
	binary.LittleEndian.PutUint64(h[24:], uint64(time.Now().UnixNano()))
	w.Write(h[:])
	var b []byte
	b = binary.AppendUvarint(b, uint64(len(c.origins)))
	for _, o := range c.origins {
		b = binary.AppendUvarint(b, uint64(len(o)))
		b = append(b, o...)
	}
	b = binary.AppendUvarint(b, uint64(len(disks)))
	for _, d := range disks {
		b = binary.AppendUvarint(b, uint64(len(d.Marker)))
		b = append(b, d.Marker...)
	}
	b = binary.AppendUvarint(b, uint64(c.n))
	writeBlock(w, b)
	b = b[:0]
	for _, l := range []*list{&c.lru, &c.pending} {
		for i := l.head; i != none; i = c.at(i).next {
			it := c.at(i)
			p := c.names.get(i, it.name)
			b = binary.AppendUvarint(b, uint64(it.origin))
			b = binary.AppendUvarint(b, uint64(it.disk))
			b = binary.AppendUvarint(b, uint64(max(it.bytes, 0)))
			b = binary.AppendUvarint(b, uint64(it.access))
			b = binary.AppendUvarint(b, uint64(len(p)))
			b = append(b, p...)
			if len(b) >= snapBlock {
				writeBlock(w, b)
				b = b[:0]
			}
		}
	}
	if len(b) > 0 {
		writeBlock(w, b)
	}
	var end [8]byte
	binary.LittleEndian.PutUint64(end[:], uint64(c.n))
	var t [8]byte
	binary.LittleEndian.PutUint32(t[4:], crc32.Checksum(end[:], checksum.Castagnoli))
	_, err := w.Write(t[:])
	return err
}

func writeBlock(w *bufio.Writer, p []byte) {
	var t [8]byte
	binary.LittleEndian.PutUint32(t[:], uint32(len(p)))
	binary.LittleEndian.PutUint32(t[4:], crc32.Checksum(p, checksum.Castagnoli))
	w.Write(t[:])
	w.Write(p)
}

// RemoveSnapshot removes the snapshot of the cache in dir, if any: tools
// that change the cache's trees while it is stopped (adoption, offline
// eviction) call it, so that the next start does not trust a catalogue
// that misses their changes. (The walk would find them too, but only
// after the start.)
func RemoveSnapshot(dir string) error {
	err := os.Remove(filepath.Join(dir, SnapshotName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// snapshot is an open snapshot being loaded.
type snapshot struct {
	f       disk.File
	r       *bufio.Reader
	items   uint64
	origins []string
	// disks maps the snapshot's disk numbers to the cache's disk ids
	// (-1: not one of them).
	disks []int
	buf   []byte
}

func (s *snapshot) close() { s.f.Close() }

// openSnapshot opens dir's snapshot if it was written at a clean shutdown
// and names the same disks (by marker) as disks, reads its first block,
// and marks it used (flag cleared, synced) before returning it. It
// returns nil and why when there is none to use.
func openSnapshot(fsys disk.FS, dir string, disks []Disk) (*snapshot, string) {
	name := filepath.Join(dir, SnapshotName)
	f, err := fsys.OpenFile(name, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "no snapshot (first start, or the last run did not stop cleanly)"
	}
	if err != nil {
		return nil, fmt.Sprintf("snapshot %s: %v", name, err)
	}
	var h [snapHeader]byte
	if _, err := f.ReadAt(h[:], 0); err != nil {
		f.Close()
		return nil, fmt.Sprintf("snapshot %s: %v", name, err)
	}
	switch {
	case string(h[:8]) != snapMagic:
		f.Close()
		return nil, "snapshot of another format"
	case binary.LittleEndian.Uint32(h[8:])&snapClean == 0:
		f.Close()
		return nil, "snapshot not written at a clean shutdown (the last run stopped without one: a crash, or a kill)"
	case binary.LittleEndian.Uint32(h[12:]) != snapVersion:
		f.Close()
		return nil, "snapshot of another version"
	}
	s := &snapshot{f: f, items: binary.LittleEndian.Uint64(h[16:]),
		r: bufio.NewReaderSize(io.NewSectionReader(f, snapHeader, 1<<62), 1<<20)}
	fail := func(why string) (*snapshot, string) {
		f.Close()
		return nil, why
	}
	p, err := s.block()
	if err != nil || p == nil {
		return fail(fmt.Sprintf("snapshot %s: %v", name, err))
	}
	d := decoder{b: p}
	s.origins = make([]string, d.uvarint())
	for i := range s.origins {
		s.origins[i] = string(d.bytes(int(d.uvarint())))
	}
	markers := map[string]int{}
	for i, dk := range disks {
		markers[dk.Marker] = i
	}
	s.disks = make([]int, d.uvarint())
	for i := range s.disks {
		m := string(d.bytes(int(d.uvarint())))
		id, ok := markers[m]
		if !ok {
			return fail("the snapshot names a data disk the cache does not have now")
		}
		s.disks[i] = id
	}
	if n := d.uvarint(); d.err != nil || n != s.items || len(d.b) != 0 {
		return fail(fmt.Sprintf("snapshot %s: %v", name, errSnapshot))
	}
	// Used from now on: a crash before the next clean shutdown must not
	// leave it looking trusted.
	var flags [4]byte
	if _, err := f.WriteAt(flags[:], 8); err != nil {
		return fail(fmt.Sprintf("snapshot %s: %v", name, err))
	}
	if err := f.Sync(); err != nil {
		return fail(fmt.Sprintf("snapshot %s: %v", name, err))
	}
	return s, ""
}

// block returns the next block's payload (valid until the next call), or
// nil at the end.
func (s *snapshot) block() ([]byte, error) {
	var t [8]byte
	if _, err := io.ReadFull(s.r, t[:]); err != nil {
		return nil, fmt.Errorf("%w: %w", errSnapshot, err)
	}
	n, sum := binary.LittleEndian.Uint32(t[:]), binary.LittleEndian.Uint32(t[4:])
	if n == 0 {
		var end [8]byte
		binary.LittleEndian.PutUint64(end[:], s.items)
		if sum != crc32.Checksum(end[:], checksum.Castagnoli) {
			return nil, fmt.Errorf("%w: bad end", errSnapshot)
		}
		return nil, nil
	}
	if n > 16<<20 {
		return nil, fmt.Errorf("%w: block of %d bytes", errSnapshot, n)
	}
	if cap(s.buf) < int(n) {
		s.buf = make([]byte, n)
	}
	s.buf = s.buf[:n]
	if _, err := io.ReadFull(s.r, s.buf); err != nil {
		return nil, fmt.Errorf("%w: %w", errSnapshot, err)
	}
	if crc32.Checksum(s.buf, checksum.Castagnoli) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch", errSnapshot)
	}
	return s.buf, nil
}

// loadSnapshot adds the snapshot's files, a block at a time, at the back
// of the LRU list: the snapshot lists them most recently used first, and
// whatever the cache opened meanwhile is more recent still.
func (c *Catalog) loadSnapshot(ctx context.Context, s *snapshot, cfg *LoadConfig) error {
	type rec struct {
		k      Key
		bytes  int64
		access uint32
		disk   int
	}
	var recs []rec
	var n uint64
	last := time.Now()
	for {
		if cfg.Pace != nil {
			if err := cfg.Pace(ctx); err != nil {
				return err
			}
		}
		p, err := s.block()
		if err != nil {
			return err
		}
		if p == nil {
			break
		}
		recs = recs[:0]
		d := decoder{b: p}
		for len(d.b) > 0 && d.err == nil {
			o, dk, bytes, access := d.uvarint(), d.uvarint(), d.uvarint(), d.uvarint()
			path := d.bytes(int(d.uvarint()))
			if d.err != nil || o >= uint64(len(s.origins)) || dk >= uint64(len(s.disks)) || access > 1<<32-1 || bytes > 1<<62 {
				return fmt.Errorf("%w: bad record", errSnapshot)
			}
			// The path shares the block's buffer until the next block:
			// the records are added (and their paths copied) before.
			p := unsafe.String(unsafe.SliceData(path), len(path))
			recs = append(recs, rec{Key{s.origins[o], p}, int64(bytes), uint32(access), s.disks[dk]})
		}
		if d.err != nil {
			return fmt.Errorf("%w: %w", errSnapshot, d.err)
		}
		c.mu.Lock()
		for _, r := range recs {
			c.addLoadedLocked(r.k, r.bytes, r.access, r.disk, false, false, cfg.Up)
		}
		c.mu.Unlock()
		n += uint64(len(recs))
		c.load.loaded.Store(int64(n))
		if time.Since(last) >= progressEvery {
			last = time.Now()
			cfg.Logger.Info(fmt.Sprintf("cache index loading %d of %d", n, s.items))
		}
	}
	if n != s.items {
		return fmt.Errorf("%w: %d records for %d files", errSnapshot, n, s.items)
	}
	return nil
}

// decoder reads uvarints and byte strings, remembering the first error.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errSnapshot
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes(n int) []byte {
	if d.err != nil || n < 0 || n > len(d.b) {
		d.err = errSnapshot
		return nil
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}
