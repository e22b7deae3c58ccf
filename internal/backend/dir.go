package backend

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/hepcache/hepcache/internal/checksum"
	"github.com/hepcache/hepcache/internal/readat"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/hepcache/hepcache/origin"
)

// defaultDirChunk is the size of the chunks Dir.Stream hands to its caller:
// big enough that a read costs few system calls, small enough that many
// concurrent streams stay cheap in memory.
const defaultDirChunk = 256 << 10

// Dir is a Backend that serves a local directory directly, without a cache.
// It is the fake behind the front ends' tests and a plain file server for
// local data. Request.Origin is ignored: every origin maps to the same
// directory. Paths cannot leave the directory (os.Root enforces it, also
// through symbolic links).
type Dir struct {
	dir   string
	root  *os.Root
	chunk int
	// bufs recycles Stream chunk buffers (*[]byte of len chunk).
	bufs sync.Pool
}

var _ Backend = (*Dir)(nil)

// NewDir returns a Dir serving the directory dir. Close releases it.
func NewDir(dir string) (*Dir, error) {
	return newDir(dir, defaultDirChunk)
}

// newDir is NewDir with a chunk size, for tests of chunk boundaries.
func newDir(dir string, chunk int) (*Dir, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("backend dir %s: %w", dir, err)
	}
	d := &Dir{dir: dir, root: r, chunk: chunk}
	d.bufs.New = func() any { b := make([]byte, d.chunk); return &b }
	return d, nil
}

// Close releases the directory handle. Open files stay usable.
func (d *Dir) Close() error { return d.root.Close() }

// String names the directory, e.g. "file:///data".
func (d *Dir) String() string { return "file://" + d.dir }

// rel maps a cleaned absolute request path to a path relative to the root.
func rel(p string) string {
	p = strings.TrimLeft(p, "/")
	if p == "" {
		return "."
	}
	return p
}

// mapErr wraps an os error of op on p with the backend and origin
// sentinels, keeping the cause.
func (d *Dir) mapErr(op, p string, err error) error {
	var sentinel error
	switch {
	case errors.Is(err, fs.ErrNotExist):
		sentinel = origin.ErrNotFound
	case errors.Is(err, fs.ErrPermission):
		sentinel = ErrForbidden
	case errors.Is(err, syscall.EISDIR):
		sentinel = origin.ErrIsDir
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.ENAMETOOLONG), errors.Is(err, syscall.ELOOP):
		sentinel = origin.ErrNotFound
	case strings.Contains(err.Error(), "path escapes"):
		sentinel = ErrInvalidPath
	}
	// The message names the request path, not the local one: clients see it.
	if sentinel == nil {
		return fmt.Errorf("%s %s: %w", op, p, err)
	}
	return fmt.Errorf("%s %s: %w: %w", op, p, sentinel, err)
}

func infoOf(name string, fi fs.FileInfo) origin.FileInfo {
	mode := fi.Mode() & (fs.ModePerm | fs.ModeDir)
	if !fi.Mode().IsRegular() && !fi.IsDir() {
		mode |= fi.Mode() & fs.ModeType
	}
	return origin.FileInfo{Name: name, Size: fi.Size(), ModTime: fi.ModTime(), Mode: mode}
}

// Stat implements Backend.
func (d *Dir) Stat(ctx context.Context, req Request) (origin.FileInfo, error) {
	fi, err := d.root.Stat(rel(req.Path))
	if err != nil {
		return origin.FileInfo{}, d.mapErr("stat", req.Path, err)
	}
	return infoOf(req.Path, fi), nil
}

// List implements Backend. Entries are sorted by name; symbolic links are
// followed for their stat information.
func (d *Dir) List(ctx context.Context, req Request, withStat bool) ([]origin.FileInfo, error) {
	f, err := d.root.Open(rel(req.Path))
	if err != nil {
		return nil, d.mapErr("list", req.Path, err)
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return nil, d.mapErr("list", req.Path, err)
	}
	out := make([]origin.FileInfo, 0, len(ents))
	for _, e := range ents {
		fi := origin.FileInfo{Name: e.Name(), Mode: e.Type() & fs.ModeDir}
		if withStat {
			st, err := d.root.Stat(rel(req.Path + "/" + e.Name()))
			if err != nil {
				continue // vanished, or a dangling link: XRootD skips those too
			}
			fi = infoOf(e.Name(), st)
		}
		out = append(out, fi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Checksum implements Backend by reading the whole file. It supports
// adler32, crc32c, md5 and sha256.
func (d *Dir) Checksum(ctx context.Context, req Request, algo string) (string, error) {
	h, ok := checksum.New(algo)
	if !ok {
		return "", fmt.Errorf("checksum %s of %s: %w", algo, req.Path, origin.ErrUnsupported)
	}
	f, err := d.Open(ctx, req)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.Stream(ctx, 0, f.Info().Size, func(p []byte) error {
		h.Write(p)
		return nil
	}); err != nil {
		return "", fmt.Errorf("checksum %s of %s: %w", algo, req.Path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Open implements Backend.
func (d *Dir) Open(ctx context.Context, req Request) (File, error) {
	f, err := d.root.Open(rel(req.Path))
	if err != nil {
		return nil, d.mapErr("open", req.Path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, d.mapErr("open", req.Path, err)
	}
	if fi.IsDir() {
		f.Close()
		return nil, d.mapErr("open", req.Path, syscall.EISDIR)
	}
	return &dirFile{d: d, f: f, path: req.Path, info: infoOf(req.Path, fi)}, nil
}

// dirFile is an open file of a Dir.
type dirFile struct {
	d    *Dir
	f    *os.File
	path string
	info origin.FileInfo

	// closeOnce makes Close idempotent.
	closeOnce sync.Once
}

var _ File = (*dirFile)(nil)

// Info implements File.
func (f *dirFile) Info() origin.FileInfo { return f.info }

// ReadAt implements File.
func (f *dirFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	n, err := f.f.ReadAt(p, off)
	if err != nil && err != io.EOF {
		return n, f.d.mapErr("read", f.path, err)
	}
	return n, err
}

// Stream implements File: it reads chunks of the Dir's chunk size into a
// pooled buffer and hands each to fn.
func (f *dirFile) Stream(ctx context.Context, off int64, n int64, fn func(p []byte) error) (int64, error) {
	bp := f.d.bufs.Get().(*[]byte)
	defer f.d.bufs.Put(bp)
	done, err := readat.Stream(ctx, f.f, *bp, off, n, fn)
	var re *readat.ReadError
	if errors.As(err, &re) {
		err = f.d.mapErr("read", f.path, re.Err)
	}
	return done, err
}

// Close implements File.
func (f *dirFile) Close() error {
	var err error
	f.closeOnce.Do(func() { err = f.f.Close() })
	return err
}
