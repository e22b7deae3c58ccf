package wan

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"
)

// Defaults, used when a Config field is zero.
const (
	defaultListen      = "127.0.0.1:0"
	defaultDialTimeout = 10 * time.Second
	// defaultWindow is MaxInFlight when Bandwidth is unlimited: like a TCP
	// window it caps one connection at about defaultWindow/(RTT/2).
	defaultWindow = 4 << 20
	// inFlightMargin is added to the bandwidth-delay product: a few chunks
	// in the reader and the pacer on top of what the link holds.
	inFlightMargin = 4 * chunkSize
	// maxDerivedInFlight caps the derived MaxInFlight (memory per
	// connection and direction); set MaxInFlight explicitly to go beyond.
	maxDerivedInFlight = 64 << 20
	// minBurst and burstTime size the token bucket when Burst is zero.
	minBurst  = 16 << 10
	burstTime = 4 * time.Millisecond
)

// Config describes the emulated link. A zero field means "use the default";
// New works on a copy.
type Config struct {
	// Target is the address (host:port) that every accepted connection is
	// forwarded to. Required: there is no default.
	Target string

	// Listen is the address the proxy listens on. Zero value:
	// "127.0.0.1:0", a free loopback port (see Proxy.Addr).
	Listen string

	// RTT is the round-trip time the link adds: every byte is delayed by
	// RTT/2 in each direction, and no byte crosses before one RTT after
	// the connection was accepted (the TCP handshake a real link would
	// take). Zero value: no added delay, only the proxy's own forwarding
	// cost (tens of microseconds on loopback). Measure what a client sees
	// with Proxy.MeasureRTT.
	RTT time.Duration

	// Bandwidth is the link capacity in bytes per second in each
	// direction, shared by all connections through the proxy as a real
	// link is. Zero value: unlimited, i.e. as fast as the proxy can copy.
	Bandwidth int64

	// Burst is the depth of the token bucket in bytes: how much the link
	// may send at once after being idle. Zero value: the larger of 16 KiB
	// and 4 ms at Bandwidth. Larger values absorb timer jitter at the
	// expense of short bursts above Bandwidth. Unused without Bandwidth.
	Burst int64

	// MaxInFlight bounds the bytes held per connection and direction (read
	// from one side, not yet written to the other). When it is reached the
	// proxy stops reading, and TCP backpressure slows the sender. Zero
	// value: with Bandwidth set, twice the bandwidth-delay product
	// Bandwidth*RTT/2 plus 256 KiB, capped at 64 MiB, so the link stays
	// full; with unlimited Bandwidth, 4 MiB, which like a TCP window limits
	// one connection to about MaxInFlight/(RTT/2). Costs up to
	// 2*MaxInFlight of memory per busy connection.
	MaxInFlight int64

	// DialTimeout bounds connecting to Target; a client whose target
	// cannot be reached is disconnected. Zero value: 10 s.
	DialTimeout time.Duration

	// Logger receives per-connection errors at debug level. Nil: discard.
	Logger *slog.Logger
}

// DefaultConfig returns the defaults for every field except Target.
func DefaultConfig() Config {
	return Config{
		Listen:      defaultListen,      // loopback only: no test data leaves the machine
		RTT:         0,                  // a transparent proxy until told otherwise
		Bandwidth:   0,                  // unlimited: emulate latency first, capacity on request
		Burst:       0,                  // derived from Bandwidth in EnsureDefaults
		MaxInFlight: 0,                  // derived from Bandwidth and RTT in EnsureDefaults
		DialTimeout: defaultDialTimeout, // a local target answers at once; fail clearly if not
		Logger:      slog.New(slog.DiscardHandler),
	}
}

// EnsureDefaults replaces zero fields by their defaults, deriving Burst and
// MaxInFlight from Bandwidth and RTT.
func (c *Config) EnsureDefaults() {
	if c.Listen == "" {
		c.Listen = defaultListen
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = defaultDialTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Burst == 0 && c.Bandwidth > 0 {
		c.Burst = max(minBurst, int64(float64(c.Bandwidth)*burstTime.Seconds()))
	}
	if c.MaxInFlight == 0 {
		if c.Bandwidth > 0 {
			bdp := float64(c.Bandwidth) * (c.RTT / 2).Seconds()
			c.MaxInFlight = min(int64(2*bdp)+inFlightMargin, maxDerivedInFlight)
		} else {
			c.MaxInFlight = defaultWindow
		}
	}
}

// Validate reports every problem of the configuration in one error.
func (c *Config) Validate() error {
	var errs []error
	if c.Target == "" {
		errs = append(errs, errors.New("Target is required"))
	} else if _, _, err := net.SplitHostPort(c.Target); err != nil {
		errs = append(errs, fmt.Errorf("Target %q: %w", c.Target, err))
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("Listen %q: %w", c.Listen, err))
	}
	if c.RTT < 0 {
		errs = append(errs, fmt.Errorf("RTT %v is negative", c.RTT))
	}
	if c.Bandwidth < 0 {
		errs = append(errs, fmt.Errorf("Bandwidth %d B/s is negative", c.Bandwidth))
	}
	if c.Burst < 0 {
		errs = append(errs, fmt.Errorf("Burst %d B is negative", c.Burst))
	}
	if c.MaxInFlight < 0 {
		errs = append(errs, fmt.Errorf("MaxInFlight %d B is negative", c.MaxInFlight))
	}
	if c.DialTimeout < 0 {
		errs = append(errs, fmt.Errorf("DialTimeout %v is negative", c.DialTimeout))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("wan: invalid config: %w", err)
	}
	return nil
}
