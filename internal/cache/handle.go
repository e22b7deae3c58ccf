package cache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/hepcache/hepcache/disk"
	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/sidecar"
	"github.com/hepcache/hepcache/origin"
)

// handle is one client's open of a cached file. It implements backend.File.
type handle struct {
	e      *entry
	req    backend.Request
	opened time.Time
	closed atomic.Bool

	hit, missed, bypassed atomic.Int64
}

var _ backend.File = (*handle)(nil)

func newHandle(e *entry, req backend.Request, now time.Time) *handle {
	switch e.wasState {
	case "hit":
		e.c.stats.Hits.Add(1)
	case "partial":
		e.c.stats.PartialHits.Add(1)
	default:
		e.c.stats.Misses.Add(1)
	}
	return &handle{e: e, req: req, opened: now}
}

// Info implements backend.File.
func (h *handle) Info() origin.FileInfo { return h.e.info }

// Stream implements backend.File.
func (h *handle) Stream(ctx context.Context, off, n int64, fn func([]byte) error) (int64, error) {
	if h.closed.Load() {
		return 0, fmt.Errorf("read %s: %w", h.e.key, errClosed)
	}
	return h.e.stream(ctx, h, off, n, sink{bytes: fn})
}

var _ backend.FileStreamer = (*handle)(nil)

// StreamFile implements backend.FileStreamer: bytes already on disk (present
// blocks, and pieces of a block being fetched once written) go to file as
// ranges of the data file; bytes only in memory go to bytes.
func (h *handle) StreamFile(ctx context.Context, off, n int64, bytes func([]byte) error, file func(f *os.File, off, n int64) error) (int64, error) {
	if h.closed.Load() {
		return 0, fmt.Errorf("read %s: %w", h.e.key, errClosed)
	}
	return h.e.stream(ctx, h, off, n, sink{bytes: bytes, file: file})
}

// ReadAt implements backend.File.
func (h *handle) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	k, err := h.Stream(ctx, off, int64(len(p)), func(b []byte) error {
		copy(p, b)
		p = p[len(b):]
		return nil
	})
	if err != nil {
		return int(k), err
	}
	if p := len(p); p > 0 {
		return int(k), io.EOF
	}
	return int(k), nil
}

var errClosed = errors.New("cache: file closed")

// Complete reports whether the cache holds every block of the file (a
// prestage of it has nothing to do).
func (h *handle) Complete() bool { return h.e.complete() }

// Close implements backend.File.
func (h *handle) Close() error {
	if !h.closed.CompareAndSwap(false, true) {
		return nil
	}
	e := h.e
	now := e.c.cfg.now()
	rec := sidecar.Access{Open: h.opened, Close: now, BytesHit: h.hit.Load(), BytesMissed: h.missed.Load(), Bypass: h.bypassed.Load()}
	e.c.index.dirAccess(e.key, e.wasState, rec.BytesHit, rec.BytesMissed, rec.Bypass)
	if fn := e.c.cfg.OnAccess; fn != nil {
		done := 0
		e.mu.Lock()
		if e.st != nil {
			done = e.st.present.Count()
		}
		e.mu.Unlock()
		fn(AccessRecord{BlockSize: e.c.cfg.BlockSize, BlocksDone: done,
			Time: now.UTC(), OpenTime: h.opened.UTC(), Path: e.key.Path, Origin: e.key.Origin,
			Size: e.size, BytesRead: rec.BytesHit + rec.BytesMissed + rec.Bypass,
			BytesHit: rec.BytesHit, BytesMissed: rec.BytesMissed, BytesBypassed: rec.Bypass,
			DurationS: now.Sub(h.opened).Seconds(), Client: h.req.Client, User: h.req.User,
			Protocol: h.req.Protocol, Status: "ok",
		})
	}
	e.c.release(e, rec, true)
	return nil
}

var _ backend.OSFiler = (*handle)(nil)

// OSFile implements backend.OSFiler: when every block of [off, off+n) is
// present, the front end may send them straight from the data file with
// sendfile(2). The bytes count as hits, and read-ahead is scheduled as for
// any other read.
func (h *handle) OSFile(off, n int64) (*os.File, bool) {
	e := h.e
	f := disk.OSFile(e.data)
	if f == nil || h.closed.Load() || off < 0 || n <= 0 || off+n > e.size || e.spoilErr() != nil {
		return nil, false
	}
	bs := e.c.cfg.BlockSize
	first, last := int(off/bs), int((off+n-1)/bs)
	e.mu.Lock()
	for b := first; b <= last; b++ {
		if !e.st.has(b) || e.atRest.unchecked(b) {
			// Missing, or not yet checked against its CRC: the stream
			// path fetches or checks it; later reads use sendfile.
			e.mu.Unlock()
			return nil, false
		}
	}
	e.readAheadLocked(h, last)
	e.mu.Unlock()
	h.hit.Add(n)
	e.c.stats.BytesHit.Add(n)
	return f, true
}

// ReadV serves a vector read (kXR_readv, ROOT's TTreeCache, uproot): the
// missing blocks of every segment are requested from the origin first, so a
// cold vector read costs about one origin round trip rather than one per
// block. Each segment is filled completely or an error is returned.
func (h *handle) ReadV(ctx context.Context, segs []origin.Segment) error {
	e := h.e
	if !h.req.NoFetch {
		for _, s := range segs {
			e.fetchRange(s.Offset, min(s.Offset+int64(len(s.Buf)), e.size))
		}
	}
	for _, s := range segs {
		n, err := h.ReadAt(ctx, s.Buf, s.Offset)
		if err == io.EOF && n == len(s.Buf) {
			err = nil
		}
		if err == nil && n < len(s.Buf) {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return fmt.Errorf("readv segment %d@%d of %s: %w", len(s.Buf), s.Offset, e.key, err)
		}
	}
	return nil
}
