package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/policy"
	"github.com/hepcache/hepcache/origin"
)

func TestOpenCachedServesOnlyCompleteFiles(t *testing.T) {
	m := origin.NewMem("mem://o")
	data := randomData(61, 3*testBlock+5)
	m.Put("/store/full", data, time.Unix(1_700_000_000, 0))
	m.Put("/store/part", data, time.Unix(1_700_000_000, 0))
	m.Put("/store/cold", data, time.Unix(1_700_000_000, 0))
	c := newTestCache(t, t.TempDir(), m, nil)
	ctx := context.Background()
	readAllVia(t, c, "/store/full")
	f, err := c.Open(ctx, backend.Request{Path: "/store/part"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAt(ctx, make([]byte, 10), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	waitIdle(t, c)

	// The peer lookup never reaches the origin, even when it is down.
	m.Fail(fmt.Errorf("down: %w", origin.ErrUnavailable))
	opens := m.Opens.Load()
	for _, p := range []string{"/store/part", "/store/cold", "/store/none"} {
		if _, err := c.OpenCached(ctx, "mem://o", p); !errors.Is(err, origin.ErrNotFound) {
			t.Errorf("OpenCached(%s) = %v, want not found", p, err)
		}
	}
	if _, err := c.OpenCached(ctx, "mem://other", "/store/full"); !errors.Is(err, origin.ErrNotFound) {
		t.Errorf("another origin's key: %v", err)
	}
	f, err = c.OpenCached(ctx, "mem://o", "/store/full")
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if _, err := f.Stream(ctx, 0, f.Info().Size, func(b []byte) error { got.Write(b); return nil }); err != nil {
		t.Fatal(err)
	}
	// While the peer reads, a local client shares the entry.
	if b := readAllVia(t, c, "/store/full"); !bytes.Equal(b, data) {
		t.Fatal("local read during a peer read differs")
	}
	f.Close()
	if !bytes.Equal(got.Bytes(), data) || m.Opens.Load() != opens {
		t.Fatalf("peer read: equal=%v, origin opens %d -> %d", bytes.Equal(got.Bytes(), data), opens, m.Opens.Load())
	}
}

// TestStaleIfError: with the origin unreachable, cached files are served
// and stat answered, also for mutable paths that are normally revalidated;
// a file the origin says is gone is not.
func TestStaleIfError(t *testing.T) {
	pol, err := policy.New([]policy.Rule{{Prefix: "/user/", Mutable: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := origin.NewMem("mem://o")
	data := randomData(67, 2*testBlock)
	t0 := time.Unix(1_700_000_000, 0)
	m.Put("/user/f", data, t0)
	m.Put("/store/f", data, t0)
	c := newTestCache(t, t.TempDir(), m, func(cfg *Config) { cfg.Policy = pol })
	ctx := context.Background()
	readAllVia(t, c, "/user/f")
	readAllVia(t, c, "/store/f")
	waitIdle(t, c)

	m.Fail(fmt.Errorf("connect: %w", origin.ErrUnavailable))
	for _, p := range []string{"/user/f", "/store/f"} {
		if got := readAllVia(t, c, p); !bytes.Equal(got, data) {
			t.Fatalf("%s: stale copy not served", p)
		}
		fi, err := c.Stat(ctx, backend.Request{Path: p})
		if err != nil || fi.Size != int64(len(data)) || !fi.ModTime.Equal(t0) {
			t.Fatalf("stat %s with the origin down: %+v %v", p, fi, err)
		}
		if sum, err := c.Checksum(ctx, backend.Request{Path: p}, "adler32"); err != nil || sum == "" {
			t.Fatalf("checksum %s with the origin down: %q %v", p, sum, err)
		}
	}
	// Not cached: the origin's error.
	if _, err := c.Stat(ctx, backend.Request{Path: "/user/other"}); !errors.Is(err, origin.ErrUnavailable) {
		t.Fatalf("uncached stat: %v", err)
	}
	// The origin answers "not found": the file is gone, no stale answer.
	m.Fail(nil)
	m.Remove("/user/f")
	if _, err := c.Stat(ctx, backend.Request{Path: "/user/f"}); !errors.Is(err, origin.ErrNotFound) {
		t.Fatalf("stat of a removed mutable file: %v", err)
	}
}
