package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/origin"
)

// memBackend serves an origin.Mem directly and counts what it served; the
// files in cached are what OpenCached finds.
type memBackend struct {
	mem    *origin.Mem
	opens  atomic.Int64
	stats  atomic.Int64
	mu     sync.Mutex
	cached map[string]bool
}

func (b *memBackend) Open(ctx context.Context, req backend.Request) (backend.File, error) {
	f, err := b.mem.Open(ctx, req.Path)
	if err != nil {
		return nil, err
	}
	b.opens.Add(1)
	return fileOf(f), nil
}

func (b *memBackend) OpenCached(ctx context.Context, o, p string) (backend.File, error) {
	b.mu.Lock()
	ok := b.cached[o+p]
	b.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%s%s: %w", o, p, origin.ErrNotFound)
	}
	return b.Open(ctx, backend.Request{Path: p})
}

func (b *memBackend) Stat(ctx context.Context, req backend.Request) (origin.FileInfo, error) {
	b.stats.Add(1)
	return b.mem.Stat(ctx, req.Path)
}

func (b *memBackend) List(ctx context.Context, req backend.Request, withStat bool) ([]origin.FileInfo, error) {
	return b.mem.List(ctx, req.Path, withStat)
}

func (b *memBackend) Checksum(ctx context.Context, req backend.Request, algo string) (string, error) {
	return b.mem.Checksum(ctx, req.Path, algo)
}

// memFile adapts an origin.File to backend.File.
type memFile struct{ origin.File }

func fileOf(f origin.File) backend.File { return memFile{f} }

func (f memFile) Stream(ctx context.Context, off, n int64, fn func([]byte) error) (int64, error) {
	buf := make([]byte, n)
	m, err := f.ReadAt(ctx, buf, off)
	if err != nil && err != io.EOF {
		return 0, err
	}
	return int64(m), fn(buf[:m])
}

// swapMembers is a Members whose view a test changes.
type swapMembers struct{ v atomic.Pointer[View] }

func (s *swapMembers) View() *View { return s.v.Load() }

// testCluster is n in-process nodes over one in-memory origin.
type testCluster struct {
	mem     *origin.Mem
	loop    *Loopback
	nodes   []Node
	locals  []*memBackend
	routers []*Router
	members []*swapMembers
}

func newTestCluster(tb testing.TB, n int, mode Mode) *testCluster {
	tb.Helper()
	tc := &testCluster{mem: origin.NewMem("root://origin.example:1094"), loop: NewLoopback()}
	for i := range n {
		tc.nodes = append(tc.nodes, Node{
			Name:   fmt.Sprintf("n%d", i),
			Role:   RoleCache,
			Root:   fmt.Sprintf("127.0.0.%d:1094", i+2),
			HTTP:   fmt.Sprintf("http://127.0.0.%d:8080", i+2),
			Gossip: fmt.Sprintf("127.0.0.%d:7946", i+2),
		})
	}
	for _, self := range tc.nodes {
		sm := &swapMembers{}
		sm.v.Store(NewView(self, tc.nodes, 1, time.Now()))
		lb := &memBackend{mem: tc.mem, cached: map[string]bool{}}
		r, err := NewRouter(&RouterConfig{
			Members:       sm,
			Local:         lb,
			Mode:          mode,
			DefaultOrigin: "root://origin.example",
			Dial:          tc.loop.Dialer(self.Root),
			Logger:        slog.New(slog.DiscardHandler),
		})
		if err != nil {
			tb.Fatal(err)
		}
		tc.loop.Register(self.Root, r)
		tc.locals = append(tc.locals, lb)
		tc.routers = append(tc.routers, r)
		tc.members = append(tc.members, sm)
	}
	return tc
}

// index returns the index of the node called name.
func (tc *testCluster) index(name string) int {
	for i, n := range tc.nodes {
		if n.Name == name {
			return i
		}
	}
	return -1
}

// fileOwnedBy returns a path whose ranking starts with the given nodes.
func (tc *testCluster) fileOwnedBy(tb testing.TB, first ...int) string {
	tb.Helper()
	v := tc.members[0].View()
	for i := range 10000 {
		p := fmt.Sprintf("/store/f%d.root", i)
		r := v.Rank("root://origin.example:1094/" + p)
		_, err := tc.mem.Stat(context.Background(), p)
		ok := err != nil // not used yet
		for j, want := range first {
			if r[j].Name != tc.nodes[want].Name {
				ok = false
			}
		}
		if ok {
			return p
		}
	}
	tb.Fatal("no such path")
	return ""
}

func TestRouterRedirectsToOwner(t *testing.T) {
	tc := newTestCluster(t, 3, ModeRedirect)
	ctx := context.Background()
	p := tc.fileOwnedBy(t, 1)
	tc.mem.Put(p, []byte("data"), time.Unix(1e9, 0))

	// At a non-owner: kXR_redirect to the owner's root:// address.
	_, err := tc.routers[0].Open(ctx, backend.Request{Path: p, Protocol: "root", Opaque: "authz=tok"})
	var re *backend.RedirectError
	if !errors.As(err, &re) {
		t.Fatalf("Open at a non-owner: %v, want a redirect", err)
	}
	if re.Host != "127.0.0.3" || re.Port != 1094 || !strings.HasSuffix(re.URL, "?hc.rd=n0") {
		t.Fatalf("redirect = %+v", re)
	}
	// Stat and checksum go the same way (kXR_locate names the owner).
	if _, err := tc.routers[0].Stat(ctx, backend.Request{Path: p, Protocol: "root"}); !errors.As(err, &re) || re.Host != "127.0.0.3" {
		t.Fatalf("Stat at a non-owner: %v", err)
	}
	// HTTP: 307 to the owner's HTTP URL, the client's query kept.
	_, err = tc.routers[2].Open(ctx, backend.Request{Path: p, Protocol: "https", Opaque: "authz=tok"})
	if !errors.As(err, &re) || re.URL != "http://127.0.0.3:8080"+p+"?authz=tok&hc.rd=n2" {
		t.Fatalf("HTTP redirect: %v", err)
	}
	// Forwarding mode: the redirect keeps the origin in the URL.
	_, err = tc.routers[0].Open(ctx, backend.Request{Origin: "root://site.example:1094", Path: "/x", Protocol: "http"})
	if errors.As(err, &re) && !strings.Contains(re.URL, "/root://site.example:1094/x?") {
		t.Fatalf("forwarding redirect %q", re.URL)
	}

	// At the owner, and at any node once routed: served locally.
	for _, tt := range []struct {
		node   int
		opaque string
	}{{1, ""}, {0, "hc.rd=n2"}} {
		f, err := tc.routers[tt.node].Open(ctx, backend.Request{Path: p, Protocol: "root", Opaque: tt.opaque})
		if err != nil {
			t.Fatalf("node %d, opaque %q: %v", tt.node, tt.opaque, err)
		}
		f.Close()
	}
	if tc.locals[1].opens.Load() != 1 || tc.locals[0].opens.Load() != 1 || tc.locals[2].opens.Load() != 0 {
		t.Fatalf("local opens %d %d %d", tc.locals[0].opens.Load(), tc.locals[1].opens.Load(), tc.locals[2].opens.Load())
	}
}

// TestRouterTriedSkipsFailedNode: XrdCl comes back to its manager with
// tried=<host> after the owner failed; the next node in the ranking gets
// the client, before the failure detector has noticed anything.
func TestRouterTriedSkipsFailedNode(t *testing.T) {
	tc := newTestCluster(t, 4, ModeRedirect)
	p := tc.fileOwnedBy(t, 1, 3)
	_, err := tc.routers[0].Open(context.Background(), backend.Request{Path: p, Protocol: "root", Opaque: "tried=127.0.0.3&triedrc=srverr"})
	var re *backend.RedirectError
	if !errors.As(err, &re) || re.Host != "127.0.0.5" {
		t.Fatalf("got %v, want a redirect to n3 (127.0.0.5)", err)
	}
	// If the second is this node, it serves.
	p = tc.fileOwnedBy(t, 1, 0)
	tc.mem.Put(p, []byte("x"), time.Now())
	f, err := tc.routers[0].Open(context.Background(), backend.Request{Path: p, Protocol: "root", Opaque: "tried=127.0.0.3"})
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// TestRouterFailoverOnMembershipChange: when the owner leaves the view,
// its files go to the next node in their ranking, and only its files move.
func TestRouterFailoverOnMembershipChange(t *testing.T) {
	tc := newTestCluster(t, 3, ModeRedirect)
	before := map[string]string{}
	v := tc.members[0].View()
	for i := range 3000 {
		k := fmt.Sprintf("root://origin.example:1094//f%d", i)
		o, _ := v.Owner(k)
		before[k] = o.Name
	}
	// n1 dies: the view of n0 loses it.
	tc.members[0].v.Store(NewView(tc.nodes[0], []Node{tc.nodes[0], tc.nodes[2]}, 2, time.Now()))
	v2 := tc.members[0].View()
	moved := 0
	for k, was := range before {
		o, _ := v2.Owner(k)
		if o.Name != was {
			moved++
			if was != "n1" {
				t.Fatalf("%s moved from %s, which is alive", k, was)
			}
			if r := v.Rank(k); r[1].Name != o.Name {
				t.Fatalf("%s went to %s, not the second in its ranking %s", k, o.Name, r[1].Name)
			}
		}
	}
	t.Logf("%d of %d files moved after losing 1 of 3 nodes", moved, len(before))
}

func TestRedirectorOwnsNothing(t *testing.T) {
	tc := newTestCluster(t, 2, ModeRedirect)
	red := Node{Name: "redirector", Role: RoleRedirector, Root: "127.0.0.9:1094"}
	sm := &swapMembers{}
	sm.v.Store(NewView(red, tc.nodes, 1, time.Now()))
	r, err := NewRouter(&RouterConfig{Members: sm, DefaultOrigin: "root://origin.example", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for i := range 200 {
		_, err := r.Open(context.Background(), backend.Request{Path: fmt.Sprintf("/f%d", i), Protocol: "root"})
		var re *backend.RedirectError
		if !errors.As(err, &re) {
			t.Fatalf("redirector served: %v", err)
		}
		counts[re.Host]++
	}
	if len(counts) != 2 || counts["127.0.0.9"] != 0 {
		t.Fatalf("redirects went to %v", counts)
	}
	// A redirector ignores hc.rd (it has nothing to serve) and with no
	// cache node alive asks clients to wait.
	sm.v.Store(NewView(red, nil, 2, time.Now()))
	_, err = r.Open(context.Background(), backend.Request{Path: "/f", Protocol: "root", Opaque: "hc.rd=x"})
	var we *backend.WaitError
	if !errors.As(err, &we) || we.Seconds <= 0 {
		t.Fatalf("no cache nodes: %v, want a wait", err)
	}
	// A listing is routed like a file.
	sm.v.Store(NewView(red, tc.nodes, 3, time.Now()))
	if _, err := r.List(context.Background(), backend.Request{Path: "/store", Protocol: "root"}, false); !errors.As(err, new(*backend.RedirectError)) {
		t.Fatalf("List at a redirector: %v", err)
	}
}

func readAll(tb testing.TB, f backend.File) []byte {
	tb.Helper()
	var out bytes.Buffer
	n, err := f.Stream(context.Background(), 0, f.Info().Size, func(p []byte) error { out.Write(p); return nil })
	if err != nil || n != f.Info().Size {
		tb.Fatalf("Stream: %d bytes, %v", n, err)
	}
	return out.Bytes()
}

func TestRouterProxy(t *testing.T) {
	tc := newTestCluster(t, 3, ModeProxy)
	ctx := context.Background()
	p := tc.fileOwnedBy(t, 1, 2)
	data := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	tc.mem.Put(p, data, time.Unix(1e9, 0))

	f, err := tc.routers[0].Open(ctx, backend.Request{Path: p, Protocol: "root"})
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, f); !bytes.Equal(got, data) {
		t.Fatal("proxied data differs")
	}
	if tc.locals[1].opens.Load() != 1 || tc.locals[0].opens.Load() != 0 {
		t.Fatalf("opens: owner %d, entry %d", tc.locals[1].opens.Load(), tc.locals[0].opens.Load())
	}
	fi, err := tc.routers[0].Stat(ctx, backend.Request{Path: p, Protocol: "root"})
	if err != nil || fi.Size != int64(len(data)) || tc.locals[1].stats.Load() != 1 {
		t.Fatalf("proxied stat: %+v %v", fi, err)
	}

	// The owner dies during the read: the next read is served by the
	// next node in the ranking, and the client sees all the data.
	buf := make([]byte, 100)
	if _, err := f.ReadAt(ctx, buf, 0); err != nil {
		t.Fatal(err)
	}
	tc.loop.SetDown(tc.nodes[1].Root, true)
	if _, err := f.ReadAt(ctx, buf, 500000); err != nil || !bytes.Equal(buf, data[500000:500100]) {
		t.Fatalf("read after the owner died: %v", err)
	}
	if tc.locals[2].opens.Load() != 1 || tc.routers[0].Stats().ProxyFailovers.Load() != 1 {
		t.Fatalf("after failover: n2 opens %d, failovers %d", tc.locals[2].opens.Load(), tc.routers[0].Stats().ProxyFailovers.Load())
	}
	f.Close()

	// New opens skip the dead owner even before the view changes.
	f, err = tc.routers[0].Open(ctx, backend.Request{Path: p, Protocol: "root"})
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, f); !bytes.Equal(got, data) {
		t.Fatal("data differs after failover")
	}
	f.Close()

	// Not found at the owner is an answer, not a failure.
	tc.loop.SetDown(tc.nodes[1].Root, false)
	fo := tc.routers[0].Stats().ProxyFailovers.Load()
	_, err = tc.routers[0].Open(ctx, backend.Request{Path: tc.fileOwnedBy(t, 1), Protocol: "root"})
	if !errors.Is(err, origin.ErrNotFound) || tc.routers[0].Stats().ProxyFailovers.Load() != fo {
		t.Fatalf("missing file: %v (failovers %d)", err, tc.routers[0].Stats().ProxyFailovers.Load())
	}

	// When every other node is down, this node serves.
	tc.loop.SetDown(tc.nodes[1].Root, true)
	tc.loop.SetDown(tc.nodes[2].Root, true)
	f, err = tc.routers[0].Open(ctx, backend.Request{Path: p, Protocol: "root"})
	if err != nil || tc.locals[0].opens.Load() != 1 {
		t.Fatalf("all peers down: %v (local opens %d)", err, tc.locals[0].opens.Load())
	}
	f.Close()
}

func TestRouterPeerLookup(t *testing.T) {
	tc := newTestCluster(t, 2, ModeLocal)
	ctx := context.Background()
	tc.mem.Put("/store/a", []byte("aaaa"), time.Unix(1e9, 0))
	tc.locals[1].cached["root://origin.example:1094/store/a"] = true
	req := backend.Request{Path: "/store/a", Opaque: "hc.peer=1&hc.origin=root%3A%2F%2Forigin.example%3A1094", Client: "127.0.0.2:40000"}
	f, err := tc.routers[1].Open(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	// Not cached: not found, and the origin is not asked.
	req.Path = "/store/b"
	tc.mem.Put("/store/b", []byte("b"), time.Now())
	if _, err := tc.routers[1].Open(ctx, req); !errors.Is(err, origin.ErrNotFound) {
		t.Fatalf("uncached peer lookup: %v", err)
	}
	// Only members may look up.
	req.Path, req.Client = "/store/a", "10.1.2.3:5555"
	if _, err := tc.routers[1].Open(ctx, req); !errors.Is(err, backend.ErrForbidden) {
		t.Fatalf("peer lookup from a stranger: %v", err)
	}
	// In local mode everything else is served here.
	if f, err := tc.routers[0].Open(ctx, backend.Request{Path: "/store/b"}); err != nil {
		t.Fatal(err)
	} else {
		f.Close()
	}
}

// TestRouterClientComesBack: XrdCl treats a redirecting cache node as a
// data server and, after failing at the node it was sent to, comes back
// with the redirect's opaque and tried=<this node>; the next node in the
// ranking gets it, then the next.
func TestRouterClientComesBack(t *testing.T) {
	tc := newTestCluster(t, 4, ModeRedirect)
	p := tc.fileOwnedBy(t, 1, 3, 2)
	ctx := context.Background()
	var re *backend.RedirectError
	if _, err := tc.routers[0].Open(ctx, backend.Request{Path: p, Protocol: "root"}); !errors.As(err, &re) || re.Host != "127.0.0.3" {
		t.Fatalf("first open: %v", err)
	}
	if _, err := tc.routers[0].Open(ctx, backend.Request{Path: p, Protocol: "root", Opaque: "hc.rd=n0&tried=127.0.0.2&triedrc=srverr"}); !errors.As(err, &re) || re.Host != "127.0.0.5" || !strings.HasSuffix(re.URL, "hc.rd=n0&hc.rdi=1") {
		t.Fatalf("after the owner failed: %v", err)
	}
	if _, err := tc.routers[0].Open(ctx, backend.Request{Path: p, Protocol: "root", Opaque: "hc.rd=n0&hc.rdi=1&tried=127.0.0.2"}); !errors.As(err, &re) || re.Host != "127.0.0.4" {
		t.Fatalf("after the second failed: %v", err)
	}
	// The last candidate failed too: this node serves.
	tc.mem.Put(p, []byte("x"), time.Now())
	f, err := tc.routers[0].Open(ctx, backend.Request{Path: p, Protocol: "root", Opaque: "hc.rd=n0&hc.rdi=2"})
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}
