package federation

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/cluster"
	"github.com/hepcache/hepcache/origin"
)

var quiet = slog.New(slog.DiscardHandler)

// counting wraps an Origin and records the paths it was asked for.
type counting struct {
	origin.Origin
	mu    sync.Mutex
	paths []string
	calls atomic.Int64
}

func (c *counting) note(p string) {
	c.calls.Add(1)
	c.mu.Lock()
	c.paths = append(c.paths, p)
	c.mu.Unlock()
}

// Open records p and opens it without the opaque data, as a server would.
func (c *counting) Open(ctx context.Context, p string) (origin.File, error) {
	c.note(p)
	p, _, _ = strings.Cut(p, "?")
	return c.Origin.Open(ctx, p)
}

func (c *counting) Stat(ctx context.Context, p string) (origin.FileInfo, error) {
	c.note(p)
	p, _, _ = strings.Cut(p, "?")
	return c.Origin.Stat(ctx, p)
}

func newFailover(tb testing.TB, ups map[string]origin.Origin, order []string, clock *time.Time) *Failover {
	tb.Helper()
	f, err := NewFailover(&FailoverConfig{
		Name:      "root://origin.example:1094",
		Upstreams: order,
		Dial: func(ctx context.Context, u string) (origin.Origin, error) {
			o, ok := ups[u]
			if !ok {
				return nil, fmt.Errorf("no route to %s: %w", u, origin.ErrUnavailable)
			}
			return o, nil
		},
		RetryAfter: time.Minute,
		Logger:     quiet,
		now:        func() time.Time { return *clock },
	})
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

func TestFailoverPreferenceOrder(t *testing.T) {
	data := bytes.Repeat([]byte("x"), 1000)
	regMem, orgMem := origin.NewMem("root://regional:1094"), origin.NewMem("root://origin.example:1094")
	regMem.Put("/f", data, time.Unix(1e9, 0))
	orgMem.Put("/f", data, time.Unix(1e9, 0))
	reg, org := &counting{Origin: regMem}, &counting{Origin: orgMem}
	clock := time.Unix(2e9, 0)
	f := newFailover(t, map[string]origin.Origin{"root://regional:1094": reg, "root://origin.example:1094": org},
		[]string{"root://dead:1094", "root://regional:1094", "root://origin.example:1094"}, &clock)
	ctx := context.Background()

	if f.String() != "root://origin.example:1094" {
		t.Fatalf("String() = %q: the cache key must not depend on the upstream", f.String())
	}
	// The first upstream cannot be dialled: the regional cache serves.
	if _, err := f.Stat(ctx, "/f"); err != nil || reg.calls.Load() != 1 || org.calls.Load() != 0 {
		t.Fatalf("stat: %v (regional %d, origin %d)", err, reg.calls.Load(), org.calls.Load())
	}
	// Regional down too: the origin serves, and the two are skipped.
	regMem.Fail(fmt.Errorf("connection refused: %w", origin.ErrUnavailable))
	if _, err := f.Stat(ctx, "/f"); err != nil || org.calls.Load() != 1 {
		t.Fatalf("stat with regional down: %v", err)
	}
	for range 3 {
		if _, err := f.Stat(ctx, "/f"); err != nil {
			t.Fatal(err)
		}
	}
	if reg.calls.Load() != 2 || org.calls.Load() != 4 {
		t.Fatalf("down upstream retried before RetryAfter: regional %d, origin %d", reg.calls.Load(), org.calls.Load())
	}
	// After RetryAfter the preferred upstream gets requests again.
	regMem.Fail(nil)
	clock = clock.Add(2 * time.Minute)
	if _, err := f.Stat(ctx, "/f"); err != nil || reg.calls.Load() != 3 {
		t.Fatalf("regional not retried: %v (%d)", err, reg.calls.Load())
	}
	// Not found is an answer: no failover.
	if _, err := f.Stat(ctx, "/missing"); !errors.Is(err, origin.ErrNotFound) || org.calls.Load() != 4 {
		t.Fatalf("missing file: %v, origin asked %d", err, org.calls.Load())
	}
	// Every upstream down: the error says so and wraps the causes.
	regMem.Fail(fmt.Errorf("down: %w", origin.ErrUnavailable))
	orgMem.Fail(fmt.Errorf("down: %w", origin.ErrUnavailable))
	if _, err := f.Stat(ctx, "/f"); !errors.Is(err, origin.ErrUnavailable) || !strings.Contains(err.Error(), "every upstream failed") {
		t.Fatalf("all down: %v", err)
	}
}

func TestFailoverMidRead(t *testing.T) {
	data := make([]byte, 4096)
	for i := range data {
		data[i] = byte(i * 7)
	}
	regMem, orgMem := origin.NewMem("root://regional:1094"), origin.NewMem("root://origin.example:1094")
	regMem.Put("/f", data, time.Unix(1e9, 0))
	orgMem.Put("/f", data, time.Unix(1e9, 0))
	clock := time.Unix(2e9, 0)
	f := newFailover(t, map[string]origin.Origin{"root://regional:1094": regMem, "root://origin.example:1094": orgMem},
		[]string{"root://regional:1094", "root://origin.example:1094"}, &clock)
	ctx := context.Background()
	of, err := f.Open(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer of.Close()
	buf := make([]byte, 100)
	if _, err := of.ReadAt(ctx, buf, 0); err != nil {
		t.Fatal(err)
	}
	regMem.Fail(fmt.Errorf("reset: %w", origin.ErrUnavailable))
	if _, err := of.ReadAt(ctx, buf, 1000); err != nil || !bytes.Equal(buf, data[1000:1100]) {
		t.Fatalf("read after the upstream failed: %v", err)
	}
	segs := []origin.Segment{{Offset: 10, Buf: make([]byte, 10)}, {Offset: 4000, Buf: make([]byte, 96)}}
	if err := of.ReadV(ctx, segs); err != nil || !bytes.Equal(segs[1].Buf, data[4000:]) {
		t.Fatalf("readv: %v", err)
	}
	if f.Stats().Reopens.Load() != 1 {
		t.Fatalf("reopens %d", f.Stats().Reopens.Load())
	}
	// A copy of another size is not used.
	orgMem.Put("/g", data[:10], time.Unix(1e9, 0))
	regMem.Fail(nil)
	clock = clock.Add(time.Hour)
	regMem.Put("/g", data, time.Unix(1e9, 0))
	og, err := f.Open(ctx, "/g")
	if err != nil {
		t.Fatal(err)
	}
	regMem.Fail(fmt.Errorf("reset: %w", origin.ErrUnavailable))
	if _, err := og.ReadAt(ctx, buf, 0); err == nil {
		t.Fatal("read from a copy of another size")
	}
	og.Close()
}

func TestGuard(t *testing.T) {
	var gotVia []string
	next := backendFunc(func(ctx context.Context) error { gotVia = ViaFrom(ctx); return nil })
	g := NewGuard(next, "site", 3)
	ctx := context.Background()
	for _, tc := range []struct {
		opaque string
		loop   bool
		via    []string
	}{
		{"", false, []string{"site"}},
		{"authz=x&hc.via=a,b", false, []string{"a", "b", "site"}},
		{"hc.via=a,site", true, nil},
		{"hc.via=a,b,c", true, nil},
	} {
		gotVia = nil
		_, err := g.Stat(ctx, backend.Request{Path: "/f", Opaque: tc.opaque})
		if tc.loop != errors.Is(err, ErrLoop) {
			t.Errorf("opaque %q: %v", tc.opaque, err)
		}
		if tc.loop && !errors.Is(err, origin.ErrInvalid) {
			t.Errorf("a loop error must wrap origin.ErrInvalid: %v", err)
		}
		if !tc.loop && strings.Join(gotVia, ",") != strings.Join(tc.via, ",") {
			t.Errorf("opaque %q: via in context %v, want %v", tc.opaque, gotVia, tc.via)
		}
	}
}

// backendFunc is a Backend whose every method calls fn.
type backendFunc func(ctx context.Context) error

func (f backendFunc) Open(ctx context.Context, req backend.Request) (backend.File, error) {
	return nil, f(ctx)
}
func (f backendFunc) Stat(ctx context.Context, req backend.Request) (origin.FileInfo, error) {
	return origin.FileInfo{}, f(ctx)
}
func (f backendFunc) List(ctx context.Context, req backend.Request, withStat bool) ([]origin.FileInfo, error) {
	return nil, f(ctx)
}
func (f backendFunc) Checksum(ctx context.Context, req backend.Request, algo string) (string, error) {
	return "", f(ctx)
}

// chainNode is a cache behind a Guard whose origin is resolved by fn.
func chainNode(tb testing.TB, name string, o func() origin.Origin) backend.Backend {
	tb.Helper()
	c, err := cache.New(&cache.Config{
		Dir: tb.TempDir(),
		Origins: origin.ResolverFunc(func(ctx context.Context, u string) (origin.Origin, error) {
			return ViaOrigin(o(), name), nil
		}),
		BlockSize: 64 << 10, PieceSize: 16 << 10, Prefetch: -1, FetchMemory: 4 << 20,
		SyncInterval: time.Hour, VerifyChecksum: "none", Logger: quiet,
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return NewGuard(c, name, 0)
}

// TestChainAndLoop: site -> regional -> origin serves through both caches;
// two caches configured as each other's origin refuse the loop instead of
// recursing.
func TestChainAndLoop(t *testing.T) {
	loop := cluster.NewLoopback()
	mem := origin.NewMem("root://origin.example:1094")
	data := bytes.Repeat([]byte("hep"), 50000)
	mem.Put("/store/f", data, time.Unix(1e9, 0))
	viaSeen := &counting{Origin: mem}
	regional := chainNode(t, "regional", func() origin.Origin { return viaSeen })
	loop.Register("regional:1094", regional)
	site := chainNode(t, "site", func() origin.Origin {
		o, _ := loop.Dialer("site:1")(context.Background(), "regional:1094")
		return o
	})
	f, err := site.Open(context.Background(), backend.Request{Path: "/store/f"})
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if _, err := f.Stream(context.Background(), 0, f.Info().Size, func(p []byte) error { got.Write(p); return nil }); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if !bytes.Equal(got.Bytes(), data) {
		t.Fatal("data through the chain differs")
	}
	if p := viaSeen.paths[0]; p != "/store/f?hc.via=site,regional" {
		t.Fatalf("the origin was asked for %q", p)
	}

	// a's origin is b and b's is a.
	var a, b backend.Backend
	a = chainNode(t, "a", func() origin.Origin { o, _ := loop.Dialer("a:1")(context.Background(), "b:1094"); return o })
	b = chainNode(t, "b", func() origin.Origin { o, _ := loop.Dialer("b:1")(context.Background(), "a:1094"); return o })
	loop.Register("a:1094", a)
	loop.Register("b:1094", b)
	_, err = a.Open(context.Background(), backend.Request{Path: "/store/f"})
	if !errors.Is(err, ErrLoop) {
		t.Fatalf("loop: %v", err)
	}
	t.Logf("loop refused: %v", err)
}
