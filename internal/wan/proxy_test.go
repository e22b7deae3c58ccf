package wan

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// newProxy starts a proxy in front of target, with mutate applied to the
// default config, and closes it when the test ends.
func newProxy(tb testing.TB, target string, mutate func(*Config)) *Proxy {
	tb.Helper()
	cfg := DefaultConfig()
	cfg.Target = target
	if mutate != nil {
		mutate(&cfg)
	}
	p, err := New(&cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := p.Close(); err != nil {
			tb.Error(err)
		}
	})
	return p
}

// serveTCP runs handle for every connection to a new loopback listener
// until the test ends, and returns the listener's address.
func serveTCP(tb testing.TB, handle func(*net.TCPConn)) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	tb.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				handle(c.(*net.TCPConn))
			})
		}
	})
	return ln.Addr().String()
}

// echoServer echoes every connection and half-closes after the client's
// EOF.
func echoServer(tb testing.TB) string {
	return serveTCP(tb, func(c *net.TCPConn) {
		io.Copy(c, c)
		c.CloseWrite()
	})
}

func dial(tb testing.TB, p *Proxy) *net.TCPConn {
	tb.Helper()
	c, err := net.Dial("tcp", p.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

func randomBytes(seed uint64, n int) []byte {
	b := make([]byte, n)
	var key [32]byte
	key[0] = byte(seed)
	key[1] = byte(seed >> 8)
	rand.NewChaCha8(key).Read(b)
	return b
}

func TestConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		wantErr []string // substrings; nil: valid
		check   func(t *testing.T, c Config)
	}{
		{
			name: "defaults",
			cfg:  Config{Target: "127.0.0.1:1"},
			check: func(t *testing.T, c Config) {
				if c.Listen != defaultListen || c.DialTimeout != defaultDialTimeout || c.Logger == nil {
					t.Errorf("defaults not filled: %+v", c)
				}
				if c.MaxInFlight != defaultWindow || c.Burst != 0 {
					t.Errorf("unlimited link: MaxInFlight=%d Burst=%d", c.MaxInFlight, c.Burst)
				}
			},
		},
		{
			name: "derived from bandwidth and rtt",
			cfg:  Config{Target: "127.0.0.1:1", Bandwidth: 100e6, RTT: 20 * time.Millisecond},
			check: func(t *testing.T, c Config) {
				// one-way BDP = 100e6 * 0.010 = 1e6 bytes
				if want := int64(2e6) + inFlightMargin; c.MaxInFlight != want {
					t.Errorf("MaxInFlight = %d, want %d", c.MaxInFlight, want)
				}
				if want := int64(400e3); c.Burst != want {
					t.Errorf("Burst = %d, want %d (4 ms)", c.Burst, want)
				}
			},
		},
		{
			name: "derived in-flight capped",
			cfg:  Config{Target: "127.0.0.1:1", Bandwidth: 10e9, RTT: time.Second},
			check: func(t *testing.T, c Config) {
				if c.MaxInFlight != maxDerivedInFlight {
					t.Errorf("MaxInFlight = %d, want cap %d", c.MaxInFlight, maxDerivedInFlight)
				}
			},
		},
		{
			name: "explicit values kept",
			cfg:  Config{Target: "127.0.0.1:1", Bandwidth: 1e6, Burst: 1000, MaxInFlight: 5000},
			check: func(t *testing.T, c Config) {
				if c.Burst != 1000 || c.MaxInFlight != 5000 {
					t.Errorf("explicit values replaced: %+v", c)
				}
			},
		},
		{
			name:    "no target",
			cfg:     Config{},
			wantErr: []string{"Target is required"},
		},
		{
			name:    "every problem at once",
			cfg:     Config{Target: "nohostport", Listen: "bad", RTT: -1, Bandwidth: -1, Burst: -1, MaxInFlight: -1, DialTimeout: -1},
			wantErr: []string{"Target", "Listen", "RTT", "Bandwidth", "Burst", "MaxInFlight", "DialTimeout"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cfg
			c.EnsureDefaults()
			err := c.Validate()
			if tc.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				tc.check(t, c)
				return
			}
			if err == nil {
				t.Fatal("Validate succeeded")
			}
			for _, s := range tc.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
			if _, err := New(&tc.cfg); err == nil {
				t.Error("New accepted an invalid config")
			}
		})
	}
}

// TestBothDirections sends independent random streams both ways at once and
// checks every byte and the EOF in each direction.
func TestBothDirections(t *testing.T) {
	for _, tc := range []struct {
		name   string
		size   int
		mutate func(*Config)
	}{
		{"no delay", 4 << 20, nil},
		{"rtt", 2 << 20, func(c *Config) { c.RTT = 10 * time.Millisecond }},
		{"rtt and bandwidth", 1 << 20, func(c *Config) { c.RTT = 10 * time.Millisecond; c.Bandwidth = 40e6 }},
		{"small in-flight bound", 1 << 20, func(c *Config) { c.RTT = 2 * time.Millisecond; c.MaxInFlight = 1000 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := randomBytes(1, tc.size)
			down := randomBytes(2, tc.size+12345)
			got := make(chan [32]byte, 1)
			target := serveTCP(t, func(c *net.TCPConn) {
				var wg sync.WaitGroup
				wg.Go(func() {
					c.Write(down)
					c.CloseWrite()
				})
				h := sha256.New()
				io.Copy(h, c)
				got <- [32]byte(h.Sum(nil))
				wg.Wait()
			})
			p := newProxy(t, target, tc.mutate)
			c := dial(t, p)
			var wg sync.WaitGroup
			wg.Go(func() {
				if _, err := c.Write(up); err != nil {
					t.Error(err)
				}
				c.CloseWrite()
			})
			recv, err := io.ReadAll(c)
			if err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			if !bytes.Equal(recv, down) {
				t.Errorf("downstream: got %d bytes, want %d, equal=%v", len(recv), len(down), bytes.Equal(recv, down))
			}
			if h := <-got; h != sha256.Sum256(up) {
				t.Error("upstream: target received other bytes")
			}
			if n := p.Stats.BytesUp.Load(); n != int64(len(up)) {
				t.Errorf("Stats.BytesUp = %d, want %d", n, len(up))
			}
			if n := p.Stats.BytesDown.Load(); n != int64(len(down)) {
				t.Errorf("Stats.BytesDown = %d, want %d", n, len(down))
			}
		})
	}
}

// TestHalfClose checks that EOF crosses the link in each direction while
// the other direction keeps working.
func TestHalfClose(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first string // who half-closes first
	}{
		{"client first", "client"},
		{"server first", "server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			late := make(chan string, 1)
			target := serveTCP(t, func(c *net.TCPConn) {
				if tc.first == "server" {
					c.Write([]byte("hello"))
					c.CloseWrite()
					b, _ := io.ReadAll(c) // still readable after our FIN
					late <- string(b)
					return
				}
				b, err := io.ReadAll(c) // returns at the client's EOF
				if err != nil {
					return
				}
				c.Write(append([]byte("got "), b...))
				c.CloseWrite()
			})
			p := newProxy(t, target, func(c *Config) { c.RTT = 2 * time.Millisecond })
			c := dial(t, p)
			if tc.first == "client" {
				c.Write([]byte("ping"))
				c.CloseWrite()
				b, err := io.ReadAll(c)
				if err != nil || string(b) != "got ping" {
					t.Fatalf("read %q, %v; want %q", b, err, "got ping")
				}
				return
			}
			b, err := io.ReadAll(c)
			if err != nil || string(b) != "hello" {
				t.Fatalf("read %q, %v; want %q then EOF", b, err, "hello")
			}
			// The server has half-closed; our direction must still carry data.
			if _, err := c.Write([]byte("after eof")); err != nil {
				t.Fatalf("write after the server's EOF: %v", err)
			}
			c.CloseWrite()
			if got := <-late; got != "after eof" {
				t.Errorf("server read %q after its half-close, want %q", got, "after eof")
			}
		})
	}
}

// TestReset checks that a connection reset crosses the link as a reset.
func TestReset(t *testing.T) {
	target := serveTCP(t, func(c *net.TCPConn) {
		io.ReadFull(c, make([]byte, 1))
		c.SetLinger(0)
		c.Close()
	})
	p := newProxy(t, target, nil)
	c := dial(t, p)
	c.Write([]byte("x"))
	b, err := io.ReadAll(c)
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("read %q, %v; want a reset", b, err)
	}
}

func TestManyConnections(t *testing.T) {
	p := newProxy(t, echoServer(t), func(c *Config) { c.RTT = 4 * time.Millisecond; c.Bandwidth = 200e6 })
	const conns, size = 32, 128 << 10
	var wg sync.WaitGroup
	for i := range conns {
		wg.Go(func() {
			c, err := net.Dial("tcp", p.Addr().String())
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			data := randomBytes(uint64(i), size)
			go func() {
				c.Write(data)
				c.(*net.TCPConn).CloseWrite()
			}()
			got, err := io.ReadAll(c)
			if err != nil {
				t.Error(err)
				return
			}
			if !bytes.Equal(got, data) {
				t.Errorf("connection %d: %d bytes back, corrupted or short", i, len(got))
			}
		})
	}
	wg.Wait()
	if n := p.Stats.Accepted.Load(); n != conns {
		t.Errorf("Stats.Accepted = %d, want %d", n, conns)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if n := p.Stats.Active.Load(); n != 0 {
		t.Errorf("Stats.Active = %d after Close", n)
	}
	if want := int64(conns * size); p.Stats.BytesUp.Load() != want || p.Stats.BytesDown.Load() != want {
		t.Errorf("Stats bytes up/down = %d/%d, want %d", p.Stats.BytesUp.Load(), p.Stats.BytesDown.Load(), want)
	}
}

// TestCloseWhileTransferring closes the proxy in the middle of transfers
// in both directions: Close must return (all goroutines done), clients must
// see their connections end, and a second Close is harmless.
func TestCloseWhileTransferring(t *testing.T) {
	started := make(chan struct{}, 8)
	target := serveTCP(t, func(c *net.TCPConn) {
		buf := make([]byte, 1024)
		if _, err := io.ReadFull(c, buf); err != nil {
			return
		}
		started <- struct{}{}
		go io.Copy(io.Discard, c)
		for {
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	})
	p := newProxy(t, target, func(c *Config) { c.RTT = 20 * time.Millisecond; c.Bandwidth = 2e6 })
	var clients []*net.TCPConn
	errs := make(chan error, 8)
	for range 4 {
		c := dial(t, p)
		clients = append(clients, c)
		go func() {
			buf := make([]byte, 64<<10)
			for {
				if _, err := c.Write(buf); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for range clients {
		<-started
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	for range clients {
		if err := <-errs; err == nil {
			t.Error("client write succeeded after Close")
		}
	}
	for _, c := range clients {
		if _, err := io.Copy(io.Discard, c); err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("client read after Close: %v", err)
		}
	}
	if _, err := net.Dial("tcp", p.Addr().String()); err == nil {
		t.Error("proxy still accepts after Close")
	}
	if n := p.Stats.Active.Load(); n != 0 {
		t.Errorf("Stats.Active = %d after Close", n)
	}
}

func TestDialError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	p := newProxy(t, dead, nil)
	// The reset may come before our connect completes, or after.
	c, err := net.Dial("tcp", p.Addr().String())
	if err == nil {
		defer c.Close()
		_, err = c.Read(make([]byte, 1))
	}
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("connection to a dead target: %v, want a reset", err)
	}
	p.Close()
	if n := p.Stats.DialErrors.Load(); n != 1 {
		t.Errorf("Stats.DialErrors = %d, want 1", n)
	}
}

// TestLatency checks lower bounds only: noise can make the link slower,
// never faster than configured.
func TestLatency(t *testing.T) {
	const rtt = 20 * time.Millisecond
	p := newProxy(t, echoServer(t), func(c *Config) { c.RTT = rtt })

	t.Run("first response after handshake", func(t *testing.T) {
		t0 := time.Now()
		c := dial(t, p)
		c.Write([]byte("x"))
		if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		// Connect (1 RTT) plus one request/response (1 RTT).
		if d := time.Since(t0); d < 2*rtt*9/10 {
			t.Errorf("first response after %v, want >= %v", d, 2*rtt*9/10)
		}
	})
	t.Run("measure", func(t *testing.T) {
		mean, sd, err := p.MeasureRTT(context.Background(), 5)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("configured %v, measured %v ± %v", rtt, mean, sd)
		if mean < rtt*9/10 {
			t.Errorf("mean RTT %v, want >= %v", mean, rtt*9/10)
		}
	})
	t.Run("each direction", func(t *testing.T) {
		// A one-way message: the server timestamps arrival.
		arrived := make(chan time.Time, 1)
		target := serveTCP(t, func(c *net.TCPConn) {
			if _, err := io.ReadFull(c, make([]byte, 1)); err == nil {
				arrived <- time.Now()
			}
		})
		p := newProxy(t, target, func(c *Config) { c.RTT = rtt })
		c := dial(t, p)
		t0 := time.Now()
		c.Write([]byte("x"))
		// Handshake (1 RTT) then half an RTT one way.
		if d := (<-arrived).Sub(t0); d < rtt*3/2*9/10 {
			t.Errorf("one-way delivery after %v, want >= %v", d, rtt*3/2*9/10)
		}
	})
}

func TestBandwidth(t *testing.T) {
	const bw = 8 << 20 // bytes/s
	// Two connections share the link: together they take at least the
	// time one link needs for the sum, minus what the bucket held.
	p := newProxy(t, echoServer(t), func(c *Config) { c.Bandwidth = bw })
	const size = 512 << 10
	t0 := time.Now()
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			c, err := net.Dial("tcp", p.Addr().String())
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			data := randomBytes(uint64(i), size)
			go func() { c.Write(data); c.(*net.TCPConn).CloseWrite() }()
			got, err := io.ReadAll(c)
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("echo through limited link: %d bytes, %v", len(got), err)
			}
		})
	}
	wg.Wait()
	burst := p.Config().Burst
	want := time.Duration(float64(2*size-burst) / bw * float64(time.Second) * 0.9)
	if d := time.Since(t0); d < want {
		t.Errorf("2 x %d bytes at %d B/s took %v, want >= %v", size, bw, d, want)
	}
}

func TestMeasureRTT(t *testing.T) {
	p := newProxy(t, "127.0.0.1:1", nil) // Target unused by MeasureRTT
	mean, sd, err := p.MeasureRTT(context.Background(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if mean <= 0 || sd < 0 {
		t.Errorf("MeasureRTT = %v ± %v", mean, sd)
	}
	if _, _, err := p.MeasureRTT(context.Background(), 0); err == nil {
		t.Error("MeasureRTT(0) succeeded")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := p.MeasureRTT(ctx, 3); !errors.Is(err, context.Canceled) {
		t.Errorf("MeasureRTT with cancelled ctx = %v", err)
	}
	p.Close()
	if _, _, err := p.MeasureRTT(context.Background(), 3); err == nil {
		t.Error("MeasureRTT after Close succeeded")
	}
}
