package xrootd

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/hepcache/hepcache/origin/posix"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/origin"
)

// recorder wraps a Backend: it records the requests it sees and can refuse
// origins or slow down checksums, so that tests can check what the front
// end passed on.
type recorder struct {
	backend.Backend

	// forbid lists origins refused with ErrForbidden.
	forbid map[string]bool
	// checksumGate, if set, blocks Checksum until closed.
	checksumGate chan struct{}
	// openErr, if set, can fail an Open (redirects, waits).
	openErr func(backend.Request) error
	// chunks, if set, re-cuts every Stream chunk into pieces of these sizes
	// (cycling), to exercise chunks that end inside pages.
	chunks []int
	// readGate, if set, blocks every Stream until closed; streaming (if
	// set) receives a value when a Stream starts waiting at the gate.
	readGate  chan struct{}
	streaming chan struct{}

	checksums atomic.Int32 // Checksum calls

	mu   sync.Mutex
	reqs []backend.Request
}

func (r *recorder) record(req backend.Request) error {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	if r.forbid[req.Origin] {
		return fmt.Errorf("forwarding to %s is not on the allow-list: %w", req.Origin, backend.ErrForbidden)
	}
	return nil
}

func (r *recorder) requests() []backend.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]backend.Request(nil), r.reqs...)
}

func (r *recorder) Open(ctx context.Context, req backend.Request) (backend.File, error) {
	if err := r.record(req); err != nil {
		return nil, err
	}
	if r.openErr != nil {
		if err := r.openErr(req); err != nil {
			return nil, err
		}
	}
	f, err := r.Backend.Open(ctx, req)
	if err != nil || (r.chunks == nil && r.readGate == nil) {
		return f, err
	}
	return &rechunked{File: f, sizes: r.chunks, gate: r.readGate, started: r.streaming}, nil
}

// rechunked delivers the chunks of its File's Stream in pieces.
type rechunked struct {
	backend.File
	sizes   []int
	gate    chan struct{}
	started chan struct{}
}

func (f *rechunked) Stream(ctx context.Context, off, n int64, fn func([]byte) error) (int64, error) {
	if f.started != nil {
		f.started <- struct{}{}
	}
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	if len(f.sizes) == 0 {
		return f.File.Stream(ctx, off, n, fn)
	}
	i := 0
	return f.File.Stream(ctx, off, n, func(p []byte) error {
		for len(p) > 0 {
			k := min(f.sizes[i%len(f.sizes)], len(p))
			i++
			if err := fn(p[:k]); err != nil {
				return err
			}
			p = p[k:]
		}
		return nil
	})
}

func (r *recorder) Stat(ctx context.Context, req backend.Request) (origin.FileInfo, error) {
	if err := r.record(req); err != nil {
		return origin.FileInfo{}, err
	}
	return r.Backend.Stat(ctx, req)
}

func (r *recorder) List(ctx context.Context, req backend.Request, withStat bool) ([]origin.FileInfo, error) {
	if err := r.record(req); err != nil {
		return nil, err
	}
	return r.Backend.List(ctx, req, withStat)
}

func (r *recorder) Checksum(ctx context.Context, req backend.Request, algo string) (string, error) {
	r.checksums.Add(1)
	if err := r.record(req); err != nil {
		return "", err
	}
	if r.checksumGate != nil {
		select {
		case <-r.checksumGate:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return r.Backend.Checksum(ctx, req, algo)
}

// testServer is a front end over a Dir on 127.0.0.1.
type testServer struct {
	srv  *Server
	rec  *recorder
	dir  string
	addr string
	url  string // root://127.0.0.1:port
}

// startServer serves dir (a new temporary directory if "") and stops the
// server when the test ends.
func startServer(tb testing.TB, dir string, mutate func(*Config, *recorder)) *testServer {
	tb.Helper()
	if dir == "" {
		dir = tb.TempDir()
	}
	d, err := posix.New(dir)
	if err != nil {
		tb.Fatal(err)
	}
	rec := &recorder{Backend: backend.FromOrigin(d)}
	cfg := DefaultConfig()
	cfg.Backend = rec
	if mutate != nil {
		mutate(cfg, rec)
	}
	srv, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			tb.Errorf("shutdown: %v", err)
		}
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			tb.Errorf("Serve returned %v", err)
		}
		d.Close()
	})
	addr := ln.Addr().String()
	return &testServer{srv: srv, rec: rec, dir: dir, addr: addr, url: "root://" + addr}
}

// writeRandom writes n random bytes to dir/name and returns their sha256.
func writeRandom(tb testing.TB, dir, name string, n int) string {
	tb.Helper()
	data := make([]byte, n)
	rand.Read(data)
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		tb.Fatal(err)
	}
	return sha256hex(data)
}

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func fileSHA(tb testing.TB, p string) string {
	tb.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		tb.Fatal(err)
	}
	return sha256hex(b)
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
