package cache

import (
	"context"
	"errors"
	"fmt"
	"github.com/hepcache/hepcache/internal/readat"
	"sync/atomic"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/origin"
)

// passFile serves a pass-through path straight from the origin, without
// caching (namespace rule action "passthrough").
type passFile struct {
	c      *Cache
	of     origin.File
	key    Key
	req    backend.Request
	opened time.Time
	read   atomic.Int64
	closed atomic.Bool
}

var _ backend.File = (*passFile)(nil)

func (c *Cache) openPassThrough(ctx context.Context, o origin.Origin, k Key, req backend.Request) (backend.File, error) {
	octx, cancel := context.WithTimeout(ctx, c.cfg.OriginTimeout)
	defer cancel()
	of, err := o.Open(octx, k.Path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", k, err)
	}
	if of.Info().IsDir() {
		of.Close()
		return nil, fmt.Errorf("open %s: %w", k, origin.ErrIsDir)
	}
	return &passFile{c: c, of: of, key: k, req: req, opened: c.cfg.now()}, nil
}

func (p *passFile) Info() origin.FileInfo {
	fi := p.of.Info()
	fi.Name = p.key.Path
	return fi
}

func (p *passFile) ReadAt(ctx context.Context, b []byte, off int64) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, p.c.cfg.OriginTimeout)
	defer cancel()
	n, err := p.of.ReadAt(ctx, b, off)
	p.read.Add(int64(n))
	p.c.stats.BytesBypassed.Add(int64(n))
	return n, err
}

func (p *passFile) Stream(ctx context.Context, off, n int64, fn func([]byte) error) (int64, error) {
	bp := p.c.bufs.Get().(*[]byte)
	defer p.c.bufs.Put(bp)
	done, err := readat.Stream(ctx, readat.WithContext(ctx, p, 0), *bp, off, n, fn)
	var re *readat.ReadError
	if errors.As(err, &re) {
		err = re.Err
	}
	return done, err
}

func (p *passFile) Close() error {
	if !p.closed.CompareAndSwap(false, true) {
		return nil
	}
	now := p.c.cfg.now()
	if fn := p.c.cfg.OnAccess; fn != nil {
		r := p.read.Load()
		fn(AccessRecord{Time: now.UTC(), OpenTime: p.opened.UTC(), Path: p.key.Path, Origin: p.key.Origin,
			Size: p.of.Info().Size, BytesRead: r, BytesBypassed: r, DurationS: now.Sub(p.opened).Seconds(),
			Client: p.req.Client, User: p.req.User, Protocol: p.req.Protocol, Status: "ok"})
	}
	return p.of.Close()
}

// ReadV forwards a vector read to the origin (kXR_readv for root://).
func (p *passFile) ReadV(ctx context.Context, segs []origin.Segment) error {
	ctx, cancel := context.WithTimeout(ctx, p.c.cfg.OriginTimeout)
	defer cancel()
	if err := p.of.ReadV(ctx, segs); err != nil {
		return err
	}
	var n int64
	for _, s := range segs {
		n += int64(len(s.Buf))
	}
	p.read.Add(n)
	p.c.stats.BytesBypassed.Add(n)
	return nil
}
