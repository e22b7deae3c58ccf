package connlimit

import (
	"net"
	"testing"
	"time"
)

func TestPerAddr(t *testing.T) {
	p := New(2)
	if !p.Acquire("10.0.0.1:1") || !p.Acquire("10.0.0.1:2") || p.Acquire("10.0.0.1:3") {
		t.Fatal("the third connection of one address was admitted, or an earlier one refused")
	}
	if !p.Acquire("10.0.0.2:1") {
		t.Fatal("another address was refused")
	}
	p.Release("10.0.0.1:1")
	if !p.Acquire("10.0.0.1:4") {
		t.Fatal("a connection after one left was refused")
	}
	if p.Refused.Load() != 1 {
		t.Fatalf("refused %d", p.Refused.Load())
	}
	p.SetMax(0)
	for range 10 {
		if !p.Acquire("10.0.0.1:5") {
			t.Fatal("refused without a limit")
		}
	}
}

// TestListener: connections over the limit are closed at once; closing
// an admitted one makes room.
func TestListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := New(1)
	ln := p.Listener(inner)
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
	a, _ := net.Dial("tcp", inner.Addr().String())
	first := <-accepted
	b, _ := net.Dial("tcp", inner.Addr().String())
	b.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := b.Read(make([]byte, 1)); err == nil {
		t.Fatal("second connection got data")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("second connection from the same address left open")
	}
	first.Close()
	a.Close()
	c, _ := net.Dial("tcp", inner.Addr().String())
	defer c.Close()
	select {
	case s := <-accepted:
		s.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("no room after the first connection closed")
	}
}
