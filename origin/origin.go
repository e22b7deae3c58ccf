// Package origin defines how the cache reads files from upstream storage.
//
// An Origin is one upstream endpoint (an XRootD server, a web server, a POSIX
// directory). The cache knows nothing about protocols; each origin kind lives in
// its own package (origin/posix, origin/xrootd, ...) and implements Origin.
package origin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"
)

// Sentinel errors. Implementations wrap them with %w so that callers (the
// cache, then the front ends) can map them to protocol error codes with
// errors.Is, whatever the origin kind.
var (
	// ErrNotFound: the path does not exist at the origin.
	ErrNotFound = errors.New("origin: not found")
	// ErrChanged: a read of an open File found the file replaced at the
	// origin since the open (another ETag or size): the version opened is
	// gone. Origins wrap it together with ErrNotFound, so callers that do
	// not know it still treat the read as "no such file". A cache holding
	// blocks of the old version must drop them (never mix versions).
	ErrChanged = errors.New("origin: file changed since it was opened")
	// ErrNotAuthorized: the origin refused the cache's credential.
	ErrNotAuthorized = errors.New("origin: not authorized")
	// ErrUnauthenticated: the origin refused the request for want of a
	// credential it accepts (HTTP 401: none, or a token that does not
	// fit), where ErrNotAuthorized alone is a credential it knows and
	// refuses (403). It wraps ErrNotAuthorized.
	ErrUnauthenticated = fmt.Errorf("%w: no credential it accepts", ErrNotAuthorized)
	// ErrIsDir: a file operation named a directory.
	ErrIsDir = errors.New("origin: is a directory")
	// ErrUnavailable: the origin could not be reached or timed out. The request
	// may succeed later or at another origin.
	ErrUnavailable = errors.New("origin: unavailable")
	// ErrUnsupported: the origin does not implement the operation.
	ErrUnsupported = errors.New("origin: operation not supported")
	// ErrInvalid: the origin rejected the request as malformed.
	ErrInvalid = errors.New("origin: invalid request")
	// ErrNotAllowed: choosing an origin was refused by policy (forwarding
	// off or not on the allow-list, no default origin). The backend calls
	// the same error ErrForbidden.
	ErrNotAllowed = errors.New("forbidden")
	// ErrBadName: an origin URL or path that is malformed. The backend
	// calls the same error ErrInvalidPath.
	ErrBadName = errors.New("invalid path")
)

// FileInfo describes a file or directory at an origin.
type FileInfo struct {
	// Name is the base name for directory listings, the full path for Stat.
	Name string
	// Size in bytes.
	Size int64
	// ModTime is the modification time as the origin reports it (second
	// resolution for XRootD).
	ModTime time.Time
	// Mode carries the permission bits and fs.ModeDir for directories.
	Mode fs.FileMode
	// ETag is an opaque version string when the origin has one (HTTP); empty
	// otherwise.
	ETag string
	// Offline is set when the origin reports the file is not on disk (tape).
	Offline bool
	// Cached is when the cache that answers holds the file whole: set by
	// the cache (the backend) on the answers it gives from a complete copy,
	// the time the copy entered the cache; zero otherwise. Origins leave
	// it zero. The HTTP front end turns it into an Age header.
	Cached time.Time
	// VersionPinned, on an open File's Info, says every read is pinned to
	// the version opened (an HTTP or S3 ETag checked by the server): a read
	// of a replaced file fails with ErrChanged instead of returning new
	// bytes. Without it (XRootD, POSIX) a file rewritten in place is read
	// as it is now, and the cache confirms the file's identity itself.
	VersionPinned bool
}

// IsDir reports whether the entry is a directory.
func (fi FileInfo) IsDir() bool { return fi.Mode.IsDir() }

// Segment is one range of a vector read. The caller owns Buf; the origin fills
// Buf[:len(Buf)] with the bytes at Offset.
type Segment struct {
	Offset int64
	Buf    []byte
}

// Origin is one upstream endpoint. Implementations are safe for concurrent use
// by many goroutines; every method blocks until it has an answer or ctx ends.
type Origin interface {
	// Stat returns the metadata of path.
	Stat(ctx context.Context, path string) (FileInfo, error)
	// Open opens path for reading. The returned File's Info is the metadata
	// seen at open time, which the cache records as the file's identity.
	Open(ctx context.Context, path string) (File, error)
	// List returns the entries of directory path, with Size/ModTime/Mode
	// filled when withStat is true.
	List(ctx context.Context, path string, withStat bool) ([]FileInfo, error)
	// Checksum returns the origin's checksum of path with algorithm algo
	// ("adler32", "crc32c", "md5", ...) as lower-case hex, or ErrUnsupported.
	Checksum(ctx context.Context, path, algo string) (string, error)
	// String names the origin for logs and cache keys, e.g.
	// "root://host:1094" or "file:///data".
	String() string
	// Close releases connections. Open Files must be closed first.
	Close() error
}

// ListEacher is implemented by origins whose listings arrive in parts (an
// S3 listing, page by page): the entries are handed over as they come, so
// that a directory of any size is never held whole.
type ListEacher interface {
	// ListEach calls fn with each entry of directory path, as List would
	// return them, as the listing arrives; it blocks until the listing
	// ends, fails, ctx ends or fn returns an error, which it returns. An
	// error after some entries were handed over means the listing is
	// incomplete. The FileInfo is fn's to keep.
	ListEach(ctx context.Context, path string, withStat bool, fn func(FileInfo) error) error
}

// ListEach lists path with o's ListEach, or with List when o has none.
func ListEach(ctx context.Context, o Origin, path string, withStat bool, fn func(FileInfo) error) error {
	if le, ok := o.(ListEacher); ok {
		return le.ListEach(ctx, path, withStat, fn)
	}
	list, err := o.List(ctx, path, withStat)
	return Each(list, err, fn)
}

// Each hands the entries of a whole listing (list and err, as List
// returned them) to fn in turn, as ListEach does: it returns the
// listing's error, or fn's first.
func Each(list []FileInfo, err error, fn func(FileInfo) error) error {
	if err != nil {
		return err
	}
	for _, fi := range list {
		if err := fn(fi); err != nil {
			return err
		}
	}
	return nil
}

// File is an open origin file.
type File interface {
	// Info is the metadata recorded at open.
	Info() FileInfo
	// ReadAt reads len(p) bytes at off into p. It returns the whole range or an
	// error, never a short read, except at the end of the file where it returns
	// the bytes up to the end and io.EOF. The caller owns p; the origin does not
	// keep it after return. Safe for concurrent use.
	ReadAt(ctx context.Context, p []byte, off int64) (int, error)
	// ReadV reads several ranges in one round trip where the protocol allows
	// it (kXR_readv); other origins loop over ReadAt. Every segment is filled
	// completely or an error is returned.
	ReadV(ctx context.Context, segs []Segment) error
	// Close releases the handle.
	Close() error
}

// ProgressReader is implemented by origin files that can tell how far a
// read has got while its bytes arrive (an XRootD response read from the
// socket straight into p, an HTTP body): the cache hands each part of a
// block to its readers as it lands, with one request per block instead of
// one per part. progress is called with the count of bytes of p filled so
// far (from the start of p, growing; a retried attempt may start again
// from a smaller count), from the origin's goroutine, and must not block.
// It is never called once ReadAtProgress has returned. Otherwise it is
// ReadAt.
type ProgressReader interface {
	ReadAtProgress(ctx context.Context, p []byte, off int64, progress func(filled int)) (int, error)
}

// ReadAtProgress reads p at off from f with f's ReadAtProgress when it has
// one, else with ReadAt, reporting the bytes read when it returns.
// Decorators of File forward it so the optional interface is not lost.
func ReadAtProgress(ctx context.Context, f File, p []byte, off int64, progress func(filled int)) (int, error) {
	if pr, ok := f.(ProgressReader); ok {
		return pr.ReadAtProgress(ctx, p, off, progress)
	}
	n, err := f.ReadAt(ctx, p, off)
	if n > 0 {
		progress(n)
	}
	return n, err
}

// progressStep is how often ReadFullProgress reports: a fraction of the
// cache's pieces.
const progressStep = 64 << 10

// ReadFullProgress is io.ReadFull that calls progress (if not nil) with
// the bytes of p filled so far, at least every progressStep bytes: for
// origins whose answer is a stream (an HTTP body) to implement
// ProgressReader.
func ReadFullProgress(r io.Reader, p []byte, progress func(int)) (int, error) {
	if progress == nil {
		return io.ReadFull(r, p)
	}
	n := 0
	for n < len(p) {
		k, err := io.ReadFull(r, p[n:min(len(p), n+progressStep)])
		n += k
		if k > 0 {
			progress(n)
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Resolver maps an origin URL ("root://host:port", "file:///dir",
// "https://host") to an Origin, creating and reusing connections as needed.
// It is how forwarding mode reaches the site named in a request.
type Resolver interface {
	// Resolve returns the Origin for url. Safe for concurrent use.
	Resolve(ctx context.Context, url string) (Origin, error)
}

// ResolverFunc adapts a function to Resolver.
type ResolverFunc func(ctx context.Context, url string) (Origin, error)

// Resolve calls f(ctx, url).
func (f ResolverFunc) Resolve(ctx context.Context, url string) (Origin, error) { return f(ctx, url) }
