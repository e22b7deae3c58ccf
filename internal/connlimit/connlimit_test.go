package connlimit

import (
	"fmt"
	"net"
	"testing"
	"time"
)

func TestKey(t *testing.T) {
	for _, c := range []struct {
		name, addr string
		bits       int
		want       string
	}{
		{"ipv4 address", "192.0.2.7:1094", 64, "192.0.2.7"},
		{"ipv4 without port", "192.0.2.7", 64, "192.0.2.7"},
		{"ipv4-mapped", "[::ffff:192.0.2.7]:1094", 64, "192.0.2.7"},
		{"ipv6 /64", "[2001:db8:1:2:aaaa::1]:1094", 64, "2001:db8:1:2::/64"},
		{"another of the /64", "[2001:db8:1:2:ffff::9]:40000", 64, "2001:db8:1:2::/64"},
		{"ipv6 /56", "[2001:db8:1:2ff::1]:1094", 56, "2001:db8:1:200::/56"},
		{"ipv6 whole address", "[2001:db8::1]:1094", 128, "2001:db8::1"},
		{"zone dropped", "[fe80::1%eth0]:1094", 64, "fe80::/64"},
		{"not an address", "pipe", 64, "pipe"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Key(c.addr, c.bits); got != c.want {
				t.Errorf("Key(%q, %d) = %q, want %q", c.addr, c.bits, got, c.want)
			}
		})
	}
}

// TestIPv6PrefixIsOneClient: four addresses of one IPv6 /64 held four
// times the bound per client (issue 35: 4,160 connections); they are one
// client now, while IPv4 addresses stay apart.
func TestIPv6PrefixIsOneClient(t *testing.T) {
	l := New(0, -1)
	g := l.Gate(2)
	for i, want := range []bool{true, true, false, false} {
		addr := fmt.Sprintf("[2001:db8:0:7::%x]:1094", i+1)
		if got := g.Enter(addr) != nil; got != want {
			t.Errorf("%s admitted %v, want %v", addr, got, want)
		}
	}
	for i := range 4 {
		if g.Enter(fmt.Sprintf("192.0.2.%d:1094", i+1)) == nil {
			t.Errorf("IPv4 address %d refused", i+1)
		}
	}
	l.SetIPv6Prefix(128)
	if g.Enter("[2001:db8:0:7::9]:1094") == nil {
		t.Error("with a /128 prefix, another address of the /64 was refused")
	}
}

func TestGate(t *testing.T) {
	l := New(3, 4) // a room of 4: one place per client
	root, http := l.Gate(2), l.Gate(2)
	a1, a2 := root.Enter("10.0.0.1:1"), root.Enter("10.0.0.1:2")
	if a1 == nil || a2 == nil || !a1.Admitted() || !a2.Admitted() {
		t.Fatal("the first two connections of an address were not admitted")
	}
	// Over the bound per client: waits (one place per client), then dropped.
	w := root.Enter("10.0.0.1:3")
	if w == nil || w.Admitted() || w.Over() != OverClient {
		t.Fatalf("third of one address: %+v, want waiting over its client's bound", w)
	}
	if root.Enter("10.0.0.1:4") != nil {
		t.Fatal("a client took a second place in the waiting room")
	}
	// The per-client bound is the gate's: HTTP counts apart.
	h := http.Enter("10.0.0.1:5")
	if h == nil || !h.Admitted() {
		t.Fatal("the other front end refused the address")
	}
	// All three admitted: another address waits, over the total.
	b := root.Enter("10.0.0.2:1")
	if b == nil || b.Over() != OverTotal {
		t.Fatalf("over the total: %+v, want waiting", b)
	}
	if b.Admit() {
		t.Fatal("admitted while the total is reached")
	}
	h.Release()
	h.Release() // a second release does nothing
	if !b.Admit() || !b.Admitted() {
		t.Fatal("not admitted once a place was free")
	}
	if w.Admit() {
		t.Fatal("admitted over the total")
	}
	a1.Release()
	if !w.Admit() {
		t.Fatal("the client's waiting connection not admitted once one of its own left")
	}
	if c := l.Counts(); c.Admitted != 3 || c.Waiting != 0 {
		t.Fatalf("counts %+v, want 3 admitted and none waiting", c)
	}
	for _, p := range []*Pass{a2, w, b} {
		p.Release()
	}
	if c := l.Counts(); c.Admitted != 0 || c.Waiting != 0 {
		t.Fatalf("counts after every release %+v", c)
	}
	if n := root.Stats.Dropped.Load(); n != 1 {
		t.Errorf("%d dropped, want 1", n)
	}
	if n := root.Stats.AdmittedLater.Load(); n != 2 {
		t.Errorf("%d admitted later, want 2", n)
	}
}

// TestRoomKeepsPlacesForOthers: twenty clients over the bound take at
// most their share of the waiting room each, so that another client still
// finds a place (issue 35: twenty addresses flooding, a client from another
// address was left to time out).
func TestRoomKeepsPlacesForOthers(t *testing.T) {
	l := New(1, 64) // two places a client
	g := l.Gate(0)
	g.Enter("192.0.2.1:1")
	for a := 1; a <= 20; a++ {
		for range 100 {
			g.Enter(fmt.Sprintf("192.0.2.%d:1", a))
		}
	}
	if c := l.Counts(); c.Waiting != 40 {
		t.Fatalf("%d waiting, want 20 clients x 2", c.Waiting)
	}
	if p := g.Enter("198.51.100.1:1"); p == nil || p.Over() != OverTotal {
		t.Fatalf("another client: %+v, want a place in the waiting room", p)
	}
}

// TestListener: a connection over the bound comes out waiting (PassOf);
// one with no place to wait is closed at once; closing an admitted one
// makes room.
func TestListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(0, 1)
	ln := l.Gate(1).Listener(inner)
	defer ln.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	dial()
	first := <-accepted
	if p := PassOf(first); p == nil || !p.Admitted() {
		t.Fatalf("first connection: pass %+v", p)
	}
	dial()
	second := <-accepted
	if p := PassOf(second); p == nil || p.Admitted() {
		t.Fatalf("second connection: pass %+v, want waiting", p)
	}
	third := dial()
	third.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := third.Read(make([]byte, 1)); err == nil {
		t.Fatal("third connection got data")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("third connection, with no place to wait, left open")
	}
	first.Close()
	if !PassOf(second).Admit() {
		t.Fatal("the waiting connection not admitted once the first closed")
	}
	second.Close()
}
