// Package readat streams a range of a file by repeated ReadAt calls, the
// loop the cache (disk and origin reads), the local directory backend, the
// verifier and the demo all need: one implementation of its end-of-file,
// short-read and error rules.
package readat

import (
	"context"
	"fmt"
	"io"
	"time"
)

// ReadError wraps an error of the reader (as opposed to one of fn) with
// the offset that failed.
type ReadError struct {
	Off int64
	Err error
}

func (e *ReadError) Error() string { return fmt.Sprintf("read at %d: %v", e.Off, e.Err) }
func (e *ReadError) Unwrap() error { return e.Err }

// Stream delivers [off, off+n) of r to fn in chunks of at most len(buf)
// bytes, each as soon as it is read, and returns how many bytes it
// delivered: fewer than n only at end of file (with a nil error) or on an
// error, of r (a *ReadError) or of fn (as fn returned it). ctx is checked
// between chunks.
func Stream(ctx context.Context, r io.ReaderAt, buf []byte, off, n int64, fn func([]byte) error) (int64, error) {
	var done int64
	for done < n {
		if err := ctx.Err(); err != nil {
			return done, err
		}
		l := min(int64(len(buf)), n-done)
		k, err := r.ReadAt(buf[:l], off+done)
		if k > 0 {
			if ferr := fn(buf[:k]); ferr != nil {
				return done, ferr
			}
			done += int64(k)
		}
		if err == io.EOF {
			return done, nil
		}
		if err != nil {
			return done, &ReadError{Off: off + done, Err: err}
		}
		if k == 0 {
			return done, &ReadError{Off: off + done, Err: io.ErrNoProgress}
		}
	}
	return done, nil
}

// CtxReader is a file whose ReadAt takes a context (origin and backend
// files).
type CtxReader interface {
	ReadAt(ctx context.Context, p []byte, off int64) (int, error)
}

// WithContext adapts f to io.ReaderAt: each read runs under ctx, bounded
// by timeout (0: no bound of its own).
func WithContext(ctx context.Context, f CtxReader, timeout time.Duration) io.ReaderAt {
	return ctxReader{ctx, f, timeout}
}

type ctxReader struct {
	ctx     context.Context
	f       CtxReader
	timeout time.Duration
}

func (r ctxReader) ReadAt(p []byte, off int64) (int, error) {
	ctx := r.ctx
	if r.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.timeout)
		defer cancel()
	}
	return r.f.ReadAt(ctx, p, off)
}
