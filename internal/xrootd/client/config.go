package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/hepcache/hepcache/internal/auth/gsi"
)

// Config configures a Client. The zero value of every field means "use the
// default"; see DefaultConfig for the values and why.
type Config struct {
	// Username is the login name sent to servers (at most 8 bytes).
	// Default "hepcache".
	Username string
	// ConnsPerHost is the number of TCP connections kept to each server;
	// requests are spread over them round-robin and a file is opened on
	// each connection it uses. More connections let a server use more
	// threads and let a high-latency link carry more bytes in flight (one
	// TCP window each), at the expense of one more open per file and
	// connection. Default 4: on loopback 1, 2 and 4 read equally fast;
	// through an emulated 150 ms link (4 MiB window per connection, 32 MiB
	// in flight) 1/2/4/8 connections gave 47/71/100/103 MB/s.
	ConnsPerHost int
	// MaxInFlight is the number of requests that may be outstanding on one
	// connection (stream ids in use); more requests wait for a free one.
	// Default 1024.
	MaxInFlight int
	// MaxRedirects is how many kXR_redirect hops one request may follow.
	// Default 16 (XrdCl's limit).
	MaxRedirects int
	// MaxWaits is how many kXR_wait answers one request accepts before
	// failing. Default 10 (kXR_maxReqRetry).
	MaxWaits int
	// MaxWait caps the sleep a single kXR_wait may impose. Default 30s.
	MaxWait time.Duration
	// DialTimeout bounds connecting and logging in when ctx has no earlier
	// deadline. Default 15s.
	DialTimeout time.Duration
	// WriteTimeout bounds sending one request when ctx has no deadline; a
	// server that does not read its socket for that long is considered dead.
	// Default 60s.
	WriteTimeout time.Duration
	// StallTimeout is how long a connection with requests outstanding may
	// receive nothing before it is declared dead (its calls then fail with
	// origin.ErrUnavailable and the next call reconnects). Requests the
	// server answered with kXR_waitresp do not count. It protects calls
	// whose ctx has no deadline against a hung server, without a timer per
	// request. Default 60s.
	StallTimeout time.Duration
	// MaxReadSize is the largest single kXR_read; longer ReadAt calls are
	// split into requests of this size sent together. Default 8 MiB.
	MaxReadSize int

	// TLS, if set, makes every connection switch to TLS after kXR_protocol
	// (roots://, kXR_wantTLS); a server that does not switch is refused.
	// ServerName defaults to the host dialled. Default nil: plain TCP.
	TLS *tls.Config
	// Token, if set, returns the bearer token presented with the ztn
	// security protocol when a server asks for authentication (on TLS
	// connections only: ztn never sends a token in clear text). It is the
	// cache's own credential, called at every login. Default nil: servers
	// requiring ztn are refused; "unix" is answered anonymously.
	Token func() (string, error)
	// GSI, if set, is the cache's proxy and the CAs verifying servers'
	// host certificates for the gsi security protocol, used when a server
	// asks for gsi. Default nil: servers requiring gsi are refused.
	GSI *gsi.ClientConfig

	// dial replaces net.Dialer.DialContext in tests.
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

const (
	defaultUsername     = "hepcache"
	defaultConnsPerHost = 4
	defaultMaxInFlight  = 1024
	defaultMaxRedirects = 16
	defaultMaxWaits     = 10
	defaultMaxWait      = 30 * time.Second
	defaultDialTimeout  = 15 * time.Second
	defaultWriteTimeout = 60 * time.Second
	defaultMaxReadSize  = 8 << 20
	defaultStallTimeout = 60 * time.Second
)

// DefaultConfig returns a Config with every field set to its default.
func DefaultConfig() *Config {
	return &Config{
		Username:     defaultUsername,
		ConnsPerHost: defaultConnsPerHost, // measured with BenchmarkColdRead in origin/xrootd
		MaxInFlight:  defaultMaxInFlight,  // far above what a cache keeps in flight per origin
		MaxRedirects: defaultMaxRedirects, // as XrdCl
		MaxWaits:     defaultMaxWaits,     // as kXR_maxReqRetry
		MaxWait:      defaultMaxWait,      // a longer wait is better retried by the caller
		DialTimeout:  defaultDialTimeout,  // WAN handshakes take a few RTTs
		WriteTimeout: defaultWriteTimeout, // a stuck server must not hold the connection forever
		MaxReadSize:  defaultMaxReadSize,  // several server buffers per request, few requests per block
		StallTimeout: defaultStallTimeout, // well above any answer time of a healthy server
	}
}

// EnsureDefaults fills zero fields with their defaults.
func (c *Config) EnsureDefaults() {
	d := DefaultConfig()
	if c.Username == "" {
		c.Username = d.Username
	}
	if c.ConnsPerHost == 0 {
		c.ConnsPerHost = d.ConnsPerHost
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = d.MaxInFlight
	}
	if c.MaxRedirects == 0 {
		c.MaxRedirects = d.MaxRedirects
	}
	if c.MaxWaits == 0 {
		c.MaxWaits = d.MaxWaits
	}
	if c.MaxWait == 0 {
		c.MaxWait = d.MaxWait
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = d.DialTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = d.WriteTimeout
	}
	if c.MaxReadSize == 0 {
		c.MaxReadSize = d.MaxReadSize
	}
	if c.StallTimeout == 0 {
		c.StallTimeout = d.StallTimeout
	}
}

// Validate reports every invalid field in one error.
func (c *Config) Validate() error {
	var errs []error
	if len(c.Username) > 8 {
		errs = append(errs, fmt.Errorf("Username %q: longer than 8 bytes", c.Username))
	}
	if c.ConnsPerHost < 1 || c.ConnsPerHost > 64 {
		errs = append(errs, fmt.Errorf("ConnsPerHost %d: want 1..64", c.ConnsPerHost))
	}
	if c.MaxInFlight < 1 || c.MaxInFlight > 65536 {
		errs = append(errs, fmt.Errorf("MaxInFlight %d: want 1..65536", c.MaxInFlight))
	}
	if c.MaxRedirects < 0 || c.MaxWaits < 0 || c.MaxWait < 0 || c.DialTimeout < 0 || c.WriteTimeout < 0 || c.StallTimeout < 0 {
		errs = append(errs, errors.New("MaxRedirects, MaxWaits, MaxWait, DialTimeout, WriteTimeout, StallTimeout: must not be negative"))
	}
	if c.MaxReadSize < 4096 || c.MaxReadSize > 1<<30 {
		errs = append(errs, fmt.Errorf("MaxReadSize %d: want 4 KiB..1 GiB", c.MaxReadSize))
	}
	if len(errs) > 0 {
		return fmt.Errorf("client config: %w", errors.Join(errs...))
	}
	return nil
}
