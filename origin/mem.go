package origin

import (
	"context"
	"fmt"
	"github.com/hepcache/hepcache/internal/checksum"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Mem is an in-memory Origin for unit tests of the cache: it counts the bytes
// and requests it serves and can be told to fail or to block reads, so that
// failure paths and coalescing can be tested without a network.
type Mem struct {
	name string

	// BytesRead counts bytes returned by ReadAt and ReadV.
	BytesRead atomic.Int64
	// Reads counts ReadAt calls and ReadV segments.
	Reads atomic.Int64
	// Opens counts successful Open calls.
	Opens atomic.Int64
	// Lookups counts Stat and Open calls, failed ones included.
	Lookups atomic.Int64
	// Checksums counts Checksum calls.
	Checksums atomic.Int64

	// mu protects files, failErr, gate, onRead, onDeliver, onDone and sums.
	mu        sync.Mutex
	files     map[string]memFile
	failErr   error
	gate      chan struct{}
	onRead    ReadHook
	onDeliver ReadHook
	onDone    ReadHook
	sums      map[string]string // "algo path" -> forced checksum
}

// ReadHook runs before every read of n bytes at off of path. It may block
// (a distant or stalled origin: wait for a channel or ctx), sleep, count,
// or fail the read by returning an error.
type ReadHook func(ctx context.Context, path string, off int64, n int) error

// OnRead sets the read hook (nil removes it), run once per request. Tests
// use it instead of wrapping the origin to slow, hold back or fail some
// reads.
func (m *Mem) OnRead(fn ReadHook) {
	m.mu.Lock()
	m.onRead = fn
	m.mu.Unlock()
}

// OnDeliver sets the delivery hook (nil removes it), run before each part
// of an answer is delivered (a step of ReadAtProgress, the whole of a
// ReadAt): a test holds back the rest of a block with it, as a distant
// origin that has sent only the start.
func (m *Mem) OnDeliver(fn ReadHook) {
	m.mu.Lock()
	m.onDeliver = fn
	m.mu.Unlock()
}

// OnDone sets the completion hook (nil removes it), run after the whole
// answer of a request was delivered: an error it returns fails the read
// although every byte arrived (a connection that breaks after the last
// byte, before the request's status).
func (m *Mem) OnDone(fn ReadHook) {
	m.mu.Lock()
	m.onDone = fn
	m.mu.Unlock()
}

func (m *Mem) hooks() (onRead, onDeliver, onDone ReadHook) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.onRead, m.onDeliver, m.onDone
}

type memFile struct {
	data    []byte
	modTime time.Time
}

var _ Origin = (*Mem)(nil)

// NewMem returns an empty in-memory origin named name (e.g. "mem://a").
func NewMem(name string) *Mem {
	return &Mem{name: name, files: map[string]memFile{}}
}

// Put stores data at path. The origin keeps data; the caller must not modify
// it afterwards.
func (m *Mem) Put(p string, data []byte, modTime time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[path.Clean(p)] = memFile{data: data, modTime: modTime}
}

// Remove deletes path.
func (m *Mem) Remove(p string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.files, path.Clean(p))
}

// Fail makes every later call return err (nil restores normal operation).
func (m *Mem) Fail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failErr = err
}

// Gate makes reads block until the returned function is called, so a test
// can pile up concurrent readers before any data arrives.
func (m *Mem) Gate() (release func()) {
	ch := make(chan struct{})
	m.mu.Lock()
	m.gate = ch
	m.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			if m.gate == ch {
				m.gate = nil
			}
			m.mu.Unlock()
			close(ch)
		})
	}
}

func (m *Mem) lookup(p string) (memFile, chan struct{}, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failErr != nil {
		return memFile{}, nil, m.failErr
	}
	f, ok := m.files[path.Clean(p)]
	if !ok {
		return memFile{}, nil, fmt.Errorf("%s%s: %w", m.name, p, ErrNotFound)
	}
	return f, m.gate, nil
}

// Stat implements Origin.
func (m *Mem) Stat(ctx context.Context, p string) (FileInfo, error) {
	m.Lookups.Add(1)
	f, _, err := m.lookup(p)
	if err != nil {
		if dir := m.isDir(p); dir {
			return FileInfo{Name: p, Mode: fs.ModeDir | 0o755}, nil
		}
		return FileInfo{}, err
	}
	return FileInfo{Name: p, Size: int64(len(f.data)), ModTime: f.modTime, Mode: 0o644}, nil
}

func (m *Mem) isDir(p string) bool {
	prefix := strings.TrimSuffix(path.Clean(p), "/") + "/"
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.files {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// Open implements Origin.
func (m *Mem) Open(ctx context.Context, p string) (File, error) {
	m.Lookups.Add(1)
	f, _, err := m.lookup(p)
	if err != nil {
		return nil, err
	}
	m.Opens.Add(1)
	return &memHandle{m: m, path: p, info: FileInfo{Name: p, Size: int64(len(f.data)), ModTime: f.modTime, Mode: 0o644}}, nil
}

// List implements Origin.
func (m *Mem) List(ctx context.Context, p string, withStat bool) ([]FileInfo, error) {
	prefix := strings.TrimSuffix(path.Clean(p), "/") + "/"
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failErr != nil {
		return nil, m.failErr
	}
	seen := map[string]FileInfo{}
	for k, f := range m.files {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		rest := strings.TrimPrefix(k, prefix)
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			seen[rest[:i]] = FileInfo{Name: rest[:i], Mode: fs.ModeDir | 0o755}
			continue
		}
		seen[rest] = FileInfo{Name: rest, Size: int64(len(f.data)), ModTime: f.modTime, Mode: 0o644}
	}
	if len(seen) == 0 {
		return nil, fmt.Errorf("%s%s: %w", m.name, p, ErrNotFound)
	}
	out := make([]FileInfo, 0, len(seen))
	for _, fi := range seen {
		out = append(out, fi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// SetChecksum makes Checksum report value for path and algo, true or not,
// so tests can play an origin whose checksum disagrees with its bytes.
func (m *Mem) SetChecksum(p, algo, value string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sums == nil {
		m.sums = map[string]string{}
	}
	m.sums[algo+" "+path.Clean(p)] = value
}

// Checksum implements Origin for "adler32" and "crc32c".
func (m *Mem) Checksum(ctx context.Context, p, algo string) (string, error) {
	m.Checksums.Add(1)
	f, _, err := m.lookup(p)
	if err != nil {
		return "", err
	}
	m.mu.Lock()
	forced, ok := m.sums[algo+" "+path.Clean(p)]
	m.mu.Unlock()
	if ok {
		return forced, nil
	}
	if h, ok := checksum.New(algo); ok && (algo == "adler32" || algo == "crc32c") {
		h.Write(f.data)
		return fmt.Sprintf("%x", h.Sum(nil)), nil
	}
	return "", fmt.Errorf("%s%s checksum %s: %w", m.name, p, algo, ErrUnsupported)
}

// String implements Origin.
func (m *Mem) String() string { return m.name }

// Close implements Origin.
func (m *Mem) Close() error { return nil }

type memHandle struct {
	m    *Mem
	path string
	info FileInfo
}

func (h *memHandle) Info() FileInfo { return h.info }

// memStep is how much of an answer a Mem delivers at a time through
// ReadAtProgress, each part after the delivery hook.
const memStep = 16 << 10

var _ ProgressReader = (*memHandle)(nil)

// ReadAtProgress implements ProgressReader in steps of memStep.
func (h *memHandle) ReadAtProgress(ctx context.Context, p []byte, off int64, progress func(int)) (int, error) {
	return h.read(ctx, p, off, memStep, progress)
}

func (h *memHandle) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	return h.read(ctx, p, off, len(p), nil)
}

// read is one request: the read hook, the gate, then the answer in steps,
// each after the delivery hook.
func (h *memHandle) read(ctx context.Context, p []byte, off int64, step int, progress func(int)) (int, error) {
	f, gate, err := h.m.lookup(h.path)
	if err != nil {
		return 0, err
	}
	onRead, onDeliver, onDone := h.m.hooks()
	if onRead != nil {
		if err := onRead(ctx, h.path, off, len(p)); err != nil {
			return 0, err
		}
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	h.m.Reads.Add(1)
	if off >= int64(len(f.data)) {
		return 0, io.EOF
	}
	avail := f.data[off:]
	done := 0
	for done < len(p) && done < len(avail) {
		k := min(step, len(p)-done, len(avail)-done)
		if onDeliver != nil {
			if err := onDeliver(ctx, h.path, off+int64(done), k); err != nil {
				return done, err
			}
		}
		copy(p[done:done+k], avail[done:done+k])
		done += k
		h.m.BytesRead.Add(int64(k))
		if progress != nil {
			progress(done)
		}
	}
	if onDone != nil {
		if err := onDone(ctx, h.path, off, done); err != nil {
			return done, err
		}
	}
	if done < len(p) {
		return done, io.EOF
	}
	return done, nil
}

func (h *memHandle) ReadV(ctx context.Context, segs []Segment) error {
	return ReadVByReadAt(ctx, h, segs)
}

func (h *memHandle) Close() error { return nil }

// ReadVByReadAt serves a vector read with one ReadAt per segment, for origins
// without a native vector read. A segment past the end of file is an error.
func ReadVByReadAt(ctx context.Context, f File, segs []Segment) error {
	for _, s := range segs {
		n, err := f.ReadAt(ctx, s.Buf, s.Offset)
		if err != nil && !(err == io.EOF && n == len(s.Buf)) {
			return fmt.Errorf("readv segment %d@%d: %w", len(s.Buf), s.Offset, err)
		}
	}
	return nil
}
