// Package hostallow limits which client addresses may connect, as XRootD's
// xrd.allow: addresses, CIDR blocks, host names and domains, the names
// matched on the client's reverse DNS name confirmed by a forward lookup
// (a PTR record alone is the client's own claim).
package hostallow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Resolver is the DNS the name patterns need; *net.Resolver implements it.
type Resolver interface {
	LookupAddr(ctx context.Context, addr string) ([]string, error)
	LookupHost(ctx context.Context, host string) ([]string, error)
}

// List is a parsed allow-list. Safe for concurrent use.
type List struct {
	// rules are replaced as a whole by Set; no rules: every address.
	rules   atomic.Pointer[rules]
	res     Resolver
	timeout time.Duration
	ttl     time.Duration

	mu    sync.Mutex
	names map[string]cached // IP -> its confirmed names
}

// rules are the parsed patterns of a List.
type rules struct {
	nets  []*net.IPNet
	hosts []string // exact names, lower case, no trailing dot
	// patterns have one '*' (XRootD's xrd.allow host patterns): a name
	// matches with the prefix before it and the suffix after it
	// ("wn*.t2.example.edu", "*.site.example"; ".site.example" is "*.site.example").
	patterns []pattern
}

func (r *rules) empty() bool { return len(r.nets) == 0 && len(r.hosts) == 0 && len(r.patterns) == 0 }

type pattern struct{ prefix, suffix string }

func (p pattern) match(name string) bool {
	return len(name) >= len(p.prefix)+len(p.suffix) && strings.HasPrefix(name, p.prefix) && strings.HasSuffix(name, p.suffix)
}

type cached struct {
	names []string
	until time.Time
}

// maxCached bounds the name cache (one entry per client address).
const maxCached = 65536

// New parses patterns: "10.1.2.3", "10.0.0.0/8", "node1.site.example",
// "*.site.example" or ".site.example". res is the DNS (nil:
// net.DefaultResolver).
func New(patterns []string, res Resolver) (*List, error) {
	l := &List{res: res, timeout: 2 * time.Second, ttl: 5 * time.Minute, names: map[string]cached{}}
	if l.res == nil {
		l.res = net.DefaultResolver
	}
	if err := l.Set(patterns); err != nil {
		return nil, err
	}
	return l, nil
}

// Set replaces the patterns (SIGHUP): connections accepted from now on are
// checked against them; none lets every address in. On error the list is
// unchanged. Safe for concurrent use.
func (l *List) Set(patterns []string) error {
	r := &rules{}
	for _, p := range patterns {
		p = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(p), "."))
		switch {
		case strings.Contains(p, "/"):
			_, n, err := net.ParseCIDR(p)
			if err != nil {
				return fmt.Errorf("allow_hosts %q: %w", p, err)
			}
			r.nets = append(r.nets, n)
		case net.ParseIP(p) != nil:
			ip := net.ParseIP(p)
			bits := 128
			if ip.To4() != nil {
				ip, bits = ip.To4(), 32
			}
			r.nets = append(r.nets, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
		case strings.HasPrefix(p, "."):
			r.patterns = append(r.patterns, pattern{suffix: p})
		case strings.Count(p, "*") == 1:
			pre, suf, _ := strings.Cut(p, "*")
			r.patterns = append(r.patterns, pattern{pre, suf})
		case p == "" || strings.Contains(p, "*") || strings.HasPrefix(p, "+"):
			return fmt.Errorf("allow_hosts %q: an address, CIDR block, host name or a name with one * (wn*.site.example, *.site.example)", p)
		default:
			r.hosts = append(r.hosts, p)
		}
	}
	l.rules.Store(r)
	return nil
}

// Allowed reports whether a client at ip may connect. Name patterns cost
// a reverse and a forward lookup per address (cached for minutes); a
// failed lookup refuses.
func (l *List) Allowed(ctx context.Context, ip net.IP) bool {
	r := l.rules.Load()
	switch r.decide(ip) {
	case allow:
		return true
	case refuse:
		return false
	}
	for _, name := range l.namesOf(ctx, ip) {
		for _, h := range r.hosts {
			if name == h {
				return true
			}
		}
		for _, p := range r.patterns {
			if p.match(name) {
				return true
			}
		}
	}
	return false
}

// decision is what the rules can say of an address without DNS.
type decision int

const (
	allow decision = iota
	refuse
	lookup // a name pattern decides: reverse and forward lookups needed
)

// allowedNow decides what it can without DNS.
func (l *List) allowedNow(ip net.IP) decision { return l.rules.Load().decide(ip) }

// decide says what r can of ip without DNS.
func (r *rules) decide(ip net.IP) decision {
	if r.empty() {
		return allow
	}
	for _, n := range r.nets {
		if n.Contains(ip) {
			return allow
		}
	}
	if len(r.hosts) == 0 && len(r.patterns) == 0 {
		return refuse
	}
	return lookup
}

// namesOf returns the names of ip that resolve back to it.
func (l *List) namesOf(ctx context.Context, ip net.IP) []string {
	key := ip.String()
	now := time.Now()
	l.mu.Lock()
	if c, ok := l.names[key]; ok && now.Before(c.until) {
		l.mu.Unlock()
		return c.names
	}
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	var out []string
	ptrs, _ := l.res.LookupAddr(ctx, key)
	for _, n := range ptrs {
		n = strings.ToLower(strings.TrimSuffix(n, "."))
		addrs, _ := l.res.LookupHost(ctx, n)
		for _, a := range addrs {
			if ai := net.ParseIP(a); ai != nil && ai.Equal(ip) {
				out = append(out, n)
				break
			}
		}
	}
	l.mu.Lock()
	if len(l.names) >= maxCached {
		clear(l.names)
	}
	l.names[key] = cached{names: out, until: now.Add(l.ttl)}
	l.mu.Unlock()
	return out
}

// Listener returns ln limited to the list: connections from other
// addresses are closed at once (logged at most once a minute per
// address). Accepting stays in Accept, so a connection nobody accepts
// waits in the kernel's backlog (a server handing its socket over to its
// successor stops accepting and leaves the rest to it); only the DNS
// lookups a name pattern needs run beside it, so a slow answer for one
// client holds up no other.
func (l *List) Listener(ln net.Listener, log *slog.Logger) net.Listener {
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &allowListener{Listener: ln, l: l, log: log, ctx: ctx, cancel: cancel,
		conns: make(chan net.Conn, 64), logged: map[string]time.Time{}}
}

// lookupPoll is how long Accept waits in the underlying Accept while
// lookups are under way, before it looks for their answers.
const lookupPoll = 20 * time.Millisecond

type allowListener struct {
	net.Listener
	l      *List
	log    *slog.Logger
	ctx    context.Context // ends the lookups at Close
	cancel context.CancelFunc
	// conns holds the connections whose lookups allowed them; pending
	// counts the lookups under way.
	conns   chan net.Conn
	pending atomic.Int32
	backoff time.Duration // Accept's; only Accept's goroutine uses it

	// mu protects logged.
	mu     sync.Mutex
	logged map[string]time.Time
}

// deadliner is a listener whose Accept can be bounded in time.
type deadliner interface{ SetDeadline(time.Time) error }

// Accept returns the next allowed connection. Any error but the
// listener's close passes (out of descriptors above all: one EMFILE ended
// the old loop for good, and the front end with it, long after the flood
// that caused it was gone): it backs off and accepts again, as net/http
// does.
func (a *allowListener) Accept() (net.Conn, error) {
	for {
		select {
		case c := <-a.conns:
			return c, nil
		default:
		}
		bounded := false
		if dl, ok := a.Listener.(deadliner); ok {
			var until time.Time
			if a.pending.Load() > 0 {
				until = time.Now().Add(lookupPoll)
			}
			bounded = dl.SetDeadline(until) == nil
		}
		c, err := a.Listener.Accept()
		if err != nil {
			var ne net.Error
			switch {
			case errors.Is(err, net.ErrClosed) || a.ctx.Err() != nil:
				return nil, err
			case bounded && errors.As(err, &ne) && ne.Timeout():
				continue // a lookup may have answered
			}
			a.backoff = min(max(2*a.backoff, 5*time.Millisecond), time.Second)
			if a.backoff == 5*time.Millisecond { // once an episode
				a.log.Warn("accept failed; backing off and accepting again", "err", err)
			}
			select {
			case <-time.After(a.backoff):
			case <-a.ctx.Done():
			}
			continue
		}
		a.backoff = 0
		var ip net.IP
		if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
			ip = ta.IP
		}
		switch d := a.l.allowedNow(ip); {
		case ip == nil || d == refuse:
			c.Close()
			a.refused(c.RemoteAddr().String(), ip)
		case d == allow:
			return c, nil
		default:
			a.pending.Add(1)
			go a.check(c, ip)
		}
	}
}

// check decides on c with the DNS lookups its address needs.
func (a *allowListener) check(c net.Conn, ip net.IP) {
	defer a.pending.Add(-1)
	if !a.l.Allowed(a.ctx, ip) {
		c.Close()
		a.refused(c.RemoteAddr().String(), ip)
		return
	}
	select {
	case a.conns <- c:
	case <-a.ctx.Done():
		c.Close()
	}
}

func (a *allowListener) refused(remote string, ip net.IP) {
	key, now := ip.String(), time.Now()
	a.mu.Lock()
	if len(a.logged) >= maxCached {
		clear(a.logged)
	}
	last, seen := a.logged[key]
	quiet := seen && now.Sub(last) <= time.Minute
	if !quiet {
		a.logged[key] = now
	}
	a.mu.Unlock()
	if !quiet {
		a.log.Warn("connection refused: client address not in security.allow_hosts", "client", remote)
	}
}

// Close stops accepting; connections allowed but not accepted yet are
// closed.
func (a *allowListener) Close() error {
	a.cancel()
	err := a.Listener.Close()
	for {
		select {
		case c := <-a.conns:
			c.Close()
		default:
			return err
		}
	}
}
