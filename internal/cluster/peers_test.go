package cluster

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/origin"
)

// sharedCacheNode is one worker node of seed 003's layout 3: a real cache
// on its own directory whose misses ask the peers first.
type sharedCacheNode struct {
	node   Node
	dir    string
	cache  *cache.Cache
	peers  *PeerLookup
	router *Router
}

func newSharedCacheCluster(tb testing.TB, mem *origin.Mem, n int) ([]*sharedCacheNode, *Loopback) {
	tb.Helper()
	loop := NewLoopback()
	var nodes []Node
	for i := range n {
		nodes = append(nodes, Node{Name: fmt.Sprintf("wn%d", i), Role: RoleCache,
			Root: fmt.Sprintf("127.0.0.%d:1094", i+2), Gossip: fmt.Sprintf("127.0.0.%d:7946", i+2)})
	}
	quiet := slog.New(slog.DiscardHandler)
	var out []*sharedCacheNode
	for _, self := range nodes {
		members := Static{V: NewView(self, nodes, 1, time.Now())}
		pl, err := NewPeerLookup(&PeerLookupConfig{Members: members, Dial: loop.Dialer(self.Root), Logger: quiet})
		if err != nil {
			tb.Fatal(err)
		}
		dir := tb.TempDir()
		c, err := cache.New(&cache.Config{
			Dir: dir,
			Origins: pl.Resolver(origin.ResolverFunc(func(ctx context.Context, u string) (origin.Origin, error) {
				return mem, nil
			})),
			BlockSize: 64 << 10, PieceSize: 16 << 10, Prefetch: -1, FetchMemory: 4 << 20,
			SyncInterval: time.Hour, VerifyChecksum: "none", Logger: quiet,
		})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { c.Close() })
		r, err := NewRouter(&RouterConfig{Members: members, Local: c, Mode: ModeLocal, DefaultOrigin: "root://origin.example:1094", Logger: quiet})
		if err != nil {
			tb.Fatal(err)
		}
		loop.Register(self.Root, r)
		out = append(out, &sharedCacheNode{node: self, dir: dir, cache: c, peers: pl, router: r})
	}
	return out, loop
}

func readVia(tb testing.TB, b backend.Backend, p string) []byte {
	tb.Helper()
	f, err := b.Open(context.Background(), backend.Request{Path: p, Protocol: "root"})
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	return readAll(tb, f)
}

// waitComplete waits until the cache in dir records p as complete.
func waitComplete(tb testing.TB, dir, originURL, p string) {
	tb.Helper()
	waitUntil(tb, func() bool {
		in, err := cache.Inspect(dir, originURL, p)
		return err == nil && in[0].Complete()
	})
}

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestSharedCacheMissServedByPeer(t *testing.T) {
	mem := origin.NewMem("root://origin.example:1094")
	data := randomBytes(1, 300<<10+17)
	mem.Put("/store/a.root", data, time.Unix(1_700_000_000, 0))
	ns, loop := newSharedCacheCluster(t, mem, 3)

	// Worker node 0 misses: nobody has it, the origin serves.
	if got := readVia(t, ns[0].router, "/store/a.root"); !bytes.Equal(got, data) {
		t.Fatal("first read differs")
	}
	if ns[0].peers.Stats().Misses.Load() != 1 || mem.BytesRead.Load() != int64(len(data)) {
		t.Fatalf("first read: peer misses %d, origin bytes %d", ns[0].peers.Stats().Misses.Load(), mem.BytesRead.Load())
	}
	waitComplete(t, ns[0].dir, mem.String(), "/store/a.root")

	// Worker node 1 misses: node 0 has it, the origin is not asked.
	if got := readVia(t, ns[1].router, "/store/a.root"); !bytes.Equal(got, data) {
		t.Fatal("peer-served read differs")
	}
	if ns[1].peers.Stats().Hits.Load() != 1 || mem.BytesRead.Load() != int64(len(data)) || mem.Opens.Load() != 1 {
		t.Fatalf("second read: peer hits %d, origin bytes %d, opens %d", ns[1].peers.Stats().Hits.Load(), mem.BytesRead.Load(), mem.Opens.Load())
	}
	if ns[0].router.Stats().PeerServed.Load() != 1 {
		t.Fatalf("node 0 served %d peer lookups", ns[0].router.Stats().PeerServed.Load())
	}
	// Node 1 cached it too: a hit there needs nobody.
	waitComplete(t, ns[1].dir, mem.String(), "/store/a.root")

	// The origin is down and node 2 misses: served by a peer.
	mem.Fail(fmt.Errorf("down: %w", origin.ErrUnavailable))
	if got := readVia(t, ns[2].router, "/store/a.root"); !bytes.Equal(got, data) {
		t.Fatal("read with the origin down differs")
	}
	mem.Fail(nil)

	// A peer that dies during a read: the rest comes from the origin.
	mem.Put("/store/b.root", data, time.Unix(1_700_000_000, 0))
	readVia(t, ns[0].router, "/store/b.root")
	waitComplete(t, ns[0].dir, mem.String(), "/store/b.root")
	f, err := ns[1].router.Open(context.Background(), backend.Request{Path: "/store/b.root", Protocol: "root"})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1000)
	if _, err := f.ReadAt(context.Background(), buf, 0); err != nil {
		t.Fatal(err)
	}
	loop.SetDown(ns[0].node.Root, true)
	before := mem.BytesRead.Load()
	if got := readAll(t, f); !bytes.Equal(got, data) {
		t.Fatal("read across the peer's failure differs")
	}
	f.Close()
	if ns[1].peers.Stats().Fallbacks.Load() != 1 || mem.BytesRead.Load() == before {
		t.Fatalf("fallbacks %d, origin bytes %d -> %d", ns[1].peers.Stats().Fallbacks.Load(), before, mem.BytesRead.Load())
	}
}
