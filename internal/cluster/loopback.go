package cluster

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/origin"
)

// Loopback connects in-process nodes for tests: Dial returns an Origin
// that calls the Backend registered for a root:// address, the way the
// real root:// client reaches another node's front end. A node can be
// marked down, after which its calls fail with origin.ErrUnavailable.
type Loopback struct {
	// mu protects nodes and down.
	mu    sync.Mutex
	nodes map[string]backend.Backend
	down  map[string]bool
}

// NewLoopback returns an empty Loopback.
func NewLoopback() *Loopback {
	return &Loopback{nodes: map[string]backend.Backend{}, down: map[string]bool{}}
}

// Register makes b reachable at rootAddr.
func (l *Loopback) Register(rootAddr string, b backend.Backend) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.nodes[rootAddr] = b
}

// SetDown marks rootAddr failed (true) or back (false).
func (l *Loopback) SetDown(rootAddr string, down bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.down[rootAddr] = down
}

// Dialer returns a PeerDialFunc for the node at from (its requests carry
// from as the client address).
func (l *Loopback) Dialer(from string) PeerDialFunc {
	return func(ctx context.Context, rootAddr string) (origin.Origin, error) {
		return &loopOrigin{l: l, addr: rootAddr, from: from}, nil
	}
}

func (l *Loopback) get(addr string) (backend.Backend, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.nodes[addr]
	if b == nil || l.down[addr] {
		return nil, fmt.Errorf("connect %s: connection refused: %w", addr, origin.ErrUnavailable)
	}
	return b, nil
}

// loopOrigin is one node's view of another node's root:// endpoint.
type loopOrigin struct {
	l          *Loopback
	addr, from string
}

var _ origin.Origin = (*loopOrigin)(nil)

// request parses what a root:// client would send: an optional forwarding
// prefix ("/root://site:1094//path") and opaque data.
func (o *loopOrigin) request(p string) backend.Request {
	p, opaque, _ := strings.Cut(p, "?")
	req := backend.Request{Opaque: opaque, Client: o.from, Protocol: "root"}
	if rest := strings.TrimLeft(p, "/"); strings.HasPrefix(rest, "root://") {
		hostAndPath := strings.TrimPrefix(rest, "root://")
		host, fp, _ := strings.Cut(hostAndPath, "/")
		req.Origin = "root://" + host
		p = "/" + strings.TrimLeft(fp, "/")
	}
	req.Path = p
	return req
}

func (o *loopOrigin) Stat(ctx context.Context, p string) (origin.FileInfo, error) {
	b, err := o.l.get(o.addr)
	if err != nil {
		return origin.FileInfo{}, err
	}
	return b.Stat(ctx, o.request(p))
}

func (o *loopOrigin) Open(ctx context.Context, p string) (origin.File, error) {
	b, err := o.l.get(o.addr)
	if err != nil {
		return nil, err
	}
	f, err := b.Open(ctx, o.request(p))
	if err != nil {
		return nil, err
	}
	return &loopFile{o: o, f: f}, nil
}

func (o *loopOrigin) List(ctx context.Context, p string, withStat bool) ([]origin.FileInfo, error) {
	b, err := o.l.get(o.addr)
	if err != nil {
		return nil, err
	}
	return b.List(ctx, o.request(p), withStat)
}

func (o *loopOrigin) Checksum(ctx context.Context, p, algo string) (string, error) {
	b, err := o.l.get(o.addr)
	if err != nil {
		return "", err
	}
	return b.Checksum(ctx, o.request(p), algo)
}

func (o *loopOrigin) String() string { return "root://" + o.addr }
func (o *loopOrigin) Close() error   { return nil }

// loopFile is an open file at another in-process node; it fails once the
// node is marked down.
type loopFile struct {
	o *loopOrigin
	f backend.File
}

func (f *loopFile) Info() origin.FileInfo { return f.f.Info() }

func (f *loopFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if _, err := f.o.l.get(f.o.addr); err != nil {
		return 0, err
	}
	return f.f.ReadAt(ctx, p, off)
}

func (f *loopFile) ReadV(ctx context.Context, segs []origin.Segment) error {
	for _, s := range segs {
		if _, err := f.ReadAt(ctx, s.Buf, s.Offset); err != nil && err != io.EOF {
			return err
		}
	}
	return nil
}

func (f *loopFile) Close() error { return f.f.Close() }
