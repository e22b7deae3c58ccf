// Package disk is the cache's view of the local file system.
//
// The cache stores data files and metadata sidecars through FS so that tests
// can inject faults (ENOSPC, EIO, torn writes) without a real full disk; the
// production implementation is a thin layer over package os.
package disk

import (
	"io"
	"io/fs"
	"os"
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
	return f, nil
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
