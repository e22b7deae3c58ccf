package backend

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/hepcache/hepcache/internal/readat"
	"github.com/hepcache/hepcache/origin"
)

// streamChunk is the size of the chunks Stream hands to its caller: big
// enough that a read costs few system calls, small enough that many
// concurrent streams stay cheap in memory.
const streamChunk = 256 << 10

var chunks = sync.Pool{New: func() any { b := make([]byte, streamChunk); return &b }}

// FromOrigin serves an origin directly, without a cache: a local directory
// (origin/posix) behind the front ends in their tests and as the demo's
// stand-in origin. Request.Origin is ignored.
func FromOrigin(o origin.Origin) Backend { return originBackend{o} }

type originBackend struct{ o origin.Origin }

func (b originBackend) Open(ctx context.Context, req Request) (File, error) {
	f, err := b.o.Open(ctx, req.Path)
	if err != nil {
		return nil, err
	}
	if f.Info().IsDir() {
		f.Close()
		return nil, fmt.Errorf("open %s: %w", req.Path, origin.ErrIsDir)
	}
	return &originFile{f: f}, nil
}

func (b originBackend) Stat(ctx context.Context, req Request) (origin.FileInfo, error) {
	return b.o.Stat(ctx, req.Path)
}

func (b originBackend) List(ctx context.Context, req Request, withStat bool) ([]origin.FileInfo, error) {
	return b.o.List(ctx, req.Path, withStat)
}

// ListEach implements EachLister.
func (b originBackend) ListEach(ctx context.Context, req Request, withStat bool, fn func(origin.FileInfo) error) error {
	return origin.ListEach(ctx, b.o, req.Path, withStat, fn)
}

func (b originBackend) Checksum(ctx context.Context, req Request, algo string) (string, error) {
	return b.o.Checksum(ctx, req.Path, algo)
}

// originFile is an open file of an origin served as a Backend.
type originFile struct {
	f         origin.File
	closeOnce sync.Once
}

func (f *originFile) Info() origin.FileInfo { return f.f.Info() }

func (f *originFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	return f.f.ReadAt(ctx, p, off)
}

func (f *originFile) Stream(ctx context.Context, off, n int64, fn func([]byte) error) (int64, error) {
	bp := chunks.Get().(*[]byte)
	defer chunks.Put(bp)
	done, err := readat.Stream(ctx, readat.WithContext(ctx, f.f, 0), *bp, off, n, fn)
	var re *readat.ReadError
	if errors.As(err, &re) {
		err = re.Err
	}
	return done, err
}

func (f *originFile) Close() error {
	var err error
	f.closeOnce.Do(func() { err = f.f.Close() })
	return err
}
