// Package posix is an origin.Origin over a local directory, such as a shared
// file system mounted on the cache node or a plain directory for demos.
//
// Every access goes through an os.Root opened on the directory, so no client
// path (.., //, symlinks) can reach a file outside it; paths are also checked
// lexically first so that malformed ones fail with origin.ErrInvalid.
package posix

import (
	"context"
	"errors"
	"fmt"
	"github.com/hepcache/hepcache/internal/checksum"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/hepcache/hepcache/origin"
)

const (
	// maxPathLen bounds a client path, like Linux PATH_MAX.
	maxPathLen = 4096
	// maxNameLen bounds one path element, like Linux NAME_MAX.
	maxNameLen = 255
	// checksumBufSize is the read size when streaming a file through a hash.
	checksumBufSize = 256 << 10
)

// Origin serves the files below one directory. It is safe for concurrent use.
//
// Symbolic links are followed only when they stay inside the root and are
// relative (os.Root refuses absolute link targets even if they point inside).
// Only regular files can be opened; FIFOs, devices and sockets are refused
// with origin.ErrInvalid, so a client cannot make the origin block on a FIFO.
type Origin struct {
	dir  string // absolute, cleaned root directory
	root *os.Root
}

var _ origin.Origin = (*Origin)(nil)

// New returns an Origin serving the directory root, which must exist.
func New(root string) (*Origin, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("posix origin %q: %w", root, err)
	}
	r, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("posix origin %q: %w", abs, err)
	}
	fi, err := r.Stat(".")
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("posix origin %q: %w", abs, err)
	}
	if !fi.IsDir() {
		r.Close()
		return nil, fmt.Errorf("posix origin %q: not a directory", abs)
	}
	return &Origin{dir: abs, root: r}, nil
}

// String implements origin.Origin: "file://" followed by the root directory.
func (o *Origin) String() string { return "file://" + o.dir }

// Close implements origin.Origin. Later calls fail with origin.ErrUnavailable.
func (o *Origin) Close() error { return o.root.Close() }

// clean validates a client path and returns it as an absolute logical path
// ("/a/b") and as a name relative to the root ("a/b", or "." for the root).
func clean(p string) (logical, rel string, err error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", "", fmt.Errorf("path %q contains a NUL byte: %w", p, origin.ErrInvalid)
	}
	if len(p) > maxPathLen {
		return "", "", fmt.Errorf("path of %d bytes exceeds %d: %w", len(p), maxPathLen, origin.ErrInvalid)
	}
	// Reject ".." outright rather than resolving it, as xrootd does: a
	// client has no business walking up, and "/a/../b" is almost always an
	// attack or a bug.
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return "", "", fmt.Errorf("path %q contains \"..\": %w", p, origin.ErrInvalid)
		}
		if len(el) > maxNameLen {
			return "", "", fmt.Errorf("path element of %d bytes exceeds %d: %w", len(el), maxNameLen, origin.ErrInvalid)
		}
	}
	logical = path.Clean("/" + p) // collapses "//" and "/./"
	if logical == "/" {
		return logical, ".", nil
	}
	return logical, logical[1:], nil
}

// wrap maps a file system error to the origin sentinels and adds the
// operation and the logical path.
func (o *Origin) wrap(op, logical string, err error) error {
	var sentinel error
	var errno syscall.Errno
	var pe *fs.PathError
	cause := err
	if errors.As(err, &pe) {
		cause = pe.Err // the path in pe is relative to the root: add ours
	}
	switch {
	case errors.As(err, &errno):
		switch errno {
		case syscall.ENOENT, syscall.ENOTDIR:
			sentinel = origin.ErrNotFound
		case syscall.EACCES, syscall.EPERM:
			sentinel = origin.ErrNotAuthorized
		case syscall.EISDIR:
			sentinel = origin.ErrIsDir
		case syscall.ENAMETOOLONG, syscall.ELOOP, syscall.EINVAL:
			sentinel = origin.ErrInvalid
		default: // EIO, ESTALE, ENOMEM...: may succeed later
			sentinel = origin.ErrUnavailable
		}
	case errors.Is(err, os.ErrClosed):
		sentinel = origin.ErrUnavailable
	case errors.Is(err, fs.ErrNotExist):
		sentinel = origin.ErrNotFound
	case errors.Is(err, fs.ErrPermission):
		sentinel = origin.ErrNotAuthorized
	case pe != nil && strings.Contains(pe.Err.Error(), "escapes"):
		// os.Root's error for a symlink leading outside the root is not
		// exported; TestPathSafety pins this mapping.
		sentinel = origin.ErrInvalid
	}
	if sentinel == nil {
		return fmt.Errorf("%s %s%s: %w", op, o, logical, cause)
	}
	return fmt.Errorf("%s %s%s: %w: %w", op, o, logical, sentinel, cause)
}

// info converts an fs.FileInfo.
func info(name string, fi fs.FileInfo) origin.FileInfo {
	return origin.FileInfo{
		Name:    name,
		Size:    fi.Size(),
		ModTime: fi.ModTime(),
		Mode:    fi.Mode() & (fs.ModePerm | fs.ModeDir),
	}
}

// Stat implements origin.Origin. Name is the cleaned logical path.
func (o *Origin) Stat(ctx context.Context, p string) (origin.FileInfo, error) {
	logical, rel, err := clean(p)
	if err != nil {
		return origin.FileInfo{}, fmt.Errorf("stat %s: %w", o, err)
	}
	if err := ctx.Err(); err != nil {
		return origin.FileInfo{}, fmt.Errorf("stat %s%s: %w", o, logical, err)
	}
	fi, err := o.root.Stat(rel)
	if err != nil {
		return origin.FileInfo{}, o.wrap("stat", logical, err)
	}
	return info(logical, fi), nil
}

// openRegular opens a regular file for reading, refusing directories and
// special files.
func (o *Origin) openRegular(op, logical, rel string) (*os.File, fs.FileInfo, error) {
	// O_NONBLOCK so that opening a FIFO does not wait for a writer; it has
	// no effect on regular files.
	f, err := o.root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, o.wrap(op, logical, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, o.wrap(op, logical, err)
	}
	switch {
	case fi.IsDir():
		f.Close()
		return nil, nil, fmt.Errorf("%s %s%s: %w", op, o, logical, origin.ErrIsDir)
	case !fi.Mode().IsRegular():
		f.Close()
		return nil, nil, fmt.Errorf("%s %s%s: not a regular file (%v): %w", op, o, logical, fi.Mode().Type(), origin.ErrInvalid)
	}
	return f, fi, nil
}

// Open implements origin.Origin.
func (o *Origin) Open(ctx context.Context, p string) (origin.File, error) {
	logical, rel, err := clean(p)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", o, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("open %s%s: %w", o, logical, err)
	}
	f, fi, err := o.openRegular("open", logical, rel)
	if err != nil {
		return nil, err
	}
	return &file{o: o, logical: logical, f: f, info: info(logical, fi)}, nil
}

// List implements origin.Origin. Entries are sorted by name. Symbolic links
// are reported as what they point to; links that dangle or lead outside the
// root are left out, since they could not be opened anyway.
func (o *Origin) List(ctx context.Context, p string, withStat bool) ([]origin.FileInfo, error) {
	logical, rel, err := clean(p)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", o, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list %s%s: %w", o, logical, err)
	}
	d, err := o.root.Open(rel)
	if err != nil {
		return nil, o.wrap("list", logical, err)
	}
	defer d.Close()
	fi, err := d.Stat()
	if err != nil {
		return nil, o.wrap("list", logical, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("list %s%s: not a directory: %w", o, logical, origin.ErrInvalid)
	}
	ents, err := d.ReadDir(-1)
	if err != nil {
		return nil, o.wrap("list", logical, err)
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	out := make([]origin.FileInfo, 0, len(ents))
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("list %s%s: %w", o, logical, err)
		}
		name := e.Name()
		if e.Type()&fs.ModeSymlink == 0 && !withStat {
			out = append(out, origin.FileInfo{Name: name, Mode: e.Type() & fs.ModeDir})
			continue
		}
		// Stat through the root: follows a link only if it stays inside.
		fi, err := o.root.Stat(path.Join(rel, name))
		if err != nil {
			if e.Type()&fs.ModeSymlink != 0 || errors.Is(err, fs.ErrNotExist) {
				continue // bad link, or removed since ReadDir
			}
			return nil, o.wrap("list", path.Join(logical, name), err)
		}
		ent := info(name, fi)
		if !withStat {
			ent = origin.FileInfo{Name: name, Mode: fi.Mode() & fs.ModeDir}
		}
		out = append(out, ent)
	}
	return out, nil
}

// Checksum implements origin.Origin. It computes "adler32" and "crc32c"
// (Castagnoli) by streaming the file, as 8 lower-case hex digits; other
// algorithms fail with origin.ErrUnsupported.
func (o *Origin) Checksum(ctx context.Context, p, algo string) (string, error) {
	logical, rel, err := clean(p)
	if err != nil {
		return "", fmt.Errorf("checksum %s: %w", o, err)
	}
	h, ok := checksum.New(algo)
	if a := strings.ToLower(algo); !ok || a != "adler32" && a != "crc32c" {
		return "", fmt.Errorf("checksum %q %s%s: %w", algo, o, logical, origin.ErrUnsupported)
	}
	f, _, err := o.openRegular("checksum", logical, rel)
	if err != nil {
		return "", err
	}
	defer f.Close()
	buf := make([]byte, checksumBufSize)
	for {
		if err := ctx.Err(); err != nil {
			return "", fmt.Errorf("checksum %s %s%s: %w", algo, o, logical, err)
		}
		n, err := f.Read(buf)
		h.Write(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", o.wrap("checksum "+algo, logical, err)
		}
	}
	return fmt.Sprintf("%x", h.Sum(nil)), nil
}

// file is an open regular file.
type file struct {
	o       *Origin
	logical string
	f       *os.File
	info    origin.FileInfo

	closeOnce sync.Once
	closeErr  error
}

// Info implements origin.File.
func (f *file) Info() origin.FileInfo { return f.info }

// OSFile returns the local file behind f, for zero-copy sends (sendfile)
// by a front end serving this origin directly (backend.FromOrigin).
func (f *file) OSFile(off, n int64) (*os.File, bool) { return f.f, true }

// ReadAt implements origin.File. os.File.ReadAt (pread) already loops until
// p is full or the file ends, so a short count comes only with io.EOF.
func (f *file) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("read %s%s off=%d: negative offset: %w", f.o, f.logical, off, origin.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("read %s%s off=%d: %w", f.o, f.logical, off, err)
	}
	n, err := f.f.ReadAt(p, off)
	if err == io.EOF {
		return n, io.EOF // unwrapped: callers compare with ==
	}
	if err != nil {
		return n, f.o.wrap(fmt.Sprintf("read off=%d len=%d", off, len(p)), f.logical, err)
	}
	return n, nil
}

// ReadV implements origin.File with one ReadAt per segment.
func (f *file) ReadV(ctx context.Context, segs []origin.Segment) error {
	return origin.ReadVByReadAt(ctx, f, segs)
}

// Close implements origin.File. Later calls return the first call's result.
func (f *file) Close() error {
	f.closeOnce.Do(func() { f.closeErr = f.f.Close() })
	return f.closeErr
}
