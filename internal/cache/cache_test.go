package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/hepcache/hepcache/internal/eventually"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hepcache/hepcache/disk"
	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/origin"
)

const testBlock = 64 << 10
const testPiece = 16 << 10

func randomData(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// memWithFile returns a memory origin holding /f: n random bytes from seed.
func memWithFile(seed uint64, n int) (*origin.Mem, []byte) {
	m := origin.NewMem("mem://o")
	data := randomData(seed, n)
	m.Put("/f", data, time.Now())
	return m, data
}

// newTestCache returns a cache over dir reading from o. mut adjusts the config.
func newTestCache(tb testing.TB, dir string, o origin.Origin, mut func(*Config)) *Cache {
	tb.Helper()
	cfg := &Config{
		Dir:          dir,
		Origins:      singleOrigin(o),
		BlockSize:    testBlock,
		PieceSize:    testPiece,
		Prefetch:     -1,
		FetchMemory:  4 << 20,
		RAM:          8 << 20,
		SyncInterval: time.Hour, // tests sync explicitly via close
		CloseLinger:  -1,        // a close ends the entry (TestCloseLinger tests lingering)
	}
	if mut != nil {
		mut(cfg)
	}
	c, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	if cfg.loadPace == nil {
		<-c.catalog.Done() // the catalogue loaded and checked (load.go)
	}
	return c
}

func singleOrigin(o origin.Origin) origin.Resolver {
	return origin.ResolverFunc(func(ctx context.Context, url string) (origin.Origin, error) {
		if url != "" && url != o.String() {
			return nil, fmt.Errorf("origin %s: %w", url, backend.ErrForbidden)
		}
		return o, nil
	})
}

// openTest opens p through the cache, failing the test on error.
func openTest(tb testing.TB, c *Cache, p string) backend.File {
	tb.Helper()
	f, err := c.Open(context.Background(), backend.Request{Path: p})
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

func readAllVia(tb testing.TB, c *Cache, p string) []byte {
	tb.Helper()
	f, err := c.Open(context.Background(), backend.Request{Path: p})
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var buf bytes.Buffer
	n, err := f.Stream(context.Background(), 0, f.Info().Size+100, func(b []byte) error {
		buf.Write(b)
		return nil
	})
	if err != nil {
		tb.Fatalf("stream %s: %v", p, err)
	}
	if n != int64(buf.Len()) {
		tb.Fatalf("stream returned %d but delivered %d", n, buf.Len())
	}
	return buf.Bytes()
}

func TestColdThenHot(t *testing.T) {
	for _, size := range []int{0, 1, testPiece - 1, testBlock, testBlock + 1, 5*testBlock + 777} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			m := origin.NewMem("mem://o")
			data := randomData(uint64(size), size)
			m.Put("/f", data, time.Unix(1700000000, 0))
			c := newTestCache(t, t.TempDir(), m, nil)
			if got := readAllVia(t, c, "/f"); !bytes.Equal(got, data) {
				t.Fatalf("cold read differs (len %d vs %d)", len(got), len(data))
			}
			if got := m.BytesRead.Load(); got != int64(size) {
				t.Fatalf("cold read fetched %d bytes from origin, want %d", got, size)
			}
			m.Fail(fmt.Errorf("origin down: %w", origin.ErrUnavailable))
			if got := readAllVia(t, c, "/f"); !bytes.Equal(got, data) {
				t.Fatal("hot read differs")
			}
			if got := m.BytesRead.Load(); got != int64(size) {
				t.Fatalf("hot read touched the origin: %d bytes", got-int64(size))
			}
			fi, err := c.Stat(context.Background(), backend.Request{Path: "/f"})
			if err != nil || fi.Size != int64(size) {
				t.Fatalf("stat of cached file with origin down: %v %v", fi, err)
			}
		})
	}
}

func TestRestartServesFromDisk(t *testing.T) {
	dir := t.TempDir()
	m := origin.NewMem("mem://o")
	data := randomData(7, 3*testBlock+5)
	m.Put("/store/f.root", data, time.Unix(1700000000, 0))
	c := newTestCache(t, dir, m, nil)
	readAllVia(t, c, "/store/f.root")
	c.Close()

	c2 := newTestCache(t, dir, m, nil)
	m.Fail(origin.ErrUnavailable)
	if got := readAllVia(t, c2, "/store/f.root"); !bytes.Equal(got, data) {
		t.Fatal("read after restart differs")
	}
	if c2.Stats().Hits.Load() != 1 {
		t.Fatalf("open after restart was not a hit: %+v", c2.Stats().Misses.Load())
	}
}

func TestCoalescing(t *testing.T) {
	m, data := memWithFile(3, 4*testBlock+123)
	c := newTestCache(t, t.TempDir(), m, nil)
	release := m.Gate()
	const clients = 64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	started := make(chan struct{}, clients)
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := c.Open(context.Background(), backend.Request{Path: "/f"})
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			started <- struct{}{}
			got := make([]byte, len(data))
			if _, err := f.ReadAt(context.Background(), got, 0); err != nil && err != io.EOF {
				errs <- err
				return
			}
			if !bytes.Equal(got, data) {
				errs <- errors.New("wrong bytes")
			}
		}()
	}
	for i := 0; i < clients; i++ {
		<-started
	}
	release()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := m.BytesRead.Load(); got != int64(len(data)) {
		t.Fatalf("origin served %d bytes for %d concurrent readers of a %d-byte file", got, clients, len(data))
	}
}

// holdFrom makes m's reads at or after off wait until release is closed
// (or their context ends): a distant origin that has sent only the start.
func holdFrom(m *origin.Mem, off int64, release <-chan struct{}) {
	m.OnDeliver(func(ctx context.Context, _ string, o int64, _ int) error {
		if o < off {
			return nil
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}

func TestStreamThroughBeforeBlockCompletes(t *testing.T) {
	m, data := memWithFile(5, testBlock)
	release := make(chan struct{})
	holdFrom(m, testPiece, release)
	c := newTestCache(t, t.TempDir(), m, nil)
	f := openTest(t, c, "/f")
	defer f.Close()
	first := make(chan []byte, 1)
	done := make(chan error, 1)
	var got bytes.Buffer
	go func() {
		_, err := f.Stream(context.Background(), 0, testBlock, func(b []byte) error {
			if got.Len() == 0 {
				first <- append([]byte(nil), b...)
			}
			got.Write(b)
			return nil
		})
		done <- err
	}()
	// The first piece must reach the reader while the rest of the block is
	// still held back at the origin.
	b := <-first
	if !bytes.Equal(b, data[:len(b)]) || len(b) == 0 {
		t.Fatal("first chunk wrong")
	}
	select {
	case <-done:
		t.Fatal("stream finished before the gated pieces were released")
	default:
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), data) {
		t.Fatal("streamed bytes differ")
	}
}

func TestPartialResume(t *testing.T) {
	dir := t.TempDir()
	m, data := memWithFile(11, 8*testBlock)
	c := newTestCache(t, dir, m, nil)
	f := openTest(t, c, "/f")
	half := make([]byte, 4*testBlock)
	if _, err := f.ReadAt(context.Background(), half, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	c.Close()
	before := m.BytesRead.Load()
	if before != int64(len(half)) {
		t.Fatalf("prefetch off, read half: origin served %d want %d", before, len(half))
	}

	c2 := newTestCache(t, dir, m, nil)
	if got := readAllVia(t, c2, "/f"); !bytes.Equal(got, data) {
		t.Fatal("resumed read differs")
	}
	if got := m.BytesRead.Load() - before; got != int64(len(data)-len(half)) {
		t.Fatalf("resume fetched %d bytes, want only the missing %d", got, len(data)-len(half))
	}
	if c2.Stats().PartialHits.Load() != 1 {
		t.Fatal("resumed open not counted as partial hit")
	}
}

func TestUnsyncedBlocksAreNotTrustedAfterCrash(t *testing.T) {
	dir := t.TempDir()
	m, data := memWithFile(13, 4*testBlock)
	c := newTestCache(t, dir, m, nil)
	f := openTest(t, c, "/f")
	buf := make([]byte, 2*testBlock)
	if _, err := f.ReadAt(context.Background(), buf, 0); err != nil {
		t.Fatal(err)
	}
	// "Crash": a second process opens the directory while the first has
	// written blocks but not synced them (no close, no sync tick). Scribble
	// over the data file to prove the new cache does not serve from it.
	scribble(t, c.dataPath(Key{Origin: "mem://o", Path: "/f"}))
	c2 := newTestCache(t, dir, m, nil)
	if got := readAllVia(t, c2, "/f"); !bytes.Equal(got, data) {
		t.Fatal("served unsynced bytes after a crash")
	}
	_ = f
}

func scribble(tb testing.TB, name string) {
	tb.Helper()
	f, err := disk.OS{}.OpenFile(name, 2 /* O_RDWR */, 0)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	junk := bytes.Repeat([]byte{0xAA}, testBlock)
	if _, err := f.WriteAt(junk, 0); err != nil {
		tb.Fatal(err)
	}
}

func TestDiskFullBypasses(t *testing.T) {
	m, data := memWithFile(17, 3*testBlock+9)
	efs := disk.NewErrorFS(disk.OS{})
	efs.OnWrite(func(name string, off int64, n int) error {
		if strings.Contains(name, "/data/") && off >= testBlock {
			return syscall.ENOSPC
		}
		return nil
	})
	// A stopped clock: the disk, once found full, stays so (fullFor).
	stopped := time.Unix(1700000000, 0)
	c := newTestCache(t, t.TempDir(), m, func(cfg *Config) { cfg.FS, cfg.now = efs, func() time.Time { return stopped } })
	if got := readAllVia(t, c, "/f"); !bytes.Equal(got, data) {
		t.Fatal("read with a full disk returned wrong bytes")
	}
	waitIdle(t, c) // the blocks' writes come after their bytes reached the reader
	st := c.Stats()
	if st.WriteErrors.Load() == 0 {
		t.Fatal("no write error on a full disk")
	}
	// The disk is known full now: the blocks fetched again are served
	// without being written (bypass), still right.
	if got := readAllVia(t, c, "/f"); !bytes.Equal(got, data) {
		t.Fatal("second read with a full disk returned wrong bytes")
	}
	if st.BytesBypassed.Load() == 0 {
		t.Fatal("nothing bypassed while the disk was known full")
	}
	if got := st.BytesHit.Load() + st.BytesMissed.Load() + st.BytesBypassed.Load(); got != 2*int64(len(data)) {
		t.Fatalf("hit+missed+bypassed=%d, want %d", got, 2*len(data))
	}
	// Disk back: the blocks that failed are fetched and cached now.
	efs.OnWrite(nil)
	if got := readAllVia(t, c, "/f"); !bytes.Equal(got, data) {
		t.Fatal("read after disk recovered differs")
	}
}

func TestOriginFailureThenRecovery(t *testing.T) {
	m, data := memWithFile(19, 2*testBlock)
	c := newTestCache(t, t.TempDir(), m, nil)
	f := openTest(t, c, "/f")
	defer f.Close()
	m.Fail(fmt.Errorf("link down: %w", origin.ErrUnavailable))
	buf := make([]byte, 100)
	if _, err := f.ReadAt(context.Background(), buf, 0); !errors.Is(err, origin.ErrUnavailable) {
		t.Fatalf("read with origin down: got %v, want ErrUnavailable", err)
	}
	m.Fail(nil)
	if _, err := f.ReadAt(context.Background(), buf, 0); err != nil {
		t.Fatalf("read after origin recovered: %v", err)
	}
	if !bytes.Equal(buf, data[:100]) {
		t.Fatal("wrong bytes after recovery")
	}
}

func TestOpenErrors(t *testing.T) {
	m := origin.NewMem("mem://o")
	m.Put("/dir/f", []byte("x"), time.Now())
	c := newTestCache(t, t.TempDir(), m, nil)
	cases := []struct {
		name string
		req  backend.Request
		want error
	}{
		{"missing", backend.Request{Path: "/nope"}, origin.ErrNotFound},
		{"dotdot", backend.Request{Path: "/dir/../../etc/passwd"}, backend.ErrInvalidPath},
		{"nul", backend.Request{Path: "/dir/f\x00"}, backend.ErrInvalidPath},
		{"other origin", backend.Request{Origin: "root://evil:1094", Path: "/dir/f"}, backend.ErrForbidden},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := c.Open(context.Background(), tc.req)
			if err == nil {
				f.Close()
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestPrefetchStopsAtCloseAndCompleteAfterClose(t *testing.T) {
	for _, complete := range []bool{false, true} {
		t.Run(fmt.Sprint("complete=", complete), func(t *testing.T) {
			dir := t.TempDir()
			m := origin.NewMem("mem://o")
			data := randomData(23, 40*testBlock)
			m.Put("/f", data, time.Now())
			// The origin holds back all but the first blocks until the
			// client has left, so read-ahead cannot finish the file while
			// it reads (a memory origin is instant).
			release := make(chan struct{})
			holdFrom(m, 3*testBlock, release)
			c := newTestCache(t, dir, m, func(cfg *Config) {
				cfg.Prefetch = 2
				cfg.CompleteAfterClose = complete
			})
			f := openTest(t, c, "/f")
			buf := make([]byte, 10)
			if _, err := f.ReadAt(context.Background(), buf, 0); err != nil {
				t.Fatal(err)
			}
			f.Close()
			if complete {
				close(release)
			}
			// Wait for the entry to be finished (or completed).
			waitIdle(t, c)
			if !complete {
				close(release)
			}
			c.Close()
			c2 := newTestCache(t, dir, m, nil)
			before := m.BytesRead.Load()
			if got := readAllVia(t, c2, "/f"); !bytes.Equal(got, data) {
				t.Fatal("bytes differ")
			}
			fetched := m.BytesRead.Load() - before
			if complete && fetched != 0 {
				t.Fatalf("complete-after-close left %d bytes to fetch", fetched)
			}
			if !complete && fetched == 0 {
				t.Fatal("prefetch completed the file after the client left")
			}
		})
	}
}

func waitIdle(tb testing.TB, c *Cache) {
	tb.Helper()
	eventually.True(tb, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.files)-c.keptq.n+len(c.closing) == 0 // kept entries are idle (kept.go)
	}, "the cache to go idle")
	c.bg.Wait() // verification and final syncs in the background
}

// TestNoSendfileForCachedData: the cache's files offer no data file to
// send from (backend.OSFiler, FileStreamer): every byte comes from the
// block store, checked.
func TestNoSendfileForCachedData(t *testing.T) {
	m, _ := memWithFile(61, 3*testBlock)
	c := newTestCache(t, t.TempDir(), m, nil)
	f := openTest(t, c, "/f")
	defer f.Close()
	if _, ok := f.(backend.OSFiler); ok {
		t.Fatal("a cached file offers its data file for sendfile")
	}
	if _, ok := f.(backend.FileStreamer); ok {
		t.Fatal("a cached file offers ranges of its data file")
	}
}

// waitBlocks waits until n block fetches have completed (their bits set).
func waitBlocks(tb testing.TB, c *Cache, n int64) {
	tb.Helper()
	eventually.True(tb, func() bool { return c.Stats().BlocksFetched.Load() >= n }, "%d block fetches", n)
}

func TestPrefetchWindowWidensForSlowOrigin(t *testing.T) {
	for _, tc := range []struct {
		name      string
		max, want int
	}{{"fixed", 0, 2}, {"widening", 16, 16}} {
		t.Run(tc.name, func(t *testing.T) {
			m := origin.NewMem("mem://o")
			data := randomData(71, 64*testBlock)
			m.Put("/f", data, time.Now())
			// Every read takes a while, like a distant origin's.
			m.OnRead(func(context.Context, string, int64, int) error { time.Sleep(2 * time.Millisecond); return nil })
			c := newTestCache(t, t.TempDir(), m, func(cfg *Config) {
				cfg.Prefetch = 2
				cfg.PrefetchMax = tc.max
			})
			f := openTest(t, c, "/f")
			defer f.Close()
			buf := make([]byte, testBlock)
			for off := int64(0); off < int64(len(data)); off += testBlock {
				if _, err := f.ReadAt(context.Background(), buf, off); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(buf, data[off:off+testBlock]) {
					t.Fatalf("bytes differ at %d", off)
				}
			}
			e := f.(*handle).e
			e.mu.Lock()
			w := e.st.window
			e.mu.Unlock()
			if w != tc.want {
				t.Fatalf("window %d after a sequential read of a slow origin, want %d", w, tc.want)
			}
		})
	}
}

// concurrency records the most origin reads in flight at once. Reads wait
// (up to 2 s) until target reads are in flight, so a cache that sends them
// together gets them answered at once, and one that sends them one by one
// shows a low high-water mark.
type concurrency struct {
	target       int64
	inflight, hi atomic.Int64
	mu           sync.Mutex
	release      chan struct{}
}

func (c *concurrency) reset(target int64) {
	c.mu.Lock()
	c.target, c.release = target, make(chan struct{})
	c.mu.Unlock()
	c.hi.Store(0)
}

// hook is the origin.Mem read hook that counts and holds the reads.
func (c *concurrency) hook(ctx context.Context, _ string, _ int64, _ int) error {
	n := c.inflight.Add(1)
	defer c.inflight.Add(-1)
	for {
		h := c.hi.Load()
		if n <= h || c.hi.CompareAndSwap(h, n) {
			break
		}
	}
	c.mu.Lock()
	rel := c.release
	if n >= c.target {
		select {
		case <-rel:
		default:
			close(rel)
		}
	}
	c.mu.Unlock()
	select {
	case <-rel:
	case <-time.After(2 * time.Second):
	}
	return nil
}

// TestLargeAndVectorReadsFetchBlocksTogether: a read spanning many missing
// blocks, and a vector read with segments in many blocks, request all of
// them at once instead of one block per round trip.
func TestLargeAndVectorReadsFetchBlocksTogether(t *testing.T) {
	m, data := memWithFile(73, 16*testBlock)
	co := &concurrency{}
	co.reset(4) // 4 blocks
	m.OnRead(co.hook)
	c := newTestCache(t, t.TempDir(), m, nil) // prefetch off
	f := openTest(t, c, "/f")
	defer f.Close()
	buf := make([]byte, 4*testBlock)
	if _, err := f.ReadAt(context.Background(), buf, 0); err != nil || !bytes.Equal(buf, data[:4*testBlock]) {
		t.Fatalf("large read: %v", err)
	}
	// One request per block, all 4 in flight together.
	if hi := co.hi.Load(); hi < 4 {
		t.Fatalf("at most %d origin reads in flight for a 4-block read, want all 4 blocks at once", hi)
	}
	var segs []origin.Segment
	for b := 5; b < 16; b += 2 {
		segs = append(segs, origin.Segment{Offset: int64(b)*testBlock + 100, Buf: make([]byte, 50)})
	}
	co.reset(int64(len(segs)))
	if err := f.(*handle).ReadV(context.Background(), segs); err != nil {
		t.Fatal(err)
	}
	for _, s := range segs {
		if !bytes.Equal(s.Buf, data[s.Offset:s.Offset+50]) {
			t.Fatalf("segment at %d differs", s.Offset)
		}
	}
	if hi := co.hi.Load(); hi < int64(len(segs)) {
		t.Fatalf("at most %d origin reads in flight for a vector read over %d blocks", hi, len(segs))
	}
}

// lingeringBehindDiskWrites returns a cache (closes linger an hour) in
// which /f (data) was read whole and closed while the blocks' disk writes
// are held back until release is closed: /f lingers, its writes queued.
func lingeringBehindDiskWrites(t *testing.T, seed uint64) (c *Cache, data []byte, release chan struct{}) {
	t.Helper()
	m, data := memWithFile(seed, 6*testBlock)
	c = newTestCache(t, t.TempDir(), m, func(cfg *Config) { cfg.CloseLinger = time.Hour })
	release = make(chan struct{})
	for range maxDiskWriters {
		c.diskWrites.do(func() { <-release })
	}
	f := openTest(t, c, "/f")
	got := make([]byte, len(data))
	if _, err := f.ReadAt(context.Background(), got, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("first read: %v", err)
	}
	f.Close()
	return c, data, release
}

// TestPurgeNeverWaitsForAClose: purge ends a lingering file it would
// evict but does not wait for its final sync, which may wait for the
// blocks' disk writes: a write that found the disk full runs the purge
// itself, and a purge that waited deadlocked the writers (the soak's full
// disk phase: every read hung, and so did shutdown).
func TestPurgeNeverWaitsForAClose(t *testing.T) {
	c, _, release := lingeringBehindDiskWrites(t, 8)
	k := Key{Origin: "mem://o", Path: "/f"}
	evicted := make(chan error, 1)
	go func() { _, err := c.evict(k, 0, nil); evicted <- err }()
	select {
	case err := <-evicted:
		if !errors.Is(err, ErrBusy) {
			t.Fatalf("purge's evict of a file whose close waits for the disk: %v, want busy", err)
		}
	case <-time.After(30 * time.Second):
		close(release)
		t.Fatal("purge's evict waited for the final sync of the lingering file it ended")
	}
	close(release)
	if _, err := c.Evict("mem://o", "/f"); err != nil {
		t.Fatalf("evict once the writes are done: %v", err)
	}
	waitIdle(t, c)
}

// TestCloseLinger: an entry whose last client closed stays a while, so
// that a new open takes it as it is (blocks still being written included)
// without waiting for its final sync; it ends once the linger is over, and
// an evict ends it at once.
func TestCloseLinger(t *testing.T) {
	c, data, release := lingeringBehindDiskWrites(t, 7)
	got := make([]byte, len(data))
	// A new open does not wait for the writes: it takes the lingering entry.
	reopened := make(chan backend.File)
	go func() { reopened <- openTest(t, c, "/f") }()
	var f2 backend.File
	select {
	case f2 = <-reopened:
	case <-time.After(30 * time.Second):
		t.Fatal("a new open waited for the last close's final sync")
	}
	if _, err := f2.ReadAt(context.Background(), got, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read of the reopened file: %v", err)
	}
	f2.Close()
	close(release)
	if _, err := c.Evict("mem://o", "/f"); err != nil {
		t.Fatalf("evict of a lingering file: %v", err)
	}
	waitIdle(t, c)
}
