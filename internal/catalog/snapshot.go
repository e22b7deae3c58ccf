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

// A snapshot is the catalogue written to a file, so that the next start
// loads it at the speed of a sequential read (each file ~35 bytes plus its
// path) instead of opening every sidecar (a random read each; 200,000 took
// 7.4 s, 10 million would take many minutes). Close writes it clean; the
// cache also writes one every few minutes while it runs, for a start after
// a crash. A clean snapshot is exact, and the start marks it used before
// anything changes; any other (written while running, or used since) is
// taken as an approximation: the walk that follows the load reads again
// the sidecars changed since it was written, reads those it lacks and
// forgets those gone. Either way the walk checks the catalogue against the
// trees in the background, which also catches what offline tools changed.
// The sidecars stay the truth of what a file holds: the catalogue only
// ranks files for purge and counts their bytes.
//
// Layout: a 32-byte header (magic, flags, version, files, the time the
// writing began), then blocks of [payload length u32][CRC32C u32][payload]:
// the first names the origins and the disks (by marker), the others hold
// records (origin, disk, bytes, last access, path; uvarints), most recently
// used first when the snapshot is ordered (else in no order: the load
// sorts them by last access), and an empty block followed by the number of
// records, which its CRC covers, ends it.

// SnapshotName is the snapshot's file in the cache directory.
const SnapshotName = "catalog.snap"

const (
	snapMagic   = "HCCATLG1"
	snapVersion = 2
	snapHeader  = 32
	// snapClean is the flag of a snapshot written at a clean shutdown
	// and not used since; snapOrdered of one whose records are in LRU
	// order.
	snapClean   = 1
	snapOrdered = 2
	// snapBlock is the target payload of a block.
	snapBlock = 64 << 10
)

var errSnapshot = errors.New("catalog: snapshot corrupt")

// WriteSnapshot writes the catalogue to dir/SnapshotName, through a
// temporary file, synced, then renamed; disks name the data disks by id.
// With clean (at Close, once every file is closed: nothing else changes
// the catalogue) it holds the catalogue's lock throughout, file writes
// included, and writes the files in LRU order; the snapshot is exact.
// Without, it takes the lock a page of items at a time and writes no
// file it does not hold meanwhile: the cache goes on, and the snapshot
// is an approximation for a start after a crash. Not safe for concurrent
// use with itself.
func (c *Catalog) WriteSnapshot(fsys disk.FS, dir string, disks []Disk, clean bool) (err error) {
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
	if clean {
		c.mu.Lock()
		err = c.encodeOrderedLocked(w, disks)
		c.mu.Unlock()
	} else {
		err = c.encodeByPage(w, disks)
	}
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

// encodeHead writes the header and the first block.
func encodeHead(w *bufio.Writer, flags uint32, items int, origins []string, disks []Disk) {
	var h [snapHeader]byte
	copy(h[:], snapMagic)
	binary.LittleEndian.PutUint32(h[8:], flags)
	binary.LittleEndian.PutUint32(h[12:], snapVersion)
	binary.LittleEndian.PutUint64(h[16:], uint64(items))
	binary.LittleEndian.PutUint64(h[24:], uint64(time.Now().UnixNano()))
	w.Write(h[:])
	var b []byte
	b = binary.AppendUvarint(b, uint64(len(origins)))
	for _, o := range origins {
		b = binary.AppendUvarint(b, uint64(len(o)))
		b = append(b, o...)
	}
	b = binary.AppendUvarint(b, uint64(len(disks)))
	for _, d := range disks {
		b = binary.AppendUvarint(b, uint64(len(d.Marker)))
		b = append(b, d.Marker...)
	}
	writeBlock(w, b)
}

// appendRecordLocked appends item i's record to b. MUST be called with
// c.mu held.
func (c *Catalog) appendRecordLocked(b []byte, i int32) []byte {
	it := c.at(i)
	p := c.names.get(i, it.name)
	b = binary.AppendUvarint(b, uint64(it.origin))
	b = binary.AppendUvarint(b, uint64(it.disk))
	b = binary.AppendUvarint(b, uint64(max(it.bytes, 0)))
	b = binary.AppendUvarint(b, uint64(it.access))
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}

// encodeTail writes the end: an empty block, then the record count.
func encodeTail(w *bufio.Writer, n uint64) error {
	var t [16]byte
	binary.LittleEndian.PutUint64(t[8:], n)
	binary.LittleEndian.PutUint32(t[4:], crc32.Checksum(t[8:], checksum.Castagnoli))
	_, err := w.Write(t[:])
	return err
}

func (c *Catalog) encodeOrderedLocked(w *bufio.Writer, disks []Disk) error {
	encodeHead(w, snapClean|snapOrdered, c.n, c.origins, disks)
	var b []byte
	n := uint64(0)
	for _, l := range []*list{&c.lru, &c.pending} {
		for i := l.head; i != none; i = c.at(i).next {
			b = c.appendRecordLocked(b, i)
			n++
			if len(b) >= snapBlock {
				writeBlock(w, b)
				b = b[:0]
			}
		}
	}
	if len(b) > 0 {
		writeBlock(w, b)
	}
	return encodeTail(w, n)
}

// encodeByPage writes the items a page of slots at a time, each under the
// lock, the writes outside it. Files of origins interned after the start
// are left out (the walk after a load finds them).
func (c *Catalog) encodeByPage(w *bufio.Writer, disks []Disk) error {
	c.mu.Lock()
	origins := append([]string(nil), c.origins...)
	items := c.n
	c.mu.Unlock()
	encodeHead(w, 0, items, origins, disks)
	var b []byte
	n := uint64(0)
	for start := int32(0); ; start += pageSize {
		c.mu.Lock()
		if start >= c.slots {
			c.mu.Unlock()
			break
		}
		for i := start; i < min(start+pageSize, c.slots); i++ {
			if it := c.at(i); it.flags&flagLive != 0 && int(it.origin) < len(origins) && int(it.disk) < len(disks) {
				b = c.appendRecordLocked(b, i)
				n++
			}
		}
		c.mu.Unlock()
		if len(b) >= snapBlock { // whole records: a block ends with a page
			writeBlock(w, b)
			b = b[:0]
		}
	}
	if len(b) > 0 {
		writeBlock(w, b)
	}
	return encodeTail(w, n)
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
	f disk.File
	r *bufio.Reader
	// items is the number of files when the writing began (the records
	// may be a few more or less, unless clean).
	items uint64
	// clean: written at a clean shutdown, not used since (exact);
	// ordered: the records are in LRU order; written: when its writing
	// began.
	clean, ordered bool
	written        time.Time
	origins        []string
	// disks maps the snapshot's disk numbers to the cache's disk ids
	// (-1: not one of them).
	disks []int
	buf   []byte
}

func (s *snapshot) close() { s.f.Close() }

// openSnapshot opens dir's snapshot if it names the same disks (by
// marker) as disks, reads its first block, and if it is clean marks it
// used (flag cleared, synced) before returning it: from now on it is an
// approximation. It returns nil and why when there is none to use.
func openSnapshot(fsys disk.FS, dir string, disks []Disk) (*snapshot, string) {
	name := filepath.Join(dir, SnapshotName)
	f, err := fsys.OpenFile(name, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "no snapshot (first start)"
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
	case binary.LittleEndian.Uint32(h[12:]) != snapVersion:
		f.Close()
		return nil, "snapshot of another version"
	}
	flags := binary.LittleEndian.Uint32(h[8:])
	s := &snapshot{f: f, items: binary.LittleEndian.Uint64(h[16:]),
		clean: flags&snapClean != 0, ordered: flags&snapOrdered != 0,
		written: time.Unix(0, int64(binary.LittleEndian.Uint64(h[24:]))),
		r:       bufio.NewReaderSize(io.NewSectionReader(f, snapHeader, 1<<62), 1<<20)}
	fail := func(why string) (*snapshot, string) {
		f.Close()
		return nil, why
	}
	p, _, err := s.block()
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
	if d.err != nil || len(d.b) != 0 {
		return fail(fmt.Sprintf("snapshot %s: %v", name, errSnapshot))
	}
	if s.clean {
		// Used from now on: a crash before the next clean shutdown
		// must not leave it looking exact.
		binary.LittleEndian.PutUint32(h[8:], flags&^snapClean)
		if _, err := f.WriteAt(h[8:12], 8); err != nil {
			return fail(fmt.Sprintf("snapshot %s: %v", name, err))
		}
		if err := f.Sync(); err != nil {
			return fail(fmt.Sprintf("snapshot %s: %v", name, err))
		}
	}
	return s, ""
}

// block returns the next block's payload (valid until the next call), or
// nil and the number of records at the end.
func (s *snapshot) block() ([]byte, uint64, error) {
	var t [8]byte
	if _, err := io.ReadFull(s.r, t[:]); err != nil {
		return nil, 0, fmt.Errorf("%w: %w", errSnapshot, err)
	}
	n, sum := binary.LittleEndian.Uint32(t[:]), binary.LittleEndian.Uint32(t[4:])
	if n == 0 {
		var end [8]byte
		if _, err := io.ReadFull(s.r, end[:]); err != nil || sum != crc32.Checksum(end[:], checksum.Castagnoli) {
			return nil, 0, fmt.Errorf("%w: bad end", errSnapshot)
		}
		return nil, binary.LittleEndian.Uint64(end[:]), nil
	}
	if n > 16<<20 {
		return nil, 0, fmt.Errorf("%w: block of %d bytes", errSnapshot, n)
	}
	if cap(s.buf) < int(n) {
		s.buf = make([]byte, n)
	}
	s.buf = s.buf[:n]
	if _, err := io.ReadFull(s.r, s.buf); err != nil {
		return nil, 0, fmt.Errorf("%w: %w", errSnapshot, err)
	}
	if crc32.Checksum(s.buf, checksum.Castagnoli) != sum {
		return nil, 0, fmt.Errorf("%w: checksum mismatch", errSnapshot)
	}
	return s.buf, 0, nil
}

// loadSnapshot adds the snapshot's files, a block at a time: an ordered
// snapshot's at the back of the LRU list (it lists them most recently used
// first, and whatever the cache opened meanwhile is more recent still),
// another's on the pending list, which settle puts in order.
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
		p, count, err := s.block()
		if err != nil {
			return err
		}
		if p == nil {
			if count != n {
				return fmt.Errorf("%w: %d records, %d counted", errSnapshot, n, count)
			}
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
			c.addLoadedLocked(r.k, r.bytes, r.access, r.disk, false, !s.ordered, cfg.Up)
		}
		c.mu.Unlock()
		n += uint64(len(recs))
		c.load.loaded.Store(int64(n))
		if time.Since(last) >= progressEvery {
			last = time.Now()
			cfg.Logger.Info(fmt.Sprintf("cache index loading %d of %d", n, s.items))
		}
	}
	if !s.ordered {
		c.settle()
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
