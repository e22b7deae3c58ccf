package notfound

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hepcache/hepcache/origin"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTest(t *testing.T, mutate func(*Config)) (*Resolver, *origin.Mem, *clock) {
	t.Helper()
	mem := origin.NewMem("mem://a")
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	cfg := &Config{now: clk.now}
	if mutate != nil {
		mutate(cfg)
	}
	r, err := New(cfg, origin.ResolverFunc(func(context.Context, string) (origin.Origin, error) { return mem, nil }))
	if err != nil {
		t.Fatal(err)
	}
	return r, mem, clk
}

func TestRemembersNotFoundUntilTTL(t *testing.T) {
	ctx := context.Background()
	r, mem, clk := newTest(t, nil)
	o, err := r.Resolve(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Stat(ctx, "/missing"); !errors.Is(err, origin.ErrNotFound) {
		t.Fatalf("first stat: %v, want not found", err)
	}
	calls := mem.Lookups.Load()
	// Within the TTL neither stat nor open reaches the origin, and both
	// still say "not found".
	if _, err := o.Stat(ctx, "/missing"); !errors.Is(err, origin.ErrNotFound) {
		t.Fatalf("remembered stat: %v", err)
	}
	if _, err := o.Open(ctx, "/missing"); !errors.Is(err, origin.ErrNotFound) {
		t.Fatalf("remembered open: %v", err)
	}
	if got := mem.Lookups.Load(); got != calls {
		t.Fatalf("origin asked again within the TTL: %d -> %d lookups", calls, got)
	}
	if r.Stats().Hits.Load() != 2 || r.Stats().Remembered.Load() != 1 {
		t.Fatalf("hits %d remembered %d, want 2 and 1", r.Stats().Hits.Load(), r.Stats().Remembered.Load())
	}
	// The file appears at the origin: still hidden until the TTL ends,
	// then found.
	mem.Put("/missing", []byte("now here"), clk.t)
	clk.t = clk.t.Add(defaultTTL - time.Second)
	if _, err := o.Open(ctx, "/missing"); !errors.Is(err, origin.ErrNotFound) {
		t.Fatalf("open before the TTL ended: %v", err)
	}
	clk.t = clk.t.Add(time.Second)
	f, err := o.Open(ctx, "/missing")
	if err != nil {
		t.Fatalf("open after the TTL: %v", err)
	}
	f.Close()
}

func TestOtherErrorsAndSuccessAreNotRemembered(t *testing.T) {
	ctx := context.Background()
	r, mem, _ := newTest(t, nil)
	o, _ := r.Resolve(ctx, "")
	mem.Fail(fmt.Errorf("link down: %w", origin.ErrUnavailable))
	if _, err := o.Stat(ctx, "/f"); !errors.Is(err, origin.ErrUnavailable) {
		t.Fatalf("stat: %v", err)
	}
	mem.Fail(nil)
	mem.Put("/f", []byte("x"), time.Now())
	if _, err := o.Stat(ctx, "/f"); err != nil {
		t.Fatalf("an unavailable origin must not be remembered as not found: %v", err)
	}
	if r.Stats().Remembered.Load() != 0 {
		t.Fatalf("remembered %d answers, want 0", r.Stats().Remembered.Load())
	}
	// A cancelled request proves nothing about the path.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	o.Stat(cctx, "/gone")
	if r.Stats().Remembered.Load() != 0 {
		t.Fatal("a cancelled request was remembered")
	}
}

func TestPerOriginTTLAndOff(t *testing.T) {
	ctx := context.Background()
	r, mem, _ := newTest(t, func(c *Config) { c.PerOrigin = map[string]time.Duration{"mem://a": -1} })
	o, _ := r.Resolve(ctx, "")
	if o != origin.Origin(mem) {
		t.Fatal("an origin with negative caching off must not be wrapped")
	}
	r2, mem2, _ := newTest(t, func(c *Config) { c.TTL = -1 })
	if o, _ := r2.Resolve(ctx, ""); o != origin.Origin(mem2) {
		t.Fatal("negative caching turned off globally must not wrap the origin")
	}
	r3, mem3, _ := newTest(t, func(c *Config) { c.TTL = -1; c.PerOrigin = map[string]time.Duration{"mem://a": time.Minute} })
	o3, _ := r3.Resolve(ctx, "")
	o3.Stat(ctx, "/x")
	o3.Stat(ctx, "/x")
	if n := mem3.Lookups.Load(); n != 1 {
		t.Fatalf("a per-origin TTL must turn it on for that origin: %d origin lookups, want 1", n)
	}
}

func TestBoundedEntries(t *testing.T) {
	ctx := context.Background()
	r, _, _ := newTest(t, func(c *Config) { c.MaxEntries = 3 })
	o, _ := r.Resolve(ctx, "")
	for i := range 100 {
		o.Stat(ctx, fmt.Sprintf("/m%d", i))
	}
	n := o.(*negOrigin)
	n.mu.Lock()
	seen, queued := len(n.seen), len(n.order)
	n.mu.Unlock()
	if seen != 3 {
		t.Fatalf("remembers %d paths, want the newest 3", seen)
	}
	if queued > 2*3+16 {
		t.Fatalf("order queue holds %d entries: not compacted", queued)
	}
	if _, ok := n.remembered("/m99"); !ok {
		t.Fatal("newest path forgotten")
	}
	if _, ok := n.remembered("/m0"); ok {
		t.Fatal("oldest path kept")
	}
}
