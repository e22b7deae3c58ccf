package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/origin"
)

// streamChunk is the unit in which a proxied file is read for Stream.
const streamChunk = 256 << 10

// reader is what proxyFile reads from: an origin.File at a peer, or a
// backend.File of the local cache after failing over to this node.
type reader interface {
	ReadAt(ctx context.Context, p []byte, off int64) (int, error)
	Close() error
}

// proxyFile relays a file from the node that owns it. If that node fails
// during a read, the file is opened at the next node in the ranking (or
// here) and the read retried, so the client sees no error. The same size
// is required of the new copy.
type proxyFile struct {
	r    *Router
	req  backend.Request
	info origin.FileInfo

	// mu protects cur, at, failed and closed.
	mu     sync.Mutex
	cur    reader
	at     string
	failed map[string]bool
	closed bool
}

var _ backend.File = (*proxyFile)(nil)

// Info implements backend.File.
func (f *proxyFile) Info() origin.FileInfo { return f.info }

// current returns the reader in use and the node it is at.
func (f *proxyFile) current() (reader, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, "", fmt.Errorf("%s: %w", f.req.Path, io.ErrClosedPipe)
	}
	return f.cur, f.at, nil
}

// failover replaces the reader that failed at node by a copy at the next
// node in the ranking that answers.
func (f *proxyFile) failover(ctx context.Context, failedAt string, cause error) (reader, error) {
	f.mu.Lock()
	if f.at != failedAt { // another reader failed over already
		cur := f.cur
		f.mu.Unlock()
		return cur, nil
	}
	f.failed[failedAt] = true
	failed := make(map[string]bool, len(f.failed))
	for k := range f.failed {
		failed[k] = true
	}
	f.mu.Unlock()

	r := f.r
	r.stats.ProxyFailovers.Add(1)
	r.cfg.Logger.Warn("node failed during a proxied read, reopening at the next node", "node", failedAt, "path", f.req.Path, "err", cause)
	var nodes []Node
	for _, n := range r.cfg.Members.View().Rank(r.Key(f.req)) {
		if !failed[n.Name] {
			nodes = append(nodes, n)
		}
	}
	var (
		nr   reader
		info origin.FileInfo
	)
	at, err := r.proxy(ctx, f.req, nodes, func(ctx context.Context, o origin.Origin, p string) error {
		of, err := o.Open(ctx, p)
		if err == nil {
			nr, info = of, of.Info()
		}
		return err
	})
	if errors.Is(err, errLocal) {
		var lf backend.File
		lf, err = r.cfg.Local.Open(ctx, f.req)
		if err == nil {
			nr, info, at = lf, lf.Info(), Node{Name: r.cfg.Members.View().Self.Name}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: failover after %w: %w", f.req.Path, cause, err)
	}
	if info.Size != f.info.Size {
		nr.Close()
		return nil, fmt.Errorf("%s: copy at %s has %d bytes, not %d: %w", f.req.Path, at.Name, info.Size, f.info.Size, origin.ErrUnavailable)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		nr.Close()
		return nil, fmt.Errorf("%s: %w", f.req.Path, io.ErrClosedPipe)
	}
	old := f.cur
	f.cur, f.at = nr, at.Name
	go old.Close() // the node is gone: do not wait for it
	return nr, nil
}

// ReadAt implements backend.File.
func (f *proxyFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	cur, at, err := f.current()
	if err != nil {
		return 0, err
	}
	n, err := cur.ReadAt(ctx, p, off)
	if err == nil || err == io.EOF || !nodeFailure(ctx, err) {
		return n, err
	}
	if cur, err = f.failover(ctx, at, err); err != nil {
		return 0, err
	}
	return cur.ReadAt(ctx, p, off)
}

// ReadV reads several ranges (kXR_readv) from the owner.
func (f *proxyFile) ReadV(ctx context.Context, segs []origin.Segment) error {
	cur, at, err := f.current()
	if err != nil {
		return err
	}
	readv := func(cur reader) error {
		if of, ok := cur.(origin.File); ok {
			return of.ReadV(ctx, segs)
		}
		for _, s := range segs {
			if _, err := cur.ReadAt(ctx, s.Buf, s.Offset); err != nil && err != io.EOF {
				return err
			}
		}
		return nil
	}
	err = readv(cur)
	if err == nil || !nodeFailure(ctx, err) {
		return err
	}
	if cur, err = f.failover(ctx, at, err); err != nil {
		return err
	}
	return readv(cur)
}

// Stream implements backend.File by reading in chunks.
func (f *proxyFile) Stream(ctx context.Context, off, n int64, fn func(p []byte) error) (int64, error) {
	buf := make([]byte, min(n, streamChunk))
	var done int64
	for done < n {
		want := min(int64(len(buf)), n-done)
		m, err := f.ReadAt(ctx, buf[:want], off+done)
		if m > 0 {
			if ferr := fn(buf[:m]); ferr != nil {
				return done, ferr
			}
			done += int64(m)
		}
		if err == io.EOF {
			return done, nil
		}
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// Close implements backend.File.
func (f *proxyFile) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	return f.cur.Close()
}
