// Package client is a root:// (XRootD protocol v5) client for fetching from
// origin servers. Each server gets a few TCP connections; on each, many
// requests are in flight at once, told apart by stream id, and one read loop
// per connection routes responses, reading payloads straight into the
// callers' buffers. It follows kXR_redirect and kXR_wait, and fails pending
// calls with origin.ErrUnavailable when a connection dies.
package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hepcache/hepcache/internal/xrootd/proto"
)

// Client talks to any number of servers. It is safe for concurrent use.
type Client struct {
	cfg Config

	// mu protects hosts and closed.
	mu     sync.Mutex
	hosts  map[string]*host
	closed bool
}

// ErrClosed is returned by calls on a closed Client.
var ErrClosed = errors.New("client: closed")

// New returns a Client; cfg may be nil for the defaults.
func New(cfg *Config) (*Client, error) {
	var c Client
	if cfg != nil {
		c.cfg = *cfg
	}
	c.cfg.EnsureDefaults()
	if err := c.cfg.Validate(); err != nil {
		return nil, err
	}
	c.hosts = make(map[string]*host)
	return &c, nil
}

// Close closes every connection. Calls in flight fail.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	hosts := c.hosts
	c.hosts = map[string]*host{}
	c.mu.Unlock()
	for _, h := range hosts {
		h.close()
	}
	return nil
}

// host returns the connection pool of addr ("host:port").
func (c *Client) host(addr string) (*host, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	h := c.hosts[addr]
	if h == nil {
		h = &host{addr: addr, cfg: &c.cfg, slots: make([]slot, c.cfg.ConnsPerHost)}
		c.hosts[addr] = h
	}
	return h, nil
}

// host is the pool of connections to one server.
type host struct {
	addr   string
	cfg    *Config
	next   atomic.Uint32
	slots  []slot
	closed atomic.Bool // set by Client.Close: Files still holding the host fail

	// rv protects the readv limits, learnt once from the server.
	rv struct {
		sync.Mutex
		known    bool
		maxSegs  int
		maxSegSz int
	}
}

// slot holds one connection of a pool and redials it when it has failed.
type slot struct {
	// mu protects the fields below.
	mu      sync.Mutex
	c       *conn
	dialing chan struct{} // closed when the dial in progress ends
	err     error         // of the last dial
}

// pick returns the next live connection round-robin and its slot index;
// if none is live yet, the next slot's (dialing it), and the other slots
// are dialed in the background so the pool fills up.
func (h *host) pick(ctx context.Context) (*conn, int, error) {
	n := len(h.slots)
	start := int(h.next.Add(1)-1) % n
	for k := 0; k < n; k++ {
		i := (start + k) % n
		s := &h.slots[i]
		s.mu.Lock()
		c := s.c
		s.mu.Unlock()
		if c != nil && !c.failed() {
			return c, i, nil
		}
	}
	h.fill()
	c, err := h.conn(ctx, start)
	return c, start, err
}

// fill dials, in the background, every slot without a connection. A dial
// belongs to the pool, not to whoever needed it first, so it is not
// cancelled with a caller's context.
func (h *host) fill() {
	for i := range h.slots {
		s := &h.slots[i]
		s.mu.Lock()
		idle := (s.c == nil || s.c.failed()) && s.dialing == nil
		s.mu.Unlock()
		if idle {
			go func(i int) {
				ctx, cancel := context.WithTimeout(context.Background(), h.cfg.DialTimeout)
				defer cancel()
				h.conn(ctx, i)
			}(i)
		}
	}
}

// conn returns the live connection of slot i, dialing it if needed. One
// caller dials; others wait for it.
func (h *host) conn(ctx context.Context, i int) (*conn, error) {
	s := &h.slots[i]
	for {
		if h.closed.Load() {
			return nil, ErrClosed
		}
		s.mu.Lock()
		if s.c != nil && !s.c.failed() {
			c := s.c
			s.mu.Unlock()
			return c, nil
		}
		if ch := s.dialing; ch != nil {
			s.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			s.mu.Lock()
			c, err := s.c, s.err
			s.mu.Unlock()
			if err != nil {
				return nil, err
			}
			if c != nil && !c.failed() {
				return c, nil
			}
			continue // it died already: dial again
		}
		ch := make(chan struct{})
		s.dialing = ch
		old := s.c
		s.c = nil
		s.mu.Unlock()
		if old != nil {
			old.close()
		}
		c, err := dialConn(ctx, h.addr, h.cfg)
		s.mu.Lock()
		s.c, s.err, s.dialing = c, err, nil
		close(ch)
		s.mu.Unlock()
		return c, err
	}
}

func (h *host) close() {
	h.closed.Store(true)
	for i := range h.slots {
		s := &h.slots[i]
		s.mu.Lock()
		c := s.c
		s.c = nil
		s.mu.Unlock()
		if c != nil {
			c.close()
		}
	}
}

// roundTrip sends one buffered request on cn and waits for its final
// answer. The returned call is owned by the caller (putCall) unless err is
// not nil.
func (cn *conn) roundTrip(ctx context.Context, kind callKind, enc func(dst []byte, sid proto.StreamID) []byte) (*call, error) {
	cl := getCall(kind)
	if err := cn.start(ctx, cl, enc); err != nil {
		putCall(cl)
		return nil, err
	}
	if owned, err := cn.wait(ctx, cl); err != nil {
		if owned {
			putCall(cl)
		}
		return nil, err
	}
	return cl, nil
}

// pathRequest sends the request enc builds for path to addr, following
// kXR_redirect and kXR_wait, and calls fn with the final kXR_ok answer
// (body valid during fn only), the connection and its slot. It returns the
// address and path (with the redirect's opaque) that answered.
func (c *Client) pathRequest(ctx context.Context, op, addr, path string,
	enc func(dst []byte, sid proto.StreamID, path string) []byte,
	fn func(cn *conn, slot int, body []byte) error) (string, string, error) {
	base := path
	hops, waits := 0, 0
	for {
		h, err := c.host(addr)
		if err != nil {
			return addr, path, err
		}
		cn, slot, err := h.pick(ctx)
		if err != nil {
			return addr, path, err
		}
		cl, err := cn.roundTrip(ctx, kindBuffered, func(dst []byte, sid proto.StreamID) []byte { return enc(dst, sid, path) })
		if err != nil {
			return addr, path, fmt.Errorf("%s root://%s/%s: %w", op, addr, path, err)
		}
		switch cl.status {
		case proto.StatusOK:
			err = fn(cn, slot, cl.body)
			putCall(cl)
			return addr, path, err
		case proto.StatusRedirect:
			port, target, derr := proto.DecodeRedirect(cl.body)
			putCall(cl)
			if derr != nil {
				return addr, path, fmt.Errorf("%s root://%s/%s: %w", op, addr, path, derr)
			}
			hops++
			if hops > c.cfg.MaxRedirects {
				return addr, path, fmt.Errorf("%s root://%s/%s: more than %d redirects (last to %s port %d): %w",
					op, addr, path, c.cfg.MaxRedirects, target, port, ErrTooManyRedirects)
			}
			naddr, opaque, rerr := redirectTarget(port, target)
			if rerr != nil {
				return addr, path, fmt.Errorf("%s root://%s/%s: %w", op, addr, path, rerr)
			}
			addr, path = naddr, withOpaque(base, opaque)
		case proto.StatusWait:
			secs, _, derr := proto.DecodeWait(cl.body)
			putCall(cl)
			if derr != nil {
				return addr, path, fmt.Errorf("%s root://%s/%s: %w", op, addr, path, derr)
			}
			waits++
			if err := c.sleepWait(ctx, waits, secs); err != nil {
				return addr, path, fmt.Errorf("%s root://%s/%s: %w", op, addr, path, err)
			}
		default:
			err := answerError(cl)
			putCall(cl)
			return addr, path, fmt.Errorf("%s root://%s/%s: %w", op, addr, path, err)
		}
	}
}

// ErrTooManyRedirects reports a request redirected more than MaxRedirects
// times.
var ErrTooManyRedirects = errors.New("client: too many redirects")

// ErrTooManyWaits reports a request told to wait more than MaxWaits times.
var ErrTooManyWaits = errors.New("client: too many kXR_wait answers")

// sleepWait sleeps for a kXR_wait of secs seconds (capped by MaxWait).
func (c *Client) sleepWait(ctx context.Context, waits int, secs int32) error {
	if waits > c.cfg.MaxWaits {
		return fmt.Errorf("server asked to wait %d times: %w", waits, ErrTooManyWaits)
	}
	d := min(time.Duration(max(secs, 0))*time.Second, c.cfg.MaxWait)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// answerError converts a non-ok final answer into an error: *proto.Error
// for kXR_error.
func answerError(cl *call) error {
	if cl.status == proto.StatusError {
		code, msg, err := proto.DecodeError(cl.body)
		if err != nil {
			return err
		}
		return &proto.Error{Code: code, Message: msg}
	}
	return fmt.Errorf("unexpected %v answer: %w", cl.status, proto.ErrMalformed)
}

// redirectTarget turns a kXR_redirect (port, "host[?opaque]" or a URL when
// port <= 0) into "host:port" and the opaque to add to the path.
func redirectTarget(port int32, target string) (addr, opaque string, err error) {
	if strings.Contains(target, "://") {
		u, err := url.Parse(target)
		if err != nil {
			return "", "", fmt.Errorf("redirect to %q: %w", target, err)
		}
		if u.Scheme != "root" && u.Scheme != "xroot" {
			return "", "", fmt.Errorf("redirect to %q: scheme %q not supported", target, u.Scheme)
		}
		h := u.Host
		if u.Port() == "" {
			h = net.JoinHostPort(u.Hostname(), "1094")
		}
		return h, u.RawQuery, nil
	}
	host, opaque, _ := strings.Cut(target, "?")
	if port <= 0 || host == "" {
		return "", "", fmt.Errorf("redirect to %q port %d: not supported", target, port)
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return net.JoinHostPort(host, strconv.Itoa(int(port))), opaque, nil
}

// withOpaque appends opaque to path's CGI.
func withOpaque(path, opaque string) string {
	if opaque == "" {
		return path
	}
	if strings.Contains(path, "?") {
		return path + "&" + opaque
	}
	return path + "?" + opaque
}

// Stat returns the stat information of path at addr.
func (c *Client) Stat(ctx context.Context, addr, path string) (proto.StatInfo, error) {
	var st proto.StatInfo
	_, _, err := c.pathRequest(ctx, "stat", addr, path,
		func(dst []byte, sid proto.StreamID, p string) []byte {
			return (&proto.StatRequest{Path: p}).Append(dst, sid)
		},
		func(_ *conn, _ int, body []byte) (err error) {
			st, err = proto.ParseStatInfo(body)
			return err
		})
	return st, err
}

// Dirlist lists directory path at addr. With withStat, every entry carries
// its stat information (kXR_dstat; entries of servers without dstat are
// stat'ed one by one).
func (c *Client) Dirlist(ctx context.Context, addr, path string, withStat bool) ([]proto.DirEntry, error) {
	var opts proto.DirlistOptions
	if withStat {
		opts = proto.DirlistDStat
	}
	var entries []proto.DirEntry
	faddr, fpath, err := c.pathRequest(ctx, "dirlist", addr, path,
		func(dst []byte, sid proto.StreamID, p string) []byte {
			return (&proto.DirlistRequest{Options: opts, Path: p}).Append(dst, sid)
		},
		func(_ *conn, _ int, body []byte) (err error) {
			entries, err = proto.ParseDirlist(nil, body)
			return err
		})
	if err != nil || !withStat {
		return entries, err
	}
	dir, _ := proto.SplitOpaque(fpath)
	for i := range entries {
		if entries[i].HasStat {
			continue
		}
		st, err := c.Stat(ctx, faddr, strings.TrimSuffix(dir, "/")+"/"+entries[i].Name)
		if err != nil {
			return nil, err
		}
		entries[i].Stat, entries[i].HasStat = st, true
	}
	return entries, nil
}

// ErrOtherAlgorithm reports a checksum answer in another algorithm than the
// one asked for (servers configured with one algorithm ignore cks.type).
var ErrOtherAlgorithm = errors.New("client: server answered with another checksum algorithm")

// QueryChecksum asks addr for the checksum of path. algo ("adler32",
// "crc32c", "md5", ...) selects the algorithm when the server computes
// several; "" takes the server's default. It returns the algorithm the
// server used and the value as the server prints it (hex).
func (c *Client) QueryChecksum(ctx context.Context, addr, path, algo string) (gotAlgo, value string, err error) {
	args := path
	if algo != "" {
		args = withOpaque(path, "cks.type="+algo)
	}
	_, _, err = c.pathRequest(ctx, "query checksum", addr, args,
		func(dst []byte, sid proto.StreamID, p string) []byte {
			return (&proto.QueryRequest{Type: proto.QueryChecksum, Args: p}).Append(dst, sid)
		},
		func(_ *conn, _ int, body []byte) error {
			s := strings.TrimRight(string(body), "\x00\n")
			a, v, ok := strings.Cut(s, " ")
			if !ok || v == "" {
				return fmt.Errorf("checksum answer %q: %w", s, proto.ErrMalformed)
			}
			gotAlgo, value = a, strings.TrimSpace(v)
			return nil
		})
	if err == nil && algo != "" && !strings.EqualFold(gotAlgo, algo) {
		return gotAlgo, value, fmt.Errorf("query checksum root://%s/%s: asked for %s, server answered %s: %w", addr, path, algo, gotAlgo, ErrOtherAlgorithm)
	}
	return gotAlgo, value, err
}

// QueryConfig asks addr for the values of configuration keys
// ("readv_iov_max", "version", ...). Unknown keys come back as their name.
func (c *Client) QueryConfig(ctx context.Context, addr string, keys ...string) ([]string, error) {
	var vals []string
	_, _, err := c.pathRequest(ctx, "query config", addr, strings.Join(keys, " "),
		func(dst []byte, sid proto.StreamID, p string) []byte {
			return (&proto.QueryRequest{Type: proto.QueryConfig, Args: p}).Append(dst, sid)
		},
		func(_ *conn, _ int, body []byte) error {
			s := strings.TrimRight(string(body), "\x00\n")
			vals = strings.Split(s, "\n")
			if len(vals) != len(keys) {
				return fmt.Errorf("query config %q: %d answers: %w", keys, len(vals), proto.ErrMalformed)
			}
			return nil
		})
	return vals, err
}

// Locate asks addr where path is.
func (c *Client) Locate(ctx context.Context, addr, path string, opts proto.OpenOptions) ([]proto.LocateEntry, error) {
	var out []proto.LocateEntry
	_, _, err := c.pathRequest(ctx, "locate", addr, path,
		func(dst []byte, sid proto.StreamID, p string) []byte {
			return (&proto.LocateRequest{Options: opts, Path: p}).Append(dst, sid)
		},
		func(_ *conn, _ int, body []byte) (err error) {
			out, err = proto.ParseLocateResponse(body)
			return err
		})
	return out, err
}

// Ping sends kXR_ping to addr, connecting first if needed.
func (c *Client) Ping(ctx context.Context, addr string) error {
	h, err := c.host(addr)
	if err != nil {
		return err
	}
	cn, _, err := h.pick(ctx)
	if err != nil {
		return err
	}
	cl, err := cn.roundTrip(ctx, kindBuffered, (&proto.PingRequest{}).Append)
	if err != nil {
		return fmt.Errorf("ping root://%s: %w", addr, err)
	}
	defer putCall(cl)
	if cl.status != proto.StatusOK {
		return fmt.Errorf("ping root://%s: %w", addr, answerError(cl))
	}
	return nil
}
