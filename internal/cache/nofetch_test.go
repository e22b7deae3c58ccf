package cache

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
)

// TestNoFetch: a request that may only read cached data never makes the
// cache contact the origin for data: not for a file it does not hold, not
// for the missing blocks of a partial file, and not through prefetch; it
// reads what is cached.
func TestNoFetch(t *testing.T) {
	ctx := context.Background()
	m, data := memWithFile(21, 40*testBlock)
	m.Put("/g", data[:testBlock], time.Now())
	dir := t.TempDir()
	warm := newTestCache(t, dir, m, nil)
	ro := backend.Request{Path: "/f", NoFetch: true}

	// Not cached at all: refused before the origin is asked.
	if _, err := warm.Open(ctx, ro); !errors.Is(err, backend.ErrForbidden) || !errors.Is(err, ErrNotCached) {
		t.Fatalf("open of an uncached file with NoFetch: %v", err)
	}
	if n := m.Reads.Load(); n != 0 {
		t.Fatalf("origin saw %d reads", n)
	}

	// A client that may fetch reads the first two blocks through a cache
	// without read-ahead (which, while the file is open, would go on
	// through the whole file); the cache with read-ahead then starts on
	// the same directory with a partial file.
	f, err := warm.Open(ctx, backend.Request{Path: "/f"})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2*testBlock)
	if _, err := f.ReadAt(ctx, buf, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	waitIdle(t, warm)
	warm.Close()
	c := newTestCache(t, dir, m, func(c *Config) { c.Prefetch = 4 })
	before := m.BytesRead.Load()

	// Partial file: cached blocks are served, a missing block is refused,
	// and nothing is prefetched for the NoFetch reader.
	rf, err := c.Open(ctx, ro)
	if err != nil {
		t.Fatalf("open of a partial file with NoFetch: %v", err)
	}
	got := make([]byte, testBlock)
	if _, err := rf.ReadAt(ctx, got, testBlock); err != nil || !bytes.Equal(got, data[testBlock:2*testBlock]) {
		t.Fatalf("cached block: %v", err)
	}
	present := c.files[Key{Origin: "mem://o", Path: "/f"}].st.present.Count()
	_, err = rf.ReadAt(ctx, got, 30*testBlock)
	if !errors.Is(err, backend.ErrForbidden) {
		t.Fatalf("missing block with NoFetch: %v", err)
	}
	rf.Close()
	waitIdle(t, c)
	if after := m.BytesRead.Load(); after != before {
		t.Fatalf("NoFetch reader made the origin send %d bytes", after-before)
	}
	if present != 2 {
		t.Fatalf("expected the two cached blocks present, have %d", present)
	}

	// Once complete, NoFetch reads everything.
	readAllVia(t, c, "/f")
	waitIdle(t, c)
	rf, err = c.Open(ctx, ro)
	if err != nil {
		t.Fatal(err)
	}
	all := make([]byte, len(data))
	if _, err := rf.ReadAt(ctx, all, 0); err != nil || !bytes.Equal(all, data) {
		t.Fatalf("complete file with NoFetch: %v", err)
	}
	rf.Close()
}
