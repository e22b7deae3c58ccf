package cache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/blockstore"
	"github.com/hepcache/hepcache/internal/sidecar"
	"github.com/hepcache/hepcache/origin"
)

// handle is one client's open of a cached file. It implements backend.File.
type handle struct {
	e      *entry
	req    backend.Request
	opened time.Time
	closed atomic.Bool
	// reader names this client to the RAM cache, which counts accesses by
	// client (blockstore.Reader).
	reader blockstore.Reader

	hit, missed, bypassed atomic.Int64
	// held: every block was present when the handle was opened.
	held bool
	// cov is what the handle delivered (deliver.go).
	cov coverage
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
	return &handle{e: e, req: req, opened: now, reader: blockstore.Reader(e.c.readers.Add(1)), held: e.complete()}
}

// Info implements backend.File.
// Cached is set when the file was held whole at open: a hit, not a
// download that finished while the response was being prepared.
func (h *handle) Info() origin.FileInfo {
	fi := h.e.info
	if h.held {
		fi.Cached = h.e.created
	}
	return fi
}

// Stream implements backend.File.
func (h *handle) Stream(ctx context.Context, off, n int64, fn func([]byte) error) (int64, error) {
	return h.stream(ctx, off, n, fn, true)
}

// stream serves a read; with confirm, bytes it gets from fetches are
// confirmed (the file at the origin unchanged) before its last chunk is
// handed over (deliver.go). A vector read confirms once at its end instead.
func (h *handle) stream(ctx context.Context, off, n int64, fn func([]byte) error, confirm bool) (int64, error) {
	e := h.e
	if h.closed.Load() {
		return 0, fmt.Errorf("read %s: %w", e.key, errClosed)
	}
	// Once the version is known to have changed, no read of the handle
	// succeeds again.
	if err := e.spoilErr(); err != nil {
		return 0, err
	}
	out := fn
	if end := min(off+n, e.size); confirm && e.needsConfirm(off, end) {
		out = e.confirmedAtEnd(ctx, off, end, true /* fetched */, fn)
	}
	// Every byte comes from the block store's RAM, checked when it left
	// the disk: no sendfile from the data file (backend.FileStreamer),
	// which would bypass the check and bring back the page cache.
	k, err := e.stream(ctx, h, off, n, out)
	h.cov.add(off, k)
	return k, err
}

// ReadAt implements backend.File.
func (h *handle) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	return h.readAt(ctx, p, off, true)
}

// readAt is ReadAt; confirm as for stream.
func (h *handle) readAt(ctx context.Context, p []byte, off int64, confirm bool) (int, error) {
	k, err := h.stream(ctx, off, int64(len(p)), func(b []byte) error {
		copy(p, b)
		p = p[len(b):]
		return nil
	}, confirm)
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
	e.c.catalog.DirAccess(e.key, e.wasState, rec.BytesHit, rec.BytesMissed, rec.Bypass)
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
	e.ident.delivered.closed(e.c, h, now)
	e.c.release(e, rec, true)
	return nil
}

// ReadV serves a vector read (kXR_readv, ROOT's TTreeCache, uproot): the
// missing blocks of every segment are requested from the origin first, so a
// cold vector read costs about one origin round trip rather than one per
// block. Each segment is filled completely or an error is returned.
func (h *handle) ReadV(ctx context.Context, segs []origin.Segment) error {
	e := h.e
	if !h.req.NoFetch {
		for _, s := range segs {
			e.fetchRange(s.Offset, min(s.Offset+int64(len(s.Buf)), e.size), h.reader)
		}
	}
	confirm := false
	for _, s := range segs {
		confirm = confirm || e.needsConfirm(s.Offset, min(s.Offset+int64(len(s.Buf)), e.size))
	}
	for _, s := range segs {
		n, err := h.readAt(ctx, s.Buf, s.Offset, false)
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
	if confirm {
		// The segments are handed over only when this returns.
		ranges := make([][2]int64, len(segs))
		for i, s := range segs {
			ranges[i] = [2]int64{s.Offset, min(s.Offset+int64(len(s.Buf)), e.size)}
		}
		if err := e.confirmDelivered(ctx, ranges...); err != nil {
			return fmt.Errorf("readv of %s: %w", e.key, err)
		}
	}
	return nil
}
