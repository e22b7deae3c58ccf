// Package monitor sends XRootD's monitoring streams over UDP, so that the
// collectors a WLCG site already feeds (OSG, CMS, ATLAS) see hepcache as they
// see an XCache: the summary report (xrd.report XML), the f-stream (file
// open, transfer and close records with user identity mapping) and the
// cache g-stream (XrdPfc's file_close JSON records). The formats are those of
// XRootD 5 (XrdXrootdMonData.hh, docs/monitoring.md); the encoders are
// written from the format, not from XRootD's code.
//
// The front ends feed the f-stream through Wrap (a backend.Backend that sees
// every open, read and close); the cache feeds the g-stream through Access
// (its access record at the last close).
package monitor

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hepcache/hepcache/internal/buildinfo"
)

// Config says where the streams go and how often. A stream with an empty
// destination is off.
type Config struct {
	// Summary, FStream and GStream are UDP "host:port" destinations.
	Summary, FStream, GStream string
	// SummaryInterval is the time between summary reports (xrd.report
	// every). Default 60s.
	SummaryInterval time.Duration
	// FStreamFlush is the longest an f-stream record waits in the buffer
	// (monitor fstat <sec>). Default 60s.
	FStreamFlush time.Duration
	// XfrInterval is the time between transfer (isXfr) records of each open
	// file that read something since the last (fstat xfr); 0 means off.
	XfrInterval time.Duration
	// GStreamFlush is the longest a g-stream record waits (mongstream
	// flush). Default 60s.
	GStreamFlush time.Duration
	// GStreamJSONHeader starts each g-stream packet with XRootD's JSON
	// header line (mongstream ... send json dflthdr) instead of the binary
	// XrdXrootdMonGS header that collectors receive with the "pfc" event.
	GStreamJSONHeader bool
	// IdentInterval is the time between server identification ('=')
	// records on the f-stream (monitor ident). Default 1h; negative is off.
	IdentInterval time.Duration
	// Host and Port name this server (the root:// port); Name is the
	// instance name (xrootd -n, "anon" by default); Site the site name
	// (all.sitename / XRDSITE).
	Host string
	Port int
	Name string
	Site string
	// Stats returns the figures of the summary report.
	Stats func() Figures
	// Logger receives send errors (at most one a minute).
	Logger *slog.Logger
	// now is the clock (tests).
	now func() time.Time
}

// Enabled reports whether any stream has a destination.
func (c *Config) Enabled() bool { return c.Summary != "" || c.FStream != "" || c.GStream != "" }

func (c *Config) ensureDefaults() {
	if c.SummaryInterval <= 0 {
		c.SummaryInterval = time.Minute
	}
	if c.FStreamFlush <= 0 {
		c.FStreamFlush = time.Minute
	}
	if c.GStreamFlush <= 0 {
		c.GStreamFlush = time.Minute
	}
	if c.IdentInterval == 0 {
		c.IdentInterval = time.Hour
	}
	if c.Host == "" {
		c.Host, _ = os.Hostname()
	}
	if c.Name == "" {
		c.Name = "anon"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.now == nil {
		c.now = time.Now
	}
}

// Monitor runs the configured streams. Its methods are safe for concurrent
// use; a nil *Monitor does nothing.
type Monitor struct {
	cfg   Config
	start time.Time
	// sid is the 48-bit server id of the packets; sidText its decimal form
	// in identities.
	sid     uint64
	sidText string
	version string

	summary, fstream, gstream *sender
	// maxConns is the most connections a report saw (summary goroutine).
	maxConns int64

	dictID atomic.Uint32 // last dictionary id handed out (files and users)
	fs     *fileStream   // nil when the f-stream is off
	gs     *gStream      // nil when the g-stream is off

	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// New starts the streams of cfg. It fails if a destination does not resolve.
func New(cfg Config) (*Monitor, error) {
	cfg.ensureDefaults()
	m := &Monitor{cfg: cfg, start: cfg.now(), version: version(), stop: make(chan struct{})}
	m.sid = serverID(cfg.Site, cfg.Host, cfg.Port, cfg.Name)
	m.sidText = strconv.FormatUint(m.sid, 10)
	var err error
	open := func(key, dest string) *sender {
		if dest == "" || err != nil {
			return nil
		}
		var s *sender
		if s, err = dial(dest, cfg.Logger); err != nil {
			err = fmt.Errorf("monitor.%s %q: %w", key, dest, err)
		}
		return s
	}
	m.summary = open("summary", cfg.Summary)
	m.fstream = open("fstream", cfg.FStream)
	m.gstream = open("gstream", cfg.GStream)
	if err != nil {
		m.closeSenders()
		return nil, err
	}
	if m.summary != nil {
		m.every(cfg.SummaryInterval, m.sendSummary)
	}
	if m.fstream != nil {
		m.fs = newFileStream(m)
		m.every(cfg.FStreamFlush, m.fs.flush)
		if cfg.XfrInterval > 0 {
			m.every(cfg.XfrInterval, m.fs.transfers)
		}
		if cfg.IdentInterval > 0 {
			m.sendIdent()
			m.every(cfg.IdentInterval, m.sendIdent)
		}
	}
	if m.gstream != nil {
		m.gs = newGStream(m)
		m.every(cfg.GStreamFlush, m.gs.flush)
	}
	return m, nil
}

// every runs fn each d until Close.
func (m *Monitor) every(d time.Duration, fn func()) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-t.C:
				fn()
			}
		}
	}()
}

// Close flushes what is buffered (the close records of files still open
// are not invented) and stops the streams.
func (m *Monitor) Close() error {
	if m == nil {
		return nil
	}
	m.once.Do(func() {
		close(m.stop)
		m.wg.Wait()
		if m.fs != nil {
			m.fs.flush()
		}
		if m.gs != nil {
			m.gs.flush()
		}
		if m.summary != nil {
			m.sendSummary()
		}
		m.closeSenders()
	})
	return nil
}

func (m *Monitor) closeSenders() {
	for _, s := range []*sender{m.summary, m.fstream, m.gstream} {
		if s != nil {
			s.conn.Close()
		}
	}
}

// nextDictID hands out the dictionary ids of files and users (one
// sequence, as XRootD's).
func (m *Monitor) nextDictID() uint32 { return m.dictID.Add(1) }

// stod is the server start time, the header field every packet carries.
func (m *Monitor) stod() uint32 { return uint32(m.start.Unix()) }

// serverID is a 48-bit fingerprint of what names this server, stable across
// restarts (collectors key servers by it).
func serverID(site, host string, port int, name string) uint64 {
	h := sha256.Sum256([]byte(site + "\x00" + host + "\x00" + strconv.Itoa(port) + "\x00" + name + "\x00hepcache"))
	return binary.BigEndian.Uint64(h[:8]) & sidMask
}

const sidMask = 1<<48 - 1

// version is the one `hepcache version` prints ("0.1.0+git59a7654"), not
// the module's pseudo-version.
func version() string { return buildinfo.Get().Version }

// sender writes datagrams to one destination. Errors are counted and
// logged at most once a minute: a collector that is down must not flood
// the log or slow the server.
type sender struct {
	conn    net.Conn
	log     *slog.Logger
	Errors  atomic.Int64
	Packets atomic.Int64
	mu      sync.Mutex // protects lastLog
	lastLog time.Time
}

func dial(dest string, log *slog.Logger) (*sender, error) {
	if _, _, err := net.SplitHostPort(dest); err != nil {
		return nil, err
	}
	c, err := net.Dial("udp", dest)
	if err != nil {
		return nil, err
	}
	return &sender{conn: c, log: log}, nil
}

func (s *sender) send(b []byte) {
	if _, err := s.conn.Write(b); err != nil {
		s.Errors.Add(1)
		s.mu.Lock()
		if time.Since(s.lastLog) > time.Minute {
			s.lastLog = time.Now()
			s.log.Warn("monitor: send failed", "dest", s.conn.RemoteAddr().String(), "err", err)
		}
		s.mu.Unlock()
		return
	}
	s.Packets.Add(1)
}

var errTooLong = errors.New("monitor: record longer than a packet")
