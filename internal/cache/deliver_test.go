package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hepcache/hepcache/disk"
	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/checksum"
	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/internal/policy"
	"github.com/hepcache/hepcache/internal/syncbuf"
	"github.com/hepcache/hepcache/origin"
)

// TestNoSuccessAcrossARewrite (issue 27, item 7): a file rewritten at an
// origin that does not pin reads to the version opened (origin.Mem, like
// POSIX and XRootD), between two reads of one open file: the read that
// gets the new version's bytes from the origin fails (the rewrite is
// confirmed before its last byte), and so does every later read of the
// handle, also of a block cached before. Before, the second read handed
// over the new version's block with success, after the old version's
// first block.
func TestNoSuccessAcrossARewrite(t *testing.T) {
	ctx := context.Background()
	const blocks = 12
	old, renewed := randomData(81, blocks*testBlock), randomData(82, blocks*testBlock)
	m := origin.NewMem("mem://o")
	m.Put("/f", old, time.Unix(1700000000, 0))
	c := newTestCache(t, t.TempDir(), m, mutableEverywhere(t))
	f := openTest(t, c, "/f")
	first := make([]byte, testBlock)
	if _, err := f.ReadAt(ctx, first, 0); err != nil || !bytes.Equal(first, old[:testBlock]) {
		t.Fatalf("read of block 0: %v", err)
	}
	m.Put("/f", renewed, time.Unix(1700000100, 0)) // in place: the open file reads it
	got := make([]byte, testBlock)
	_, err := f.ReadAt(ctx, got, 10*testBlock)
	switch {
	case err == nil && bytes.Equal(got, renewed[10*testBlock:11*testBlock]):
		t.Fatal("block 10 of the new version was read with success after block 0 of the old one")
	case err == nil:
		t.Fatal("block 10 was read with success, after a rewrite, with bytes of no version")
	case !errors.Is(err, syscall.EIO):
		t.Fatalf("read of block 10 after the rewrite: %v, want an I/O error", err)
	}
	if _, err := f.ReadAt(ctx, got, 0); !errors.Is(err, syscall.EIO) {
		t.Fatalf("read of block 0 (cached) after the rewrite was detected: %v, want an I/O error", err)
	}
	if err := f.(interface {
		ReadV(context.Context, []origin.Segment) error
	}).ReadV(ctx, []origin.Segment{{Offset: 0, Buf: got}}); !errors.Is(err, syscall.EIO) {
		t.Fatalf("vector read after the rewrite was detected: %v, want an I/O error", err)
	}
	f.Close()
	waitIdle(t, c)
	if all := readAllVia(t, c, "/f"); !bytes.Equal(all, renewed) {
		t.Fatal("the open after the rewrite does not read the new file")
	}
}

// TestVectorReadAcrossARewrite: a vector read whose segments come from the
// origin after a rewrite fails as a whole (one confirmation at its end).
func TestVectorReadAcrossARewrite(t *testing.T) {
	ctx := context.Background()
	old, renewed := randomData(83, 8*testBlock), randomData(84, 8*testBlock)
	m := origin.NewMem("mem://o")
	m.Put("/f", old, time.Unix(1700000000, 0))
	c := newTestCache(t, t.TempDir(), m, mutableEverywhere(t))
	f := openTest(t, c, "/f")
	if _, err := f.ReadAt(ctx, make([]byte, 100), 0); err != nil {
		t.Fatal(err)
	}
	m.Put("/f", renewed, time.Unix(1700000100, 0))
	segs := []origin.Segment{{Offset: 3 * testBlock, Buf: make([]byte, 100)}, {Offset: 6 * testBlock, Buf: make([]byte, 100)}}
	err := f.(interface {
		ReadV(context.Context, []origin.Segment) error
	}).ReadV(ctx, segs)
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("vector read across the rewrite: %v, want an I/O error", err)
	}
	f.Close()
}

// TestDeliveredMixedIsLogged (issue 27, item 7): a rewrite that keeps the
// size and the modification time escapes every stat; a second client then
// reads the whole file, a mix of both versions, with success. When the
// complete copy fails the origin's checksum, that delivery is logged as
// "delivered mixed" (an error naming the client); the first client, still
// reading, fails from then on and its partial delivery is logged as a
// warning when it closes. Before, only the dropped copy was logged.
func TestDeliveredMixedIsLogged(t *testing.T) {
	ctx := context.Background()
	const blocks = 8
	old, renewed := randomData(85, blocks*testBlock), randomData(86, blocks*testBlock)
	mtime := time.Unix(1700000000, 0)
	m := origin.NewMem("mem://o")
	m.Put("/f", old, mtime)
	log := &syncbuf.Buffer{}
	// The origin answers the checksum once bob has read the file whole.
	o := &gatedChecksum{Mem: m, gate: make(chan struct{})}
	c := newTestCache(t, t.TempDir(), o, func(c *Config) {
		c.VerifyChecksum = "adler32"
		c.Logger = slog.New(slog.NewTextHandler(log, nil))
	})
	a, err := c.Open(ctx, backend.Request{Path: "/f", Client: "10.0.0.1:1111", User: "alice", Protocol: "root"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.ReadAt(ctx, make([]byte, 2*testBlock), 0); err != nil {
		t.Fatal(err)
	}
	m.Put("/f", renewed, mtime)
	m.SetChecksum("/f", "adler32", fmt.Sprintf("%08x", checksum.Adler32(renewed)))
	b, err := c.Open(ctx, backend.Request{Path: "/f", Client: "10.0.0.2:2222", User: "bob", Protocol: "https"})
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if _, err := b.Stream(ctx, 0, int64(len(renewed)), func(p []byte) error { got.Write(p); return nil }); err != nil {
		t.Fatalf("whole read after an undetectable rewrite: %v", err)
	}
	if bytes.Equal(got.Bytes(), renewed) || bytes.Equal(got.Bytes(), old) {
		t.Fatal("the test meant to get a mix: the copy is of one version")
	}
	b.Close()
	close(o.gate)
	eventually.True(t, func() bool { return c.Stats().ChecksumFailures.Load() == 1 }, "the checksum mismatch")
	// Alice, still reading, fails now; her delivery is logged at close.
	if _, err := a.ReadAt(ctx, make([]byte, 10), 0); !errors.Is(err, syscall.EIO) {
		t.Fatalf("alice's read after the mismatch: %v, want an I/O error", err)
	}
	a.Close()
	waitIdle(t, c)
	lines := strings.Split(log.String(), "\n")
	find := func(client string) string {
		for _, l := range lines {
			if strings.Contains(l, "client="+client) && strings.Contains(l, "checksum") {
				return l
			}
		}
		return ""
	}
	if l := find("10.0.0.2:2222"); !strings.Contains(l, "level=ERROR") || !strings.Contains(l, "delivered mixed") || !strings.Contains(l, "user=bob") {
		t.Fatalf("the whole-file delivery to bob is not logged as delivered mixed: %q\nlog:\n%s", l, log)
	}
	if l := find("10.0.0.1:1111"); !strings.Contains(l, "level=WARN") || strings.Contains(l, "delivered mixed") || !strings.Contains(l, "bytes=131072") {
		t.Fatalf("alice's partial delivery: %q\nlog:\n%s", l, log)
	}
}

// gatedChecksum answers checksums once gate is closed.
type gatedChecksum struct {
	*origin.Mem
	gate chan struct{}
}

func (g *gatedChecksum) Checksum(ctx context.Context, p, algo string) (string, error) {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	return g.Mem.Checksum(ctx, p, algo)
}

func TestCoverage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ranges [][2]int64 // off, n
		whole  bool
	}{
		{"in order", [][2]int64{{0, 10}, {10, 10}, {20, 5}}, true},
		{"out of order", [][2]int64{{20, 5}, {0, 10}, {10, 10}}, true},
		{"overlapping", [][2]int64{{0, 15}, {5, 20}}, true},
		{"gap", [][2]int64{{0, 10}, {11, 14}}, false},
		{"not from 0", [][2]int64{{1, 24}}, false},
		{"short", [][2]int64{{0, 24}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c coverage
			for _, r := range tc.ranges {
				c.add(r[0], r[1])
			}
			if w, _ := c.whole(25); w != tc.whole {
				t.Fatalf("whole = %v, want %v (ranges %v)", w, tc.whole, c.r)
			}
		})
	}
	var c coverage
	for i := range int64(2 * maxCoverageRanges) {
		c.add(i*10, 5)
	}
	if len(c.r) != maxCoverageRanges {
		t.Fatalf("%d ranges kept, want at most %d", len(c.r), maxCoverageRanges)
	}
}

// mutableEverywhere declares every path mutable: reads of fresh bytes wait
// for the origin to confirm the version (deliver.go).
func mutableEverywhere(tb testing.TB) func(*Config) {
	tb.Helper()
	pol, err := policy.New([]policy.Rule{{Prefix: "/", Mutable: true}}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return func(c *Config) { c.Policy = pol }
}

// TestImmutableReadsDoNotWait: in an immutable namespace (the default) a
// read of fresh bytes ends without a confirming stat (no round trip to the
// origin per read), yet a rewrite is still caught before its bytes are
// kept, and every later read of the handle fails.
func TestImmutableReadsDoNotWait(t *testing.T) {
	ctx := context.Background()
	old, renewed := randomData(83, 12*testBlock), randomData(84, 12*testBlock)
	m := origin.NewMem("mem://o")
	m.Put("/f", old, time.Unix(1700000000, 0))
	c := newTestCache(t, t.TempDir(), m, nil)
	f := openTest(t, c, "/f")
	buf := make([]byte, testBlock)
	if _, err := f.ReadAt(ctx, buf, 0); err != nil || !bytes.Equal(buf, old[:testBlock]) {
		t.Fatalf("read of block 0: %v", err)
	}
	lookups := m.Lookups.Load()
	m.Put("/f", renewed, time.Unix(1700000100, 0))
	f.ReadAt(ctx, buf, 10*testBlock) // may end before the rewrite is seen
	waitIdle(t, c)
	if _, err := f.ReadAt(ctx, buf, 0); err == nil {
		t.Fatal("a read after the rewrite was caught succeeded")
	}
	if m.Lookups.Load() == lookups {
		t.Fatal("no stat confirmed the fetched block before it was kept")
	}
	f.Close()
}

// TestDiskFailureFallbackConfirmed: a cached block the disk fails to read
// is served from the origin (bypass); in a mutable namespace those bytes
// are confirmed as a fetch's are. The file rewritten at the origin (same
// size) after the handle's first fallback opened it: the next fallback
// read fails rather than hand over the new version's block after the old
// one's.
func TestDiskFailureFallbackConfirmed(t *testing.T) {
	ctx := context.Background()
	old, renewed := randomData(91, 4*testBlock), randomData(92, 4*testBlock)
	m := origin.NewMem("mem://o")
	m.Put("/f", old, time.Unix(1700000000, 0))
	dir := t.TempDir()
	warm := newTestCache(t, dir, m, mutableEverywhere(t))
	readAllVia(t, warm, "/f")
	waitIdle(t, warm)
	warm.Close()

	efs := disk.NewErrorFS(disk.OS{})
	c := newTestCache(t, dir, m, func(cfg *Config) {
		mutableEverywhere(t)(cfg)
		cfg.FS = efs
	})
	f := openTest(t, c, "/f")
	defer f.Close()
	efs.OnRead(func(name string, _ int64, _ int) error {
		if strings.Contains(name, "/data/") {
			return syscall.EIO
		}
		return nil
	})
	got := make([]byte, testBlock)
	if _, err := f.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, old[:testBlock]) {
		t.Fatalf("read of block 0 with the disk failing: %v", err)
	}
	if c.Stats().BytesBypassed.Load() == 0 {
		t.Fatal("block 0 did not come from the origin (the disk read did not fail?)")
	}
	m.Put("/f", renewed, time.Unix(1700000100, 0)) // in place: the open origin file reads it
	_, err := f.ReadAt(ctx, got, 2*testBlock)
	switch {
	case err == nil && bytes.Equal(got, renewed[2*testBlock:3*testBlock]):
		t.Fatal("block 2 of the new version was read with success after block 0 of the old one")
	case err == nil:
		t.Fatalf("block 2 was read with success after a rewrite (old version's bytes: %v)", bytes.Equal(got, old[2*testBlock:3*testBlock]))
	case !errors.Is(err, syscall.EIO):
		t.Fatalf("read of block 2 after the rewrite: %v, want an I/O error", err)
	}
}

// TestMutableWholeReadAwaitsChecksum (issue 36 item 11): a rewrite keeping
// the size and the modification time escapes every stat; only the
// whole-file checksum sees it. In a mutable namespace the read that
// completes the copy ends only once the copy has been compared with the
// origin's checksum, and fails when it differs: a client reading the file
// whole never gets one version's block and then the other's with success.
// Before, the read ended with success as soon as a stat found the size and
// modification time unchanged, while the immutable namespaces caught such
// rewrites when the comparison happened to come first. Fake time: the
// comparison is held back until every goroutine waits, so the read has had
// every chance to end without it.
func TestMutableWholeReadAwaitsChecksum(t *testing.T) {
	for _, vector := range []bool{false, true} {
		t.Run(map[bool]string{false: "stream", true: "readv"}[vector], func(t *testing.T) { mutableWholeRead(t, vector) })
	}
}

func mutableWholeRead(t *testing.T, vector bool) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		const blocks = 6
		old, renewed := randomData(87, blocks*testBlock), randomData(88, blocks*testBlock)
		mtime := time.Unix(1700000000, 0)
		m := origin.NewMem("mem://o")
		m.Put("/f", old, mtime)
		o := &gatedChecksum{Mem: m, gate: make(chan struct{})}
		c := newTestCache(t, t.TempDir(), o, mutableEverywhere(t))
		f := openTest(t, c, "/f")
		first := make([]byte, testBlock)
		if _, err := f.ReadAt(ctx, first, 0); err != nil || !bytes.Equal(first, old[:testBlock]) {
			t.Fatalf("read of block 0: %v", err)
		}
		m.Put("/f", renewed, mtime) // same size, same modification time
		done := make(chan error, 1)
		var got bytes.Buffer
		go func() {
			if vector { // as ROOT's TTreeCache reads: the rest in two segments
				rest := make([]byte, len(old)-testBlock)
				err := f.(interface {
					ReadV(context.Context, []origin.Segment) error
				}).ReadV(ctx, []origin.Segment{{Offset: testBlock, Buf: rest[:testBlock]}, {Offset: 2 * testBlock, Buf: rest[testBlock:]}})
				got.Write(rest)
				done <- err
				return
			}
			_, err := f.Stream(ctx, testBlock, int64(len(old)-testBlock), func(p []byte) error { got.Write(p); return nil })
			done <- err
		}()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("the read that completed the copy ended (err %v, new version's bytes %v) before its checksum was compared with the origin's",
				err, bytes.Equal(got.Bytes(), renewed[testBlock:]))
		default:
		}
		close(o.gate)
		if err := <-done; !errors.Is(err, syscall.EIO) {
			t.Fatalf("the read that completed a copy failing the origin's checksum: %v, want an I/O error", err)
		}
		f.Close()
		synctest.Wait()
		waitIdle(t, c)
		// The copy was dropped: the next read gets the new file whole.
		if all := readAllVia(t, c, "/f"); !bytes.Equal(all, renewed) {
			t.Fatal("the open after the mismatch does not read the new file")
		}
	})
}
