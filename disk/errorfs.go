package disk

import (
	"io/fs"
	"sync"
)

// ErrorFS wraps an FS and injects errors, for tests of the cache's failure
// paths (full disk, failing device) without a real broken disk.
type ErrorFS struct {
	FS

	// mu protects the hooks.
	mu sync.Mutex
	// writeErr, if set, is consulted before every WriteAt; a non-nil result
	// fails the write without writing anything.
	writeErr func(name string, off int64, n int) error
	// syncErr, if set, is consulted before every Sync.
	syncErr func(name string) error
	// readErr, if set, is consulted before every ReadAt; a non-nil result
	// fails the read (a failing device).
	readErr func(name string, off int64, n int) error
}

var _ FS = (*ErrorFS)(nil)

// NewErrorFS wraps fsys.
func NewErrorFS(fsys FS) *ErrorFS { return &ErrorFS{FS: fsys} }

// OnWrite sets the write hook (nil removes it).
func (e *ErrorFS) OnWrite(fn func(name string, off int64, n int) error) {
	e.mu.Lock()
	e.writeErr = fn
	e.mu.Unlock()
}

// OnRead sets the read hook (nil removes it).
func (e *ErrorFS) OnRead(fn func(name string, off int64, n int) error) {
	e.mu.Lock()
	e.readErr = fn
	e.mu.Unlock()
}

// OnSync sets the sync hook (nil removes it).
func (e *ErrorFS) OnSync(fn func(name string) error) {
	e.mu.Lock()
	e.syncErr = fn
	e.mu.Unlock()
}

// OpenFile implements FS.
func (e *ErrorFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := e.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &errorFile{File: f, fs: e, name: name}, nil
}

type errorFile struct {
	File
	fs   *ErrorFS
	name string
}

// inject runs the hook pick chooses, if set, for an op of n bytes at off.
func (f *errorFile) inject(op string, pick func(*ErrorFS) func(string, int64, int) error, off int64, n int) error {
	f.fs.mu.Lock()
	hook := pick(f.fs)
	f.fs.mu.Unlock()
	if hook == nil {
		return nil
	}
	if err := hook(f.name, off, n); err != nil {
		return &fs.PathError{Op: op, Path: f.name, Err: err}
	}
	return nil
}

func writeHook(e *ErrorFS) func(string, int64, int) error { return e.writeErr }
func readHook(e *ErrorFS) func(string, int64, int) error  { return e.readErr }

func (f *errorFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.inject("write", writeHook, off, len(p)); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *errorFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.inject("read", readHook, off, len(p)); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *errorFile) Allocate(off, n int64) error {
	if err := f.inject("fallocate", writeHook, off, int(n)); err != nil {
		return err
	}
	return f.File.Allocate(off, n)
}

func (f *errorFile) Sync() error {
	f.fs.mu.Lock()
	hook := f.fs.syncErr
	f.fs.mu.Unlock()
	if hook != nil {
		if err := hook(f.name); err != nil {
			return &fs.PathError{Op: "sync", Path: f.name, Err: err}
		}
	}
	return f.File.Sync()
}
