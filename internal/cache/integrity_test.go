package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/adler32"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/policy"
	"github.com/hepcache/hepcache/internal/sidecar"
	"github.com/hepcache/hepcache/origin"
)

func sidecarOf(tb testing.TB, c *Cache, p string) *sidecar.Info {
	tb.Helper()
	in := c.readSidecar(Key{Origin: "mem://o", Path: p})
	if in == nil {
		tb.Fatalf("no sidecar for %s", p)
	}
	return in
}

func TestChecksumVerifiedAndServedFromCache(t *testing.T) {
	m, data := memWithFile(31, 3*testBlock+17)
	c := newTestCache(t, t.TempDir(), m, nil)
	readAllVia(t, c, "/f")
	waitIdle(t, c)
	in := sidecarOf(t, c, "/f")
	want := fmt.Sprintf("%08x", adler32.Checksum(data))
	if in.ChecksumState != sidecar.ChecksumVerified || fmt.Sprintf("%08x", in.Adler32) != want {
		t.Fatalf("sidecar checksum %v %08x, want verified %s", in.ChecksumState, in.Adler32, want)
	}
	m.Fail(origin.ErrUnavailable)
	got, err := c.Checksum(context.Background(), backend.Request{Path: "/f"}, "adler32")
	if err != nil || got != want {
		t.Fatalf("checksum from cache with origin down: %q %v, want %s", got, err, want)
	}
}

func TestChecksumMismatchDropsCachedCopy(t *testing.T) {
	m, data := memWithFile(37, 2*testBlock)
	m.SetChecksum("/f", "adler32", "deadbeef")
	c := newTestCache(t, t.TempDir(), m, nil)
	if got := readAllVia(t, c, "/f"); !bytes.Equal(got, data) {
		t.Fatal("first read wrong")
	}
	waitIdle(t, c)
	if c.Stats().ChecksumFailures.Load() != 1 {
		t.Fatalf("checksum failures = %d, want 1", c.Stats().ChecksumFailures.Load())
	}
	// Dropped: removed, or (if a client still had it open) with no block.
	if in := c.readSidecar(Key{Origin: "mem://o", Path: "/f"}); in != nil && in.Durable.Count() != 0 {
		t.Fatalf("mismatching copy kept %d blocks", in.Durable.Count())
	}
	before := m.BytesRead.Load()
	if got := readAllVia(t, c, "/f"); !bytes.Equal(got, data) {
		t.Fatal("read after drop wrong")
	}
	if m.BytesRead.Load() == before {
		t.Fatal("dropped copy was served from the cache")
	}
}

func TestMutableNamespaceRevalidates(t *testing.T) {
	pol, err := policy.New([]policy.Rule{{Prefix: "/user/", Mutable: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := origin.NewMem("mem://o")
	v1, v2 := randomData(41, testBlock), randomData(43, testBlock+5)
	t0 := time.Unix(1_700_000_000, 0)
	m.Put("/user/f", v1, t0)
	m.Put("/store/f", v1, t0)
	c := newTestCache(t, t.TempDir(), m, func(cfg *Config) { cfg.Policy = pol })
	readAllVia(t, c, "/user/f")
	readAllVia(t, c, "/store/f")
	waitIdle(t, c)
	m.Put("/user/f", v2, t0.Add(time.Hour))
	m.Put("/store/f", v2, t0.Add(time.Hour))
	if got := readAllVia(t, c, "/user/f"); !bytes.Equal(got, v2) {
		t.Fatal("mutable path served the stale copy")
	}
	if c.Stats().Revalidations.Load() != 1 {
		t.Fatalf("revalidations=%d want 1", c.Stats().Revalidations.Load())
	}
	// Immutable by default: the cached copy is served without asking.
	if got := readAllVia(t, c, "/store/f"); !bytes.Equal(got, v1) {
		t.Fatal("immutable path was revalidated")
	}
}

func TestPassThroughAndDeny(t *testing.T) {
	pol, err := policy.New([]policy.Rule{
		{Prefix: "/pileup/", Action: policy.PassThrough},
		{Prefix: "/secret/", Action: policy.Deny},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := origin.NewMem("mem://o")
	data := randomData(47, 2*testBlock+1)
	m.Put("/pileup/f", data, time.Now())
	m.Put("/secret/f", data, time.Now())
	c := newTestCache(t, t.TempDir(), m, func(cfg *Config) { cfg.Policy = pol })
	for i := 0; i < 2; i++ {
		if got := readAllVia(t, c, "/pileup/f"); !bytes.Equal(got, data) {
			t.Fatal("pass-through bytes wrong")
		}
	}
	if files, _ := c.catalog.Totals(); files != 0 {
		t.Fatalf("pass-through file was cached (%d files)", files)
	}
	if got := c.Stats().BytesBypassed.Load(); got != int64(2*len(data)) {
		t.Fatalf("bypassed %d want %d", got, 2*len(data))
	}
	if m.BytesRead.Load() != int64(2*len(data)) {
		t.Fatal("second pass-through read did not go to the origin")
	}
	if _, err := c.Open(context.Background(), backend.Request{Path: "/secret/f"}); !errors.Is(err, backend.ErrForbidden) {
		t.Fatalf("denied path: %v", err)
	}
	if _, err := c.Stat(context.Background(), backend.Request{Path: "/secret/f"}); !errors.Is(err, backend.ErrForbidden) {
		t.Fatalf("denied stat: %v", err)
	}
}

func TestNameMappingToOtherOrigin(t *testing.T) {
	pol, err := policy.New(nil, []policy.MapRule{{Match: `^/store/(.*)$`, Replace: "/pnfs/cms/$1"}})
	if err != nil {
		t.Fatal(err)
	}
	m := origin.NewMem("mem://o")
	data := randomData(53, 100)
	m.Put("/pnfs/cms/x.root", data, time.Now())
	c := newTestCache(t, t.TempDir(), m, func(cfg *Config) { cfg.Policy = pol })
	if got := readAllVia(t, c, "/store/x.root"); !bytes.Equal(got, data) {
		t.Fatal("mapped read wrong")
	}
	if _, ok := c.catalog.Lookup(Key{Origin: "mem://o", Path: "/pnfs/cms/x.root"}); !ok {
		t.Fatal("cache key is not the physical name")
	}
}
