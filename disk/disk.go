// Package disk is the cache's view of the local file system.
//
// The cache stores data files and metadata sidecars through FS so that tests
// can inject faults (ENOSPC, EIO, torn writes) without a real full disk; the
// production implementation is a thin layer over package os.
package disk

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// File is an open file of the cache. Implementations are safe for concurrent
// ReadAt and WriteAt at distinct offsets.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	// Sync makes written data durable (fdatasync).
	Sync() error
	// Truncate changes the file size; the cache uses it to create sparse
	// data files of the final size.
	Truncate(size int64) error
	// Stat returns the file's metadata.
	Stat() (fs.FileInfo, error)
	// Allocate reserves disk space for [off, off+n) without changing the
	// size (fallocate). Writing into allocated space is several times
	// faster than extending a sparse file on ext4 and xfs, and a full disk
	// shows up here, before any byte was fetched for it. File systems
	// without fallocate return nil.
	Allocate(off, n int64) error
}

// FS is the subset of file-system operations the cache needs. Methods are safe
// for concurrent use.
type FS interface {
	// OpenFile opens name with os.OpenFile flags.
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	// Remove deletes a file or an empty directory.
	Remove(name string) error
	// Rename atomically replaces newname with oldname.
	Rename(oldname, newname string) error
	// MkdirAll creates a directory and its parents.
	MkdirAll(name string, perm fs.FileMode) error
	// Stat returns metadata of name.
	Stat(name string) (fs.FileInfo, error)
	// ReadDir lists a directory.
	ReadDir(name string) ([]fs.DirEntry, error)
	// SyncDir makes a directory's entries (creations, renames) durable.
	SyncDir(name string) error
}

// OS is the real file system.
type OS struct{}

var _ FS = OS{}

// OpenFile implements FS.
func (OS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// osFile adds Allocate to *os.File.
type osFile struct{ *os.File }

func (f osFile) Allocate(off, n int64) error {
	err := syscall.Fallocate(int(f.Fd()), 0, off, n)
	if errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) {
		return nil
	}
	if err != nil {
		return &fs.PathError{Op: "fallocate", Path: f.Name(), Err: err}
	}
	return nil
}

// OSFile returns the *os.File behind a File of the OS file system, for
// zero-copy sends (sendfile); nil for other implementations.
func OSFile(f File) *os.File {
	if of, ok := f.(osFile); ok {
		return of.File
	}
	return nil
}

// Remove implements FS.
func (OS) Remove(name string) error { return os.Remove(name) }

// Rename implements FS.
func (OS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

// MkdirAll implements FS.
func (OS) MkdirAll(name string, perm fs.FileMode) error { return os.MkdirAll(name, perm) }

// Stat implements FS.
func (OS) Stat(name string) (fs.FileInfo, error) { return os.Stat(name) }

// ReadDir implements FS.
func (OS) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(name) }

// SyncDir implements FS.
func (OS) SyncDir(name string) error {
	d, err := os.Open(name)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// WriteFileAtomic writes data to name so that a crash leaves either the old
// or the new content, never a mix: write a temporary file, sync it, rename it
// over name, sync the directory.
func WriteFileAtomic(fsys FS, name string, data []byte, syncDir bool) error {
	tmp := name + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		fsys.Remove(tmp)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		fsys.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		fsys.Remove(tmp)
		return err
	}
	if err := fsys.Rename(tmp, name); err != nil {
		fsys.Remove(tmp)
		return err
	}
	if syncDir {
		return fsys.SyncDir(dirOf(name))
	}
	return nil
}

func dirOf(name string) string {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '/' {
			if i == 0 {
				return "/"
			}
			return name[:i]
		}
	}
	return "."
}

// SyncFSer is an FS that can make durable, in one call, everything written
// to the file system holding name (syncfs(2)): one journal commit and one
// device flush for every file written since, instead of an fdatasync per
// file. The cache's periodic sync uses it when the FS offers it, else
// syncs each file.
type SyncFSer interface {
	SyncFS(name string) error
}

// SyncFS implements SyncFSer.
func (OS) SyncFS(name string) error {
	d, err := os.Open(name)
	if err != nil {
		return err
	}
	return syncfsClose(d, name)
}

// syncfsClose syncs the file system of the open directory d, then closes
// it.
func syncfsClose(d *os.File, name string) error {
	defer d.Close()
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return &fs.PathError{Op: "syncfs", Path: name, Err: err}
	}
	return nil
}

// WriteFileInPlace writes data as the whole content of name, created if
// missing, without a temporary file, a rename or a sync: the cache's
// sidecars, which carry their own CRC32C (a write torn by a crash is
// detected and the copy dropped, never trusted) and which a later
// syncfs makes durable. A new file costs one inode, where a temporary
// file and a rename cost one per write (ext4's inode allocation then
// searches past every recently deleted inode). oldLen is the file's
// length before (0: none, or no longer than data; -1: not known): the file
// is cut only when it was longer.
func WriteFileInPlace(fsys FS, name string, data []byte, oldLen int) error {
	f, err := fsys.OpenFile(name, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		return err
	}
	if oldLen < 0 || oldLen > len(data) {
		if err := f.Truncate(int64(len(data))); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}
