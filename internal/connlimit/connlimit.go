// Package connlimit bounds the connections one client address may hold at
// once, so that a single host (or a script opening connections and never
// reading) cannot take a server's descriptors and workers from the rest.
package connlimit

import (
	"net"
	"sync"
	"sync/atomic"
)

// PerAddr counts connections by client IP address. The zero value (or a
// Max of 0) admits everything. Safe for concurrent use.
type PerAddr struct {
	max atomic.Int64

	// mu protects n.
	mu sync.Mutex
	n  map[string]int

	// Refused counts connections turned away.
	Refused atomic.Int64
}

// New returns a counter admitting max connections per address (0: no
// limit).
func New(max int) *PerAddr {
	p := &PerAddr{n: map[string]int{}}
	p.max.Store(int64(max))
	return p
}

// SetMax changes the limit for connections admitted from now on.
func (p *PerAddr) SetMax(max int) { p.max.Store(int64(max)) }

// Max returns the limit (0: none).
func (p *PerAddr) Max() int { return int(p.max.Load()) }

// Acquire admits one more connection from addr ("ip:port" or "ip") and
// reports whether it may stay; an admitted connection is Released once.
func (p *PerAddr) Acquire(addr string) bool {
	ip := hostOf(addr)
	p.mu.Lock()
	defer p.mu.Unlock()
	if max := p.max.Load(); max > 0 && int64(p.n[ip]) >= max {
		p.Refused.Add(1)
		return false
	}
	p.n[ip]++
	return true
}

// Release forgets one admitted connection from addr.
func (p *PerAddr) Release(addr string) {
	ip := hostOf(addr)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n[ip]--; p.n[ip] <= 0 {
		delete(p.n, ip)
	}
}

func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// Listener returns ln admitting at most p's limit of connections per
// client address at once: one over it is closed as soon as it is
// accepted (the client sees the connection refused, and the server's
// workers never see it).
func (p *PerAddr) Listener(ln net.Listener) net.Listener { return &listener{Listener: ln, p: p} }

type listener struct {
	net.Listener
	p *PerAddr
}

func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := c.RemoteAddr().String()
		if !l.p.Acquire(addr) {
			c.Close()
			continue
		}
		return &conn{Conn: c, release: func() { l.p.Release(addr) }}, nil
	}
}

type conn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *conn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}
