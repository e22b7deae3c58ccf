package metrics

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Clients tracks the connected clients of every front end, for the
// hepcache_clients gauge and the dashboard. Safe for concurrent use.
type Clients struct {
	now    func() time.Time
	nextID atomic.Uint64

	// mu protects m and known.
	mu sync.Mutex
	m  map[uint64]*Client
	// known holds the protocols declared or seen: each has a sample in
	// hepcache_clients, 0 while idle, so queries over it have data.
	known map[string]bool
	// onRemove is called when a client goes (SetOnRemove).
	onRemove atomic.Pointer[func(protocol, addr string)]
}

// SetOnRemove sets fn to be called, outside any lock, when a client
// disconnects (the monitoring f-stream reports the end of its session).
func (c *Clients) SetOnRemove(fn func(protocol, addr string)) { c.onRemove.Store(&fn) }

// Client is one connected client.
type Client struct {
	id       uint64
	protocol string
	addr     string
	since    time.Time
	// activity is what the client does now (the path it reads), or "".
	activity atomic.Pointer[string]
	requests atomic.Int64
}

// ClientInfo describes a client for the dashboard.
type ClientInfo struct {
	Protocol string    `json:"protocol"`
	Addr     string    `json:"addr"`
	Since    time.Time `json:"since"`
	Activity string    `json:"activity,omitempty"`
	Requests int64     `json:"requests"`
}

// Add registers a connected client and returns it; the caller must Remove it
// when the connection closes.
func (c *Clients) Add(protocol, addr string) *Client {
	now := time.Now
	if c.now != nil {
		now = c.now
	}
	cl := &Client{id: c.nextID.Add(1), protocol: protocol, addr: addr, since: now()}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[uint64]*Client{}
	}
	c.m[cl.id] = cl
	c.knowLocked(protocol)
	c.mu.Unlock()
	return cl
}

// Declare names protocols a front end serves, so that hepcache_clients
// has a sample for each (0) before any client comes.
func (c *Clients) Declare(protocols ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range protocols {
		c.knowLocked(p)
	}
}

// knowLocked records protocol p. MUST be called with c.mu held.
func (c *Clients) knowLocked(p string) {
	if c.known == nil {
		c.known = map[string]bool{}
	}
	c.known[p] = true
}

// Remove unregisters cl. Removing twice is harmless.
func (c *Clients) Remove(cl *Client) {
	if cl == nil {
		return
	}
	c.mu.Lock()
	_, ok := c.m[cl.id]
	delete(c.m, cl.id)
	c.mu.Unlock()
	if fn := c.onRemove.Load(); ok && fn != nil {
		(*fn)(cl.protocol, cl.addr)
	}
}

// Len returns the number of connected clients.
func (c *Clients) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// Total returns the number of clients that ever connected.
func (c *Clients) Total() int64 { return int64(c.nextID.Load()) }

// SetActivity records what the client does now ("" when idle) and counts a
// request when s is not empty.
func (cl *Client) SetActivity(s string) {
	if cl == nil {
		return
	}
	if s != "" {
		cl.requests.Add(1)
	}
	cl.activity.Store(&s)
}

// List returns the connected clients, longest connected first.
func (c *Clients) List() []ClientInfo {
	c.mu.Lock()
	out := make([]ClientInfo, 0, len(c.m))
	for _, cl := range c.m {
		ci := ClientInfo{Protocol: cl.protocol, Addr: cl.addr, Since: cl.since, Requests: cl.requests.Load()}
		if a := cl.activity.Load(); a != nil {
			ci.Activity = *a
		}
		out = append(out, ci)
	}
	c.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Since.Equal(out[j].Since) {
			return out[i].Since.Before(out[j].Since)
		}
		return out[i].Addr < out[j].Addr
	})
	return out
}

type protoCount struct {
	protocol string
	n        int
}

func (c *Clients) byProtocol() []protoCount {
	c.mu.Lock()
	m := map[string]int{}
	for p := range c.known {
		m[p] = 0
	}
	for _, cl := range c.m {
		m[cl.protocol]++
	}
	c.mu.Unlock()
	out := make([]protoCount, 0, len(m))
	for p, n := range m {
		out = append(out, protoCount{p, n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].protocol < out[j].protocol })
	return out
}
