package connlimit

import (
	"net"
	"sync"
)

// Listener returns ln passing every accepted connection through g: it
// returns the admitted ones and the waiting ones (PassOf tells which; the
// server tells a waiting one to come back, or admits it with Pass.Admit),
// and closes at once those with no place. Closing a returned connection
// releases its place.
func (g *Gate) Listener(ln net.Listener) net.Listener { return &listener{Listener: ln, g: g} }

type listener struct {
	net.Listener
	g *Gate
}

func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		p := l.g.Enter(c.RemoteAddr().String())
		if p == nil {
			c.Close()
			continue
		}
		return &conn{Conn: c, pass: p}, nil
	}
}

type conn struct {
	net.Conn
	pass *Pass
	once sync.Once
}

func (c *conn) Close() error {
	c.once.Do(c.pass.Release)
	return c.Conn.Close()
}

// PassOf returns the Pass of a connection from a Gate's Listener (also
// under TLS: a *tls.Conn's NetConn), or nil for another connection.
func PassOf(c net.Conn) *Pass {
	for i := 0; i < 4 && c != nil; i++ {
		switch x := c.(type) {
		case *conn:
			return x.pass
		case interface{ NetConn() net.Conn }:
			c = x.NetConn()
		default:
			return nil
		}
	}
	return nil
}
