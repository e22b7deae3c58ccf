// Package connlimit bounds the connections clients hold, so that a server
// answers "busy" before it runs out of descriptors (nginx's
// worker_connections, HAProxy's maxconn), and so that one client (a host,
// an IPv6 /64, a script opening connections and never reading) cannot
// take the server's descriptors and workers from the rest. A connection
// over a bound waits in a small room, where its protocol tells it to come
// back (root:// kXR_wait, HTTP 503 with Retry-After), instead of being
// dropped or left to time out in the listen queue; beyond the room it is
// closed at once.
package connlimit

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
)

// DefaultIPv6Prefix is the IPv6 prefix length counted as one client: a
// site's hosts get a /64 each, and one host may take any address of it.
const DefaultIPv6Prefix = 64

// RetryAfter is the wait, in seconds, that a connection over a bound is
// told (root:// kXR_wait, HTTP Retry-After): XrdCl sends its request again
// on the same connection after it, and is served once a place is free.
const RetryAfter = 2

// Defaults of the waiting room.
const (
	// defaultRoom bounds the connections waiting over a bound.
	defaultRoom = 64
	// roomShare: one client holds at most this share of the room (at
	// least one place), so that a few flooding clients leave places for
	// the others.
	roomShare = 32
)

// Limits are the bounds every front end shares: all connections together
// (Max), and a waiting room for those over a bound. Each front end takes
// a Gate, which adds its own bound per client. The zero value is not
// usable: call New. Safe for concurrent use.
type Limits struct {
	// mu protects every field below.
	mu sync.Mutex
	// max bounds admitted connections (0: none); room bounds waiting ones.
	max, room int
	// prefix6 is the IPv6 prefix length of a client key.
	prefix6 int
	// n counts admitted connections, waiting waiting ones, by their
	// client key in waitingBy.
	n, waiting int
	waitingBy  map[string]int
}

// New returns Limits admitting max connections in all (0: no bound) with
// a waiting room of room places (0: the default, 64; negative: none).
func New(maxConns, room int) *Limits {
	l := &Limits{prefix6: DefaultIPv6Prefix, waitingBy: map[string]int{}}
	l.Set(maxConns, room)
	return l
}

// Set changes the bounds; connections already admitted stay.
func (l *Limits) Set(maxConns, room int) {
	if room == 0 {
		room = defaultRoom
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.max, l.room = max(0, maxConns), max(0, room)
}

// SetIPv6Prefix sets the prefix length (1 to 128) counted as one IPv6
// client, for connections from now on.
func (l *Limits) SetIPv6Prefix(bits int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if bits >= 1 && bits <= 128 {
		l.prefix6 = bits
	}
}

// Counts are the admitted and waiting connections, with the bounds.
type Counts struct{ Max, Admitted, Room, Waiting int }

// Counts reads the counts.
func (l *Limits) Counts() Counts {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Counts{Max: l.max, Admitted: l.n, Room: l.room, Waiting: l.waiting}
}

// Key is the client that addr ("ip:port" or "ip") counts as: an IPv4
// address (an IPv4-mapped IPv6 one too), the IPv6 prefix of bits bits, or
// addr itself when it is no address.
func Key(addr string, bits int) string {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	a = a.Unmap().WithZone("")
	if a.Is4() || bits >= 128 {
		return a.String()
	}
	p, err := a.Prefix(bits)
	if err != nil {
		return a.String()
	}
	return p.String()
}

// Gate is one front end's door: Limits' bounds, and at most PerClient
// connections from one client. Safe for concurrent use.
type Gate struct {
	l         *Limits
	perClient atomic.Int64
	// n counts this front end's admitted connections by client key;
	// guarded by l.mu.
	n map[string]int

	// Stats count the decisions.
	Stats Stats
}

// Stats count a Gate's decisions. Safe for concurrent use.
type Stats struct {
	// Waited counts connections put in the waiting room (told busy),
	// by the bound they were over; Admitted those of them later admitted.
	WaitedTotal, WaitedClient, AdmittedLater atomic.Int64
	// Dropped counts connections closed at once: over a bound with the
	// waiting room full (or their client's share of it taken).
	Dropped atomic.Int64
}

// Gate returns a new front end's gate, admitting at most perClient
// connections of one client (0: no bound).
func (l *Limits) Gate(perClient int) *Gate {
	g := &Gate{l: l, n: map[string]int{}}
	g.SetPerClient(perClient)
	return g
}

// SetPerClient changes the bound per client for connections from now on
// (0: none).
func (g *Gate) SetPerClient(n int) { g.perClient.Store(int64(max(0, n))) }

// PerClient returns the bound per client (0: none).
func (g *Gate) PerClient() int { return int(g.perClient.Load()) }

// Over says which bound a waiting connection is over.
type Over int

const (
	// OverNone: admitted.
	OverNone Over = iota
	// OverTotal: all clients' connections reached Limits' Max.
	OverTotal
	// OverClient: its client reached the Gate's bound per client.
	OverClient
)

// Pass is one connection's place: admitted, or waiting (Over says why)
// until Admit succeeds. Release it once, when the connection ends.
type Pass struct {
	g    *Gate
	key  string
	over Over // guarded by g.l.mu
	done bool // released; guarded by g.l.mu
}

// Enter decides on a new connection from addr: admitted, waiting, or nil
// when it is over a bound and finds no place to wait (close it at once).
func (g *Gate) Enter(addr string) *Pass {
	l := g.l
	l.mu.Lock()
	defer l.mu.Unlock()
	p := &Pass{g: g, key: Key(addr, l.prefix6)}
	if p.over = g.overLocked(p.key); p.over == OverNone {
		g.admitLocked(p)
		return p
	}
	share := max(1, l.room/roomShare)
	if l.waiting >= l.room || l.waitingBy[p.key] >= share {
		g.Stats.Dropped.Add(1)
		return nil
	}
	l.waiting++
	l.waitingBy[p.key]++
	if p.over == OverTotal {
		g.Stats.WaitedTotal.Add(1)
	} else {
		g.Stats.WaitedClient.Add(1)
	}
	return p
}

// overLocked says which bound a new connection of key is over. MUST be
// called with l.mu held.
func (g *Gate) overLocked(key string) Over {
	l := g.l
	if pc := g.perClient.Load(); pc > 0 && int64(g.n[key]) >= pc {
		return OverClient
	}
	if l.max > 0 && l.n >= l.max {
		return OverTotal
	}
	return OverNone
}

func (g *Gate) admitLocked(p *Pass) {
	g.l.n++
	g.n[p.key]++
	p.over = OverNone
}

// Over says which bound p waits for; OverNone once admitted.
func (p *Pass) Over() Over {
	p.g.l.mu.Lock()
	defer p.g.l.mu.Unlock()
	return p.over
}

// Admitted reports whether p is admitted.
func (p *Pass) Admitted() bool { return p.Over() == OverNone }

// Admit admits a waiting p if the bounds now allow and reports whether p
// is admitted (true at once for an admitted one).
func (p *Pass) Admit() bool {
	l := p.g.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if p.done {
		return false
	}
	if p.over == OverNone {
		return true
	}
	over := p.g.overLocked(p.key)
	if over != OverNone {
		p.over = over
		return false
	}
	p.leaveRoomLocked()
	p.g.admitLocked(p)
	p.g.Stats.AdmittedLater.Add(1)
	return true
}

func (p *Pass) leaveRoomLocked() {
	l := p.g.l
	l.waiting--
	if l.waitingBy[p.key]--; l.waitingBy[p.key] <= 0 {
		delete(l.waitingBy, p.key)
	}
}

// Release gives p's place back; later calls do nothing.
func (p *Pass) Release() {
	l := p.g.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if p.done {
		return
	}
	p.done = true
	if p.over != OverNone {
		p.leaveRoomLocked()
		return
	}
	l.n--
	if p.g.n[p.key]--; p.g.n[p.key] <= 0 {
		delete(p.g.n, p.key)
	}
}

// Key is the client p counts as.
func (p *Pass) Key() string { return p.key }

// Reason says why a waiting p waits, for the client ("server busy: ...").
func (p *Pass) Reason() string {
	l := p.g.l
	l.mu.Lock()
	defer l.mu.Unlock()
	switch p.over {
	case OverClient:
		who := "one client address"
		if strings.Contains(p.key, "/") {
			who = "one client network (" + p.key + ")"
		}
		return fmt.Sprintf("server busy: it serves at most %d connections from %s; retry later", p.g.perClient.Load(), who)
	case OverTotal:
		return fmt.Sprintf("server busy: it serves at most %d connections; retry later", l.max)
	}
	return ""
}
