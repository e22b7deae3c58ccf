// Package origintimeout bounds every call to an origin (stat, open, list,
// checksum, each read) by a timeout that may change while the origins are
// in use: origin.timeout is reloaded on SIGHUP without reopening anything.
// A call already running keeps the bound it started with.
package origintimeout

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hepcache/hepcache/origin"
)

// Timeout is the bound in force and the origins wrapped with it. Safe for
// concurrent use.
type Timeout struct {
	d atomic.Int64 // nanoseconds
	// wrapped maps each resolved Origin to its wrapper (one per Origin).
	wrapped sync.Map
}

// New returns a Timeout of d (d > 0).
func New(d time.Duration) *Timeout {
	t := &Timeout{}
	t.Set(d)
	return t
}

// Set replaces the bound for the calls that start from now on.
func (t *Timeout) Set(d time.Duration) {
	if d <= 0 {
		panic("origintimeout: non-positive timeout")
	}
	t.d.Store(int64(d))
}

// Get returns the bound in force.
func (t *Timeout) Get() time.Duration { return time.Duration(t.d.Load()) }

func (t *Timeout) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, t.Get())
}

// Resolver returns res with every Origin it resolves bounded by t.
func (t *Timeout) Resolver(res origin.Resolver) origin.Resolver {
	return origin.ResolverFunc(func(ctx context.Context, url string) (origin.Origin, error) {
		o, err := res.Resolve(ctx, url)
		if err != nil {
			return nil, err
		}
		if w, ok := t.wrapped.Load(o); ok {
			return w.(origin.Origin), nil
		}
		w, _ := t.wrapped.LoadOrStore(o, &bounded{Origin: o, t: t})
		return w.(origin.Origin), nil
	})
}

// bounded is an Origin whose calls are bounded by t.
type bounded struct {
	origin.Origin
	t *Timeout
}

var _ origin.Origin = (*bounded)(nil)

// Stat implements origin.Origin.
func (o *bounded) Stat(ctx context.Context, p string) (origin.FileInfo, error) {
	ctx, cancel := o.t.ctx(ctx)
	defer cancel()
	return o.Origin.Stat(ctx, p)
}

// Open implements origin.Origin.
func (o *bounded) Open(ctx context.Context, p string) (origin.File, error) {
	ctx, cancel := o.t.ctx(ctx)
	defer cancel()
	f, err := o.Origin.Open(ctx, p)
	if err != nil {
		return nil, err
	}
	return &boundedFile{File: f, t: o.t}, nil
}

// List implements origin.Origin.
func (o *bounded) List(ctx context.Context, p string, withStat bool) ([]origin.FileInfo, error) {
	ctx, cancel := o.t.ctx(ctx)
	defer cancel()
	return o.Origin.List(ctx, p, withStat)
}

// ListEach implements origin.ListEacher, passing the origin's own through.
func (o *bounded) ListEach(ctx context.Context, p string, withStat bool, fn func(origin.FileInfo) error) error {
	ctx, cancel := o.t.ctx(ctx)
	defer cancel()
	return origin.ListEach(ctx, o.Origin, p, withStat, fn)
}

// Checksum implements origin.Origin.
func (o *bounded) Checksum(ctx context.Context, p, algo string) (string, error) {
	ctx, cancel := o.t.ctx(ctx)
	defer cancel()
	return o.Origin.Checksum(ctx, p, algo)
}

// boundedFile is a File whose reads are bounded by t.
type boundedFile struct {
	origin.File
	t *Timeout
}

var _ origin.ProgressReader = (*boundedFile)(nil)

// ReadAt implements origin.File.
func (f *boundedFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	ctx, cancel := f.t.ctx(ctx)
	defer cancel()
	return f.File.ReadAt(ctx, p, off)
}

// ReadAtProgress implements origin.ProgressReader, forwarding to the
// wrapped file.
func (f *boundedFile) ReadAtProgress(ctx context.Context, p []byte, off int64, progress func(int)) (int, error) {
	ctx, cancel := f.t.ctx(ctx)
	defer cancel()
	return origin.ReadAtProgress(ctx, f.File, p, off, progress)
}

// ReadV implements origin.File.
func (f *boundedFile) ReadV(ctx context.Context, segs []origin.Segment) error {
	ctx, cancel := f.t.ctx(ctx)
	defer cancel()
	return f.File.ReadV(ctx, segs)
}
