package cluster

import (
	"fmt"
	"github.com/hepcache/hepcache/internal/eventually"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// fastGossip shortens memberlist's timers so that failure detection takes
// a fraction of a second in tests.
func fastGossip(mc *memberlist.Config) {
	mc.ProbeInterval = 100 * time.Millisecond
	mc.ProbeTimeout = 50 * time.Millisecond
	mc.GossipInterval = 20 * time.Millisecond
	mc.PushPullInterval = time.Second
	mc.SuspicionMult = 2
	mc.TCPTimeout = time.Second
}

// startNode starts a member bound to a free 127.0.0.1 port.
func startNode(tb testing.TB, name string, join []string, mut func(*MembershipConfig)) *Membership {
	tb.Helper()
	cfg := &MembershipConfig{
		Self:           Node{Name: name, Role: RoleCache, Root: "127.0.0.1:1094"},
		Bind:           "127.0.0.1:0",
		Join:           join,
		Profile:        ProfileLocal,
		RejoinInterval: 200 * time.Millisecond,
		Logger:         slog.New(slog.DiscardHandler),
		tweak:          fastGossip,
	}
	if mut != nil {
		mut(cfg)
	}
	m, err := Join(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { m.Close() })
	return m
}

// names returns the names in a view.
func names(v *View) []string {
	var out []string
	for _, n := range v.Nodes {
		out = append(out, n.Name)
	}
	return out
}

// waitView waits until every member sees exactly want, and returns how long
// that took. It fails after a generous deadline, never on speed.
func waitView(tb testing.TB, ms []*Membership, want []string) time.Duration {
	tb.Helper()
	start := time.Now()
	deadline := start.Add(30 * time.Second)
	for {
		ok := true
		for _, m := range ms {
			if !slices.Equal(names(m.View()), want) {
				ok = false
			}
		}
		if ok {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			for _, m := range ms {
				tb.Logf("%s sees %v", m.cfg.Self.Name, names(m.View()))
			}
			tb.Fatalf("views did not converge to %v", want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitUntil waits until cond holds, failing after a generous deadline.
func waitUntil(tb testing.TB, cond func() bool) {
	tb.Helper()
	eventually.True(tb, cond, "the membership condition")
}

func TestMembershipJoinLeaveFail(t *testing.T) {
	a := startNode(t, "a", nil, func(c *MembershipConfig) { c.Self.HTTP = "http://127.0.0.1:8080"; c.Self.Weight = 2 })
	b := startNode(t, "b", []string{a.GossipAddr()}, nil)
	c := startNode(t, "c", []string{b.GossipAddr()}, nil)
	took := waitView(t, []*Membership{a, b, c}, []string{"a", "b", "c"})
	t.Logf("3 nodes converged %v after the last join", took)

	// Metadata travels with the membership.
	na, ok := c.View().Node("a")
	if !ok || na.Root != "127.0.0.1:1094" || na.HTTP != "http://127.0.0.1:8080" || na.Weight != 2 || na.Role != RoleCache || na.Gossip != a.GossipAddr() {
		t.Fatalf("c sees a as %+v", na)
	}

	// Every member ranks files the same way.
	for i := range 100 {
		k := fmt.Sprintf("root://o:1094//f%d", i)
		oa, _ := a.View().Owner(k)
		ob, _ := b.View().Owner(k)
		oc, _ := c.View().Owner(k)
		if oa.Name != ob.Name || ob.Name != oc.Name {
			t.Fatalf("owners of %s disagree: %s %s %s", k, oa.Name, ob.Name, oc.Name)
		}
	}

	// A graceful leave is seen at once (no failure detection).
	c.Close()
	took = waitView(t, []*Membership{a, b}, []string{"a", "b"})
	t.Logf("graceful leave converged in %v", took)
	waitUntil(t, func() bool { return a.Stats().Leaves.Load() == 1 })
	if a.Stats().Leaves.Load() != 1 || a.Stats().Failures.Load() != 0 {
		t.Fatalf("a counted %d leaves, %d failures", a.Stats().Leaves.Load(), a.Stats().Failures.Load())
	}

	// A crash (no leave message) is found by the failure detector.
	d := startNode(t, "d", []string{a.GossipAddr()}, nil)
	waitView(t, []*Membership{a, b, d}, []string{"a", "b", "d"})
	d.crash() // like kill -9: sockets close, nobody is told
	took = waitView(t, []*Membership{a, b}, []string{"a", "b"})
	t.Logf("crash detected and converged in %v (probe interval 100ms)", took)
	waitUntil(t, func() bool { return a.Stats().Failures.Load() == 1 })
	if a.Stats().Failures.Load() != 1 || a.Stats().Leaves.Load() != 1 {
		t.Fatalf("a counted %d failures", a.Stats().Failures.Load())
	}
}

// TestMembershipSeedStartsLater checks that a node whose seeds are not up
// yet joins them once they are.
func TestMembershipSeedStartsLater(t *testing.T) {
	// Reserve a port for the seed, start the joiner first.
	probe := startNode(t, "probe", nil, nil)
	addr := probe.GossipAddr()
	probe.Close()
	b := startNode(t, "b", []string{addr}, nil)
	if got := names(b.View()); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("b sees %v before the seed is up", got)
	}
	a := startNode(t, "a", nil, func(c *MembershipConfig) { c.Bind = addr })
	took := waitView(t, []*Membership{a, b}, []string{"a", "b"})
	t.Logf("joined a late seed after %v (rejoin interval 200ms)", took)
}

func TestMembershipConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mut  func(*MembershipConfig)
		ok   bool
	}{
		{"ok", func(*MembershipConfig) {}, true},
		{"bad name", func(c *MembershipConfig) { c.Self.Name = "a b" }, false},
		{"bad role", func(c *MembershipConfig) { c.Self.Role = "boss" }, false},
		{"no root", func(c *MembershipConfig) { c.Self.Root = "" }, false},
		{"bad seed", func(c *MembershipConfig) { c.Join = []string{"nohostport"} }, false},
		{"bad key", func(c *MembershipConfig) { c.SecretKey = []byte("short") }, false},
		{"bad profile", func(c *MembershipConfig) { c.Profile = "fast" }, false},
		{"huge meta", func(c *MembershipConfig) { c.Self.HTTP = string(make([]byte, 600)) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &MembershipConfig{Self: Node{Name: "n", Root: "h:1094"}}
			c.EnsureDefaults()
			tc.mut(c)
			if err := c.Validate(); (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v", err)
			}
		})
	}
}

// TestMembershipLabelSeparatesClusters checks that nodes of another cluster
// (another label) are not admitted.
func TestMembershipLabelSeparatesClusters(t *testing.T) {
	a := startNode(t, "a", nil, func(c *MembershipConfig) { c.Label = "site-a" })
	b := startNode(t, "b", []string{a.GossipAddr()}, func(c *MembershipConfig) { c.Label = "site-b"; c.RejoinInterval = -1 })
	time.Sleep(300 * time.Millisecond) // nothing to wait for: nothing must happen
	if got := names(a.View()); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("a sees %v", got)
	}
	if got := names(b.View()); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("b sees %v", got)
	}
}
