package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/origin"
)

// outOfDescriptors lowers the process's soft RLIMIT_NOFILE to the lowest
// free descriptor number, so that the next open fails with EMFILE, until
// the returned function (also run at cleanup) restores it.
func outOfDescriptors(tb testing.TB) (restore func()) {
	tb.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		tb.Fatal(err)
	}
	f, err := os.Open(os.DevNull)
	if err != nil {
		tb.Fatal(err)
	}
	low := old
	low.Cur = uint64(f.Fd()) // a new descriptor takes the lowest free number
	f.Close()
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		tb.Fatal(err)
	}
	done := false
	restore = func() {
		if !done {
			done = true
			if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
				tb.Fatal(err)
			}
		}
	}
	tb.Cleanup(restore)
	return restore
}

// TestHitGetsDescriptorsFromLingeringFiles (issue 35 item 3): a hit whose
// sidecar and data file meet EMFILE, while files linger with their data
// files open, makes the oldest of them give their descriptors back and is
// served from the cache. It failed with "too many open files" (its
// sidecar unread, it became a miss whose data file could not be created).
func TestHitGetsDescriptorsFromLingeringFiles(t *testing.T) {
	m := origin.NewMem("mem://o")
	files := map[string][]byte{}
	for i := range 9 {
		p := fmt.Sprintf("/f%d", i)
		files[p] = randomData(uint64(i+1), 4096)
		m.Put(p, files[p], time.Unix(1700000000, 0))
	}
	c := newTestCache(t, t.TempDir(), m, func(cfg *Config) { cfg.CloseLinger = time.Hour })
	readAllVia(t, c, "/f0")
	c.endLingering()
	waitIdle(t, c)
	for i := 1; i < 9; i++ {
		readAllVia(t, c, fmt.Sprintf("/f%d", i)) // each lingers with its data file
	}
	reads, hits := m.Reads.Load(), c.stats.Hits.Load()

	restore := outOfDescriptors(t)
	f, err := c.Open(context.Background(), backend.Request{Path: "/f0"})
	restore()
	if err != nil {
		t.Fatalf("a hit with every descriptor taken and 8 files lingering: %v", err)
	}
	defer f.Close()
	var got bytes.Buffer
	if _, err := f.Stream(context.Background(), 0, 4096, func(b []byte) error { got.Write(b); return nil }); err != nil || !bytes.Equal(got.Bytes(), files["/f0"]) {
		t.Fatalf("read: %v", err)
	}
	if c.stats.Hits.Load() != hits+1 || m.Reads.Load() != reads {
		t.Errorf("hits %d -> %d, origin reads %d -> %d: want a hit served from the cache", hits, c.stats.Hits.Load(), reads, m.Reads.Load())
	}
	if c.stats.FDShortages.Load() == 0 {
		t.Error("no shortage counted")
	}
	if n := c.Lingering(); n > 4 {
		t.Errorf("%d files still lingering, want the oldest half ended", n)
	}
}

// TestHitWithoutDescriptorsIsBusy: with every descriptor taken and no
// lingering file to give one back, a hit is told to come back
// (backend.WaitError: kXR_wait, HTTP 503), and its cached copy is kept:
// the next open is a hit. It failed with EMFILE and the copy was fetched
// again.
func TestHitWithoutDescriptorsIsBusy(t *testing.T) {
	m, data := memWithFile(7, 4096)
	c := newTestCache(t, t.TempDir(), m, nil)
	readAllVia(t, c, "/f")
	waitIdle(t, c)
	reads := m.Reads.Load()

	restore := outOfDescriptors(t)
	f, err := c.Open(context.Background(), backend.Request{Path: "/f"})
	restore()
	var we *backend.WaitError
	if err == nil {
		f.Close()
		t.Fatal("opened with no descriptor left")
	}
	if !errors.As(err, &we) || !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("open with no descriptor left: %v; want a wait (busy) wrapping EMFILE", err)
	}
	if got := readAllVia(t, c, "/f"); !bytes.Equal(got, data) || m.Reads.Load() != reads {
		t.Fatalf("after descriptors came back: %d origin reads (was %d): the copy was not kept", m.Reads.Load(), reads)
	}
}
