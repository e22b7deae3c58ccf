package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/hepcache/hepcache/internal/backend"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/checksum"
	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/origin"
)

// TestReplacedOriginFileNeverMixes: a partial copy (blocks 0-1 of 8) whose
// origin file is then replaced by one of the same size: a reader of the
// whole file gets old bytes only up to the first missing block and then an
// I/O error, never new bytes after old ones with success; the copy is gone
// before any new byte was stored; the next open reads the new file whole.
func TestReplacedOriginFileNeverMixes(t *testing.T) {
	ctx := context.Background()
	m := origin.NewMem("mem://o")
	old := randomData(1, 8*testBlock)
	m.Put("/f", old, time.Unix(1000, 0))
	dir := t.TempDir()
	warm := newTestCache(t, dir, m, nil) // no read-ahead: exactly two blocks
	f := openTest(t, warm, "/f")
	if _, err := f.ReadAt(ctx, make([]byte, 2*testBlock), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	waitIdle(t, warm)
	warm.Close()

	renewed := randomData(2, 8*testBlock)
	m.Put("/f", renewed, time.Unix(2000, 0)) // same size, new content
	c := newTestCache(t, dir, m, func(c *Config) { c.Prefetch = 4 })
	before := m.BytesRead.Load()
	r := openTest(t, c, "/f")
	var got bytes.Buffer
	_, err := r.Stream(ctx, 0, int64(len(old)), func(p []byte) error { got.Write(p); return nil })
	if !errors.Is(err, syscall.EIO) || !errors.Is(err, errChanged) {
		t.Fatalf("read across the replacement: %v, want an I/O error", err)
	}
	if !bytes.HasPrefix(old, got.Bytes()) {
		t.Fatal("the reader got bytes that are not the old version's")
	}
	eventually.True(t, func() bool {
		_, ok := c.catalog.Lookup(Key{Origin: "mem://o", Path: "/f"})
		return !ok
	}, "the old copy to leave the index")
	if _, err := r.ReadAt(ctx, make([]byte, 10), 0); !errors.Is(err, syscall.EIO) {
		t.Fatalf("a later read of the spoiled open: %v, want an I/O error", err)
	}
	r.Close()

	if all := readAllVia(t, c, "/f"); !bytes.Equal(all, renewed) {
		t.Fatal("the open after the replacement does not read the new file")
	}
	if n := m.BytesRead.Load() - before; n != int64(len(renewed)) {
		t.Fatalf("origin sent %d bytes, want the new file once (%d)", n, len(renewed))
	}
	waitIdle(t, c)
}

// TestChecksumMismatchFailsReadersInFlight: when a completed copy fails the
// origin's checksum, a client still reading the file gets an I/O error
// instead of more bytes, and the next open fetches the file again.
func TestChecksumMismatchFailsReadersInFlight(t *testing.T) {
	ctx := context.Background()
	m, data := memWithFile(3, 4*testBlock)
	m.SetChecksum("/f", "adler32", "00000001")
	c := newTestCache(t, t.TempDir(), m, func(c *Config) { c.VerifyChecksum = "adler32" })
	slow := openTest(t, c, "/f") // a reader that is not done yet
	if _, err := slow.ReadAt(ctx, make([]byte, 100), 0); err != nil {
		t.Fatal(err)
	}
	// Complete the copy; verification follows, and may fail this reader
	// too if it is not done by then.
	if f, err := c.Open(ctx, backend.Request{Path: "/f"}); err == nil {
		f.Stream(ctx, 0, int64(len(data)), func([]byte) error { return nil })
		f.Close()
	}
	eventually.True(t, func() bool { return c.Stats().ChecksumFailures.Load() == 1 }, "the checksum mismatch")
	if _, err := slow.ReadAt(ctx, make([]byte, 100), testBlock); !errors.Is(err, syscall.EIO) {
		t.Fatalf("read after the mismatch: %v, want an I/O error", err)
	}
	slow.Close()
	// The origin's checksum is now the file's: otherwise the new copy
	// fails it too as soon as it is complete, which may be before the
	// reader below has all of it.
	m.SetChecksum("/f", "adler32", fmt.Sprintf("%08x", checksum.Adler32(data)))
	before := m.BytesRead.Load()
	if all := readAllVia(t, c, "/f"); !bytes.Equal(all, data) {
		t.Fatal("reopened read")
	}
	if m.BytesRead.Load() == before {
		t.Fatal("the copy that failed its checksum was served again")
	}
}

// TestRewriteInPlaceDuringSession: the origin's file is rewritten in place
// (same size, new content and modification time) while a client reads it
// with read-ahead on, from an origin that does not pin reads to the version
// opened (XRootD, POSIX; here origin.Mem): the reader gets the old file
// whole or an error, never a mix with success, nothing mixed stays cached,
// and the next open reads the new file.
func TestRewriteInPlaceDuringSession(t *testing.T) {
	ctx := context.Background()
	const blocks = 12
	old := randomData(41, blocks*testBlock)
	renewed := randomData(42, blocks*testBlock)
	m := origin.NewMem("mem://o")
	m.Put("/f", old, time.Unix(1700000000, 0))
	release := make(chan struct{})
	var once sync.Once
	// The origin holds back every block from the fourth on until the file
	// has been rewritten.
	m.OnDeliver(func(ctx context.Context, _ string, off int64, _ int) error {
		if off < 4*testBlock {
			return nil
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	c := newTestCache(t, t.TempDir(), m, func(c *Config) { c.Prefetch = 4 })
	f := openTest(t, c, "/f")
	got := make([]byte, len(old))
	done := make(chan error, 1)
	go func() { _, err := f.ReadAt(ctx, got, 0); done <- err }()
	waitBlocks(t, c, 3)
	once.Do(func() {
		m.Put("/f", renewed, time.Unix(1700000100, 0))
		close(release)
	})
	err := <-done
	f.Close()
	switch {
	case err == nil && bytes.Equal(got, old):
		t.Log("the read in flight got the old file whole")
	case err == nil:
		t.Fatal("a read across the rewrite succeeded with a mix of versions")
	case !errors.Is(err, syscall.EIO):
		t.Fatalf("a read across the rewrite failed with %v, want an I/O error", err)
	}
	waitIdle(t, c)
	if all := readAllVia(t, c, "/f"); !bytes.Equal(all, renewed) {
		t.Fatal("the open after the rewrite does not read the new file")
	}
	if c.Stats().Revalidations.Load() == 0 {
		t.Fatal("the rewrite was not noticed")
	}
}
