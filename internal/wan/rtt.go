package wan

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"time"
)

// probeSize is the size of one MeasureRTT request and of its echo: small,
// like a ping.
const probeSize = 64

// MeasureRTT times n request/response round trips of a small message
// through the emulated link and returns their mean and sample standard
// deviation: the RTT a client of the proxy sees, as ping would report it
// for a real site. The far end is an echo server that MeasureRTT runs on
// loopback, reached through the same code path, delay and shared bandwidth
// as the proxy's clients (so a busy link shows up as queueing), but not
// through Target. One unmeasured round trip first absorbs the handshake
// delay. It blocks until done or ctx ends.
func (p *Proxy) MeasureRTT(ctx context.Context, n int) (mean, stddev time.Duration, err error) {
	if n < 1 {
		return 0, 0, fmt.Errorf("wan: measure rtt: n=%d, want >= 1", n)
	}
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, 0, fmt.Errorf("wan: measure rtt: echo listener: %w", err)
	}
	defer echo.Close()
	// A loopback pair whose far half the proxy serves like an accepted
	// client.
	front, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, 0, fmt.Errorf("wan: measure rtt: listener: %w", err)
	}
	defer front.Close()

	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return 0, 0, fmt.Errorf("wan: measure rtt: proxy closed")
	}
	// Add under mu: Close sets closed under mu before it waits, so it
	// cannot start waiting before this Add.
	p.wg.Add(2)
	p.mu.Unlock()
	go func() { // echo server, one connection
		defer p.wg.Done()
		c, err := echo.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c)
	}()
	go func() {
		defer p.wg.Done()
		c, err := front.Accept()
		if err != nil {
			return
		}
		p.Stats.Accepted.Add(1)
		p.serve(c, echo.Addr().String())
	}()

	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", front.Addr().String())
	if err != nil {
		return 0, 0, fmt.Errorf("wan: measure rtt: dial: %w", err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	req := make([]byte, probeSize)
	resp := make([]byte, probeSize)
	var sum, sumSq float64
	for i := -1; i < n; i++ { // i == -1: the warm-up round trip
		binary.BigEndian.PutUint64(req, uint64(i+1))
		t0 := time.Now()
		if _, err := c.Write(req); err != nil {
			return 0, 0, fmt.Errorf("wan: measure rtt: round trip %d: %w", i+1, errors.Join(ctx.Err(), err))
		}
		if _, err := io.ReadFull(c, resp); err != nil {
			return 0, 0, fmt.Errorf("wan: measure rtt: round trip %d: %w", i+1, errors.Join(ctx.Err(), err))
		}
		rtt := time.Since(t0).Seconds()
		if !bytes.Equal(req, resp) {
			return 0, 0, fmt.Errorf("wan: measure rtt: round trip %d: echo returned other bytes", i+1)
		}
		if i >= 0 {
			sum += rtt
			sumSq += rtt * rtt
		}
	}
	m := sum / float64(n)
	var sd float64
	if n > 1 {
		sd = math.Sqrt(max(0, (sumSq-float64(n)*m*m)/float64(n-1)))
	}
	return seconds(m), seconds(sd), nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
