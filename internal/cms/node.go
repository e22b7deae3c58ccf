// Package cms subscribes a hepcache node to an XRootD cluster manager
// (cmsd in the manager role) as a data server, the way an xrootd+cmsd pair
// does: it logs in with its data port and exported paths, answers the
// manager's state queries ("do you have /path?") with have, answers ping,
// usage and space, and leaves with disc. The manager then redirects
// clients that ask for a path to the nodes that said they have it, and
// stops doing so as soon as a node's connection drops.
package cms

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config describes a subscription. Zero fields take the defaults noted.
type Config struct {
	// Manager is the cmsd manager's "host:port" (its cms.port, 1213 at
	// most sites; the redirector's all.manager line).
	Manager string
	// DataPort is the port clients are redirected to: hepcache's root://
	// listener.
	DataPort int
	// Host is the name the manager records for this node (myHN); default
	// the machine's host name. The manager redirects clients to the
	// address the connection comes from.
	Host string
	// Paths are the path prefixes this node serves (default "/").
	Paths []string
	// Site is the site name reported at login (cmsd's all.sitename).
	Site string

	// Have reports whether the node can serve path: it is cached or can
	// be fetched from the origin. Required.
	Have func(ctx context.Context, path string) (bool, error)
	// Space reports free and total bytes of the cache and its
	// utilisation in percent; nil reports nothing free.
	Space func() (free, total uint64, utilPct int)
	// Load reports the node's load in percent (0-100) for the manager's
	// selection; nil reports 0.
	Load func() int

	// QueryTimeout bounds one Have call (default 5 s); the manager waits
	// only its lookup delay (cms.delay lookup, 5 s by default) for
	// answers anyway.
	QueryTimeout time.Duration
	// MaxQueries bounds the Have calls running at once (default 64);
	// queries beyond it get no answer, which the manager reads as "no".
	MaxQueries int
	// IdleTimeout is how long the manager may stay silent before the
	// connection is presumed dead (default 3 min; managers ping every
	// 60 s by default).
	IdleTimeout time.Duration
	// RetryMin and RetryMax bound the reconnection back-off (default 1 s
	// and 30 s).
	RetryMin, RetryMax time.Duration

	// Logger receives connection events (default slog.Default()).
	Logger *slog.Logger
}

func (c *Config) defaults() error {
	if c.Manager == "" {
		return errors.New("cms: no manager address")
	}
	if _, _, err := net.SplitHostPort(c.Manager); err != nil {
		return fmt.Errorf("cms: manager %q: want host:port: %w", c.Manager, err)
	}
	if c.DataPort <= 0 || c.DataPort > 65535 {
		return fmt.Errorf("cms: data port %d out of range", c.DataPort)
	}
	if c.Have == nil {
		return errors.New("cms: no Have function")
	}
	if c.Host == "" {
		c.Host, _ = os.Hostname()
	}
	if len(c.Paths) == 0 {
		c.Paths = []string{"/"}
	}
	for _, p := range c.Paths {
		if !strings.HasPrefix(p, "/") || strings.ContainsAny(p, " \n\x00") {
			return fmt.Errorf("cms: path %q: want an absolute path without spaces", p)
		}
	}
	if strings.ContainsAny(c.Site, " &=\n\x00") {
		return fmt.Errorf("cms: site name %q has spaces or CGI characters", c.Site)
	}
	if c.QueryTimeout <= 0 {
		c.QueryTimeout = 5 * time.Second
	}
	if c.MaxQueries <= 0 {
		c.MaxQueries = 64
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 3 * time.Minute
	}
	if c.RetryMin <= 0 {
		c.RetryMin = time.Second
	}
	if c.RetryMax < c.RetryMin {
		c.RetryMax = 30 * time.Second
		if c.RetryMax < c.RetryMin {
			c.RetryMax = c.RetryMin
		}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Stats counts what the node did; read with Node.Stats.
type Stats struct {
	Connected bool  // logged in to the manager now
	Logins    int64 // successful logins
	Queries   int64 // state queries received
	Haves     int64 // have answers sent
	Pings     int64 // pings answered
	Outside   int64 // state queries outside the exported paths (not answered)
}

// Node is a running subscription.
type Node struct {
	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	slots  chan struct{} // bounds concurrent Have calls

	mu   sync.Mutex
	conn net.Conn // current session, nil between sessions

	connected                     atomic.Bool
	logins, queries, haves, pings atomic.Int64
	outside                       atomic.Int64 // queries outside Paths
}

// Start validates cfg and starts subscribing in the background; it
// reconnects until Close.
func Start(cfg Config) (*Node, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &Node{cfg: cfg, ctx: ctx, cancel: cancel, done: make(chan struct{}), slots: make(chan struct{}, cfg.MaxQueries)}
	go n.run()
	return n, nil
}

// Stats returns the counters.
func (n *Node) Stats() Stats {
	return Stats{
		Connected: n.connected.Load(),
		Logins:    n.logins.Load(),
		Queries:   n.queries.Load(),
		Haves:     n.haves.Load(),
		Pings:     n.pings.Load(),
		Outside:   n.outside.Load(),
	}
}

// Close leaves the cluster: it tells the manager with disc (so clients
// stop being sent here at once) and stops reconnecting.
func (n *Node) Close() error {
	n.mu.Lock()
	if c := n.conn; c != nil {
		c.SetWriteDeadline(time.Now().Add(time.Second))
		c.Write(message(header{Code: codeDisc}, nil))
	}
	n.mu.Unlock()
	n.cancel()
	n.mu.Lock()
	if n.conn != nil {
		n.conn.Close()
	}
	n.mu.Unlock()
	<-n.done
	return nil
}

func (n *Node) run() {
	defer close(n.done)
	wait := n.cfg.RetryMin
	for n.ctx.Err() == nil {
		start := time.Now()
		err := n.session()
		n.connected.Store(false)
		if n.ctx.Err() != nil {
			return
		}
		if time.Since(start) > n.cfg.RetryMax {
			wait = n.cfg.RetryMin // the session lasted: start back-off afresh
		}
		n.cfg.Logger.Warn("cmsd manager session ended; reconnecting", "manager", n.cfg.Manager, "err", err, "in", wait)
		select {
		case <-n.ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, n.cfg.RetryMax)
	}
}

// session logs in and serves the manager's requests until the connection
// ends.
func (n *Node) session() error {
	d := net.Dialer{Timeout: 10 * time.Second}
	c, err := d.DialContext(n.ctx, "tcp", n.cfg.Manager)
	if err != nil {
		return err
	}
	n.mu.Lock()
	if n.ctx.Err() != nil {
		n.mu.Unlock()
		c.Close()
		return n.ctx.Err()
	}
	n.conn = c
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		n.conn = nil
		n.mu.Unlock()
		c.Close()
	}()

	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write(message(header{Code: codeLogin}, n.login().marshal())); err != nil {
		return err
	}
	h, data, err := readMessage(c)
	if err != nil {
		return fmt.Errorf("login: %w", err)
	}
	switch h.Code {
	case codeLogin:
		ans, err := unmarshalLogin(data)
		if err != nil {
			return err
		}
		n.cfg.Logger.Info("logged in to cmsd manager", "manager", n.cfg.Manager, "manager_id", ans.SID, "data_port", n.cfg.DataPort)
	case codeError:
		return fmt.Errorf("manager refused the login: %s", errorText(data))
	case codeTry:
		return fmt.Errorf("manager redirects the login elsewhere (%q), which is not supported", data)
	case codeXauth:
		return errors.New("manager demands cms authentication (cms.sec), which is not supported")
	default:
		return fmt.Errorf("unexpected login answer code %d", h.Code)
	}
	n.logins.Add(1)
	n.connected.Store(true)
	// A real data server announces that it is up and cannot stage, with
	// its data port in the stream id; do the same.
	if err := n.send(header{StreamID: uint32(n.cfg.DataPort), Code: codeStatus, Modifier: statusNoStage | statusResume}, nil); err != nil {
		return err
	}

	for {
		c.SetReadDeadline(time.Now().Add(n.cfg.IdleTimeout))
		h, data, err := readMessage(c)
		if err != nil {
			return err
		}
		switch h.Code {
		case codeState:
			n.queries.Add(1)
			n.answerState(h, data)
		case codePing:
			n.pings.Add(1)
			err = n.send(header{Code: codePong}, nil)
		case codeUsage:
			err = n.send(header{Code: codeLoad}, n.loadData())
		case codeSpace:
			err = n.send(header{Code: codeAvail}, n.availData())
		case codeUpdate:
			err = n.send(header{StreamID: uint32(n.cfg.DataPort), Code: codeStatus, Modifier: statusNoStage | statusResume}, nil)
		case codeDisc:
			return errors.New("manager asked to disconnect")
		case codeTry:
			return errors.New("manager redirects this node elsewhere")
		default:
			// Namespace operations (rm, mv, chmod...), prepare and stats
			// do not apply to a read-only cache: ignored, as a cmsd
			// without a writable file system does.
		}
		if err != nil {
			return err
		}
	}
}

// login builds this node's login data.
func (n *Node) login() *loginData {
	free, total, util := n.space()
	var paths []string
	for _, p := range n.cfg.Paths {
		paths = append(paths, "r "+p)
	}
	env := "myHN=" + n.cfg.Host
	if n.cfg.Site != "" {
		env += "&site=" + n.cfg.Site
	}
	return &loginData{
		Version:  protocolVersion,
		Mode:     modeServer | modeNoStage | modeBlRedir,
		HoldTime: uint32(os.Getpid()),
		TSpace:   uint32(min(total>>30, 1<<31)),
		FSpace:   uint32(min(free>>20, 1<<31)),
		FSNum:    1,
		FSUtil:   uint16(util),
		DPort:    uint16(n.cfg.DataPort),
		// The system id names this node uniquely (several nodes may share
		// a host) and the cluster it joins, as cmsd's does.
		SID:    fmt.Sprintf("s-hepcache@%s:%d %s", n.cfg.Host, n.cfg.DataPort, n.cfg.Manager),
		Paths:  strings.Join(paths, "\n"),
		EnvCGI: env,
	}
}

func (n *Node) space() (free, total uint64, util int) {
	if n.cfg.Space == nil {
		return 0, 0, 0
	}
	free, total, util = n.cfg.Space()
	return free, total, max(0, min(util, 100))
}

// availData answers space: free MB and utilisation.
func (n *Node) availData() []byte {
	free, _, util := n.space()
	var p packer
	p.inlineInt(uint32(min(free>>20, 1<<31)))
	p.inlineInt(uint32(util))
	return p.b
}

// loadData answers usage: six load percentages (cpu, net, xeq, mem,
// pag, dsk) and free MB.
func (n *Node) loadData() []byte {
	free, _, util := n.space()
	load := 0
	if n.cfg.Load != nil {
		load = max(0, min(n.cfg.Load(), 100))
	}
	var p packer
	p.bytes([]byte{byte(load), byte(load), byte(load), 0, 0, byte(util)})
	p.inlineInt(uint32(min(free>>20, 1<<31)))
	return p.b
}

// exports reports whether p (cleaned: ".." cannot climb out) lies under one
// of the exported paths.
func (n *Node) exports(p string) bool {
	p = path.Clean(p)
	for _, e := range n.cfg.Paths {
		e = path.Clean(e)
		if e == "/" || p == e || strings.HasPrefix(p, e+"/") {
			return true
		}
	}
	return false
}

// answerState asks Have in the background and answers have when the
// node can serve the path; silence means "no" to the manager.
func (n *Node) answerState(h header, data []byte) {
	path, err := pathOf(h, data)
	if err != nil {
		n.cfg.Logger.Warn("cmsd manager sent a bad state query", "err", err)
		return
	}
	if h.Modifier&modStateNoRsp != 0 {
		return
	}
	// Only what the node exports (its login said so): anything else is
	// not ours to look up, and each lookup is an origin stat.
	if !n.exports(path) {
		n.outside.Add(1)
		n.cfg.Logger.Debug("cmsd state query outside the exported paths; not answered", "path", path)
		return
	}
	select {
	case n.slots <- struct{}{}:
	default:
		n.cfg.Logger.Warn("cmsd state queries beyond the limit; not answered", "path", path, "limit", n.cfg.MaxQueries)
		return
	}
	go func() {
		defer func() { <-n.slots }()
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.QueryTimeout)
		defer cancel()
		ok, err := n.cfg.Have(ctx, path)
		if err != nil || !ok {
			return
		}
		// The answer carries the query's stream id (the manager's hash
		// of the path) and the path as it came, NUL-terminated.
		if n.send(header{StreamID: h.StreamID, Code: codeHave, Modifier: modHaveOnline | modRaw}, append([]byte(path), 0)) == nil {
			n.haves.Add(1)
		}
	}()
}

// send writes one message on the current session.
func (n *Node) send(h header, data []byte) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.conn == nil {
		return net.ErrClosed
	}
	n.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := n.conn.Write(message(h, data))
	return err
}

// errorText reads a kYR_error answer: a 32-bit code and a message.
func errorText(data []byte) string {
	if len(data) < 4 {
		return "(no reason given)"
	}
	msg := data[4:]
	if i := indexNUL(msg); i >= 0 {
		msg = msg[:i]
	}
	return string(msg)
}
