package blockstore

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"syscall"

	"github.com/hepcache/hepcache/disk"
)

// File is a data file whose blocks are written and read whole, with direct
// I/O where the file system allows it. Safe for concurrent use on distinct
// blocks.
type File struct {
	f      disk.File
	direct bool
	// size is the file's size: a block ending there may be shorter than
	// Align, and is written padded, then cut back.
	size int64
	// mode is the file's mode when it was opened.
	mode fs.FileMode
}

// ErrNoDirectIO marks a file system that refused O_DIRECT.
var ErrNoDirectIO = errors.New("blockstore: file system refuses direct I/O")

// Open opens name on fsys with flag and perm. With direct, it asks for
// O_DIRECT first; a file system that refuses it (EINVAL: ramfs, some FUSE
// and network file systems) gets the file with buffered I/O, and
// File.Direct reports false.
func Open(fsys disk.FS, name string, flag int, perm fs.FileMode, direct bool) (*File, error) {
	if direct {
		f, err := fsys.OpenFile(name, flag|syscall.O_DIRECT, perm)
		if err == nil {
			return newFile(f, true)
		}
		if !errors.Is(err, syscall.EINVAL) {
			return nil, err
		}
	}
	f, err := fsys.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return newFile(f, false)
}

func newFile(f disk.File, direct bool) (*File, error) {
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &File{f: f, direct: direct, size: st.Size(), mode: st.Mode()}, nil
}

// Mode returns the file's mode as it was when opened.
func (f *File) Mode() fs.FileMode { return f.mode }

// Direct reports whether the file does direct I/O.
func (f *File) Direct() bool { return f.direct }

// Size returns the file's size as last set.
func (f *File) Size() int64 { return f.size }

func roundUp(n int) int { return (n + Align - 1) &^ (Align - 1) }

// WriteBlock writes buf[:n] at off. With direct I/O buf and off must be
// aligned and len(buf) at least n rounded up to Align; a length that is not
// a multiple of Align must end at the file's end (the last block), and is
// written padded and the file cut back to its size.
func (f *File) WriteBlock(buf []byte, off int64, n int) error {
	if !f.direct {
		_, err := f.f.WriteAt(buf[:n], off)
		return err
	}
	m := roundUp(n)
	if off%Align != 0 || m > len(buf) || (m != n && off+int64(n) != f.size) {
		return fmt.Errorf("blockstore: unaligned direct write of %d bytes at %d (buffer %d, file size %d)", n, off, len(buf), f.size)
	}
	if _, err := f.f.WriteAt(buf[:m], off); err != nil {
		return err
	}
	if m != n {
		// The padding went past the end of the file: cut it off. A crash
		// before this leaves a file longer than its sidecar says, which
		// the cache does not trust.
		return f.f.Truncate(f.size)
	}
	return nil
}

// ReadBlock reads n bytes at off into buf. With direct I/O buf and off must
// be aligned and len(buf) at least n rounded up to Align. Fewer than n
// bytes (the file is shorter) is an error.
func (f *File) ReadBlock(buf []byte, off int64, n int) error {
	m := n
	if f.direct {
		m = roundUp(n)
		if off%Align != 0 || m > len(buf) {
			return fmt.Errorf("blockstore: unaligned direct read of %d bytes at %d (buffer %d)", n, off, len(buf))
		}
	}
	k, err := f.f.ReadAt(buf[:m], off)
	if k >= n {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("read %d bytes at %d: got %d: %w", n, off, k, err)
}

// Truncate sets the file's size.
func (f *File) Truncate(size int64) error {
	if err := f.f.Truncate(size); err != nil {
		return err
	}
	f.size = size
	return nil
}

// Allocate reserves disk space for [off, off+n) (disk.File.Allocate).
func (f *File) Allocate(off, n int64) error { return f.f.Allocate(off, n) }

// Sync makes the written blocks durable.
func (f *File) Sync() error { return f.f.Sync() }

// Stat returns the file's metadata.
func (f *File) Stat() (fs.FileInfo, error) { return f.f.Stat() }

// Close closes the file.
func (f *File) Close() error { return f.f.Close() }
