// Package wan emulates a wide-area link in user space: a TCP proxy that adds
// a round-trip time and a bandwidth limit between its clients and a target,
// for benchmarks on loopback where kernel netem is not available. Each
// direction is a delay line (bytes stamped on arrival, written when due), so
// latency and throughput are set independently; buffering is bounded.
package wan

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Stats counts what went through a Proxy. Fields are read with Load.
type Stats struct {
	// Accepted counts client connections accepted.
	Accepted atomic.Int64
	// Active is the number of connections currently open.
	Active atomic.Int64
	// DialErrors counts clients dropped because Target did not answer.
	DialErrors atomic.Int64
	// BytesUp counts bytes delivered from clients to Target.
	BytesUp atomic.Int64
	// BytesDown counts bytes delivered from Target to clients.
	BytesDown atomic.Int64
}

// Proxy is a running emulated link. Its methods are safe for concurrent use.
type Proxy struct {
	// Stats counts connections and bytes, including those of MeasureRTT.
	Stats Stats

	cfg      Config
	ln       net.Listener
	up, down *bucket // nil without a bandwidth limit

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	done   <-chan struct{} // ctx.Done()

	closeOnce sync.Once
	wg        sync.WaitGroup // every goroutine of the proxy

	// mu protects conns and closed.
	mu     sync.Mutex
	conns  map[*conn]struct{}
	closed bool
}

// New starts a proxy that listens on cfg.Listen and forwards to cfg.Target
// through the emulated link. The caller must Close it.
func New(cfg *Config) (*Proxy, error) {
	c := *cfg
	c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return nil, fmt.Errorf("wan: listen %s: %w", c.Listen, err)
	}
	p := &Proxy{cfg: c, ln: ln, conns: map[*conn]struct{}{}}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.done = p.ctx.Done()
	if c.Bandwidth > 0 {
		p.up = newBucket(c.Bandwidth, c.Burst)
		p.down = newBucket(c.Bandwidth, c.Burst)
	}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr returns the address clients connect to.
func (p *Proxy) Addr() net.Addr { return p.ln.Addr() }

// Config returns the effective configuration, with defaults filled in.
func (p *Proxy) Config() Config { return p.cfg }

// Close stops accepting, tears down every connection (data in flight is
// dropped) and waits for all goroutines of the proxy. It is idempotent.
func (p *Proxy) Close() error {
	var err error
	p.closeOnce.Do(func() {
		p.cancel()
		err = p.ln.Close()
		p.mu.Lock()
		p.closed = true
		conns := make([]*conn, 0, len(p.conns))
		for c := range p.conns {
			conns = append(conns, c)
		}
		p.mu.Unlock()
		for _, c := range conns {
			c.teardown()
		}
	})
	p.wg.Wait()
	if err != nil {
		return fmt.Errorf("wan: close: %w", err)
	}
	return nil
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			select {
			case <-p.done:
				return
			default:
			}
			// Out of file descriptors and the like: back off, retry.
			p.cfg.Logger.Debug("wan: accept", "err", err)
			select {
			case <-time.After(5 * time.Millisecond):
			case <-p.done:
				return
			}
			continue
		}
		p.Stats.Accepted.Add(1)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serve(c, p.cfg.Target)
		}()
	}
}

// conn is one client connection and its connection to the target.
type conn struct {
	client, server net.Conn
	done           chan struct{}
	once           sync.Once
}

// teardown closes both sockets and stops the pipes; safe to call repeatedly.
func (c *conn) teardown() {
	c.once.Do(func() {
		close(c.done)
		c.client.Close()
		c.server.Close()
	})
}

// serve connects client to target through the emulated link and returns
// when the connection is over. It closes client.
func (p *Proxy) serve(client net.Conn, target string) {
	accepted := time.Now()
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.DialTimeout)
	var d net.Dialer
	server, err := d.DialContext(ctx, "tcp", target)
	cancel()
	if err != nil {
		p.Stats.DialErrors.Add(1)
		p.cfg.Logger.Debug("wan: dial target", "target", target, "client", client.RemoteAddr(), "err", err)
		abort(client) // the client's connect would have failed: reset, not EOF
		client.Close()
		return
	}
	c := &conn{client: client, server: server, done: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		c.teardown()
		return
	}
	p.conns[c] = struct{}{}
	p.mu.Unlock()
	p.Stats.Active.Add(1)
	defer func() {
		c.teardown()
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
		p.Stats.Active.Add(-1)
	}()

	delay := p.cfg.RTT / 2
	start := accepted.Add(p.cfg.RTT) // the handshake a real link would take
	up := newPipe(client, server, delay, start, p.up, p.cfg.MaxInFlight, c.done, &p.Stats.BytesUp)
	down := newPipe(server, client, delay, start, p.down, p.cfg.MaxInFlight, c.done, &p.Stats.BytesDown)

	var wg sync.WaitGroup
	wg.Go(up.read)
	wg.Go(down.read)
	errs := make(chan error, 2)
	wg.Go(func() { errs <- up.write() })
	wg.Go(func() { errs <- down.write() })
	// The connection is over when both directions have half-closed, or at
	// the first abort, or when the proxy closes.
	for range 2 {
		err := <-errs
		if errors.Is(err, errHalfClosed) {
			continue
		}
		if err != nil {
			p.cfg.Logger.Debug("wan: connection aborted", "client", client.RemoteAddr(), "target", target, "err", err)
			abort(c.client)
			abort(c.server)
		}
		break
	}
	c.teardown()
	wg.Wait()
}

// abort makes the coming Close send a reset rather than a FIN, as a broken
// link would.
func abort(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
}

// Quiet waits until no byte has crossed the link, in either direction, for
// d, and returns the bytes sent down (from the target) so far. Benchmarks
// and tests use it to attribute the tail of one phase (closes, late
// answers) to that phase and not to the next.
func (p *Proxy) Quiet(d time.Duration) int64 {
	total := func() int64 { return p.Stats.BytesDown.Load() + p.Stats.BytesUp.Load() }
	last := total()
	step := max(d/10, time.Millisecond)
	for stable := time.Now(); time.Since(stable) < d; {
		time.Sleep(step)
		if n := total(); n != last {
			last, stable = n, time.Now()
		}
	}
	return p.Stats.BytesDown.Load()
}
