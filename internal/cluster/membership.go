package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// Defaults. A zero Config field means "use the default".
const (
	// defaultBind is memberlist's customary port on every interface.
	defaultBind = ":7946"
	// defaultRejoinInterval is how often seeds that are not members are
	// joined again: this finds seeds started after us and heals partitions
	// after memberlist has forgotten the dead side (GossipToTheDeadTime).
	defaultRejoinInterval = 15 * time.Second
	// defaultLeaveTimeout bounds the graceful leave broadcast on Close.
	defaultLeaveTimeout = 3 * time.Second
	// defaultLabel keeps other memberlist users (and other hepcache
	// clusters with another label) out of the cluster.
	defaultLabel = "hepcache"
	// metaLimit is memberlist's bound on node metadata.
	metaLimit = memberlist.MetaMaxSize
)

// Profile names a set of memberlist timings.
type Profile string

// Profiles, from memberlist's DefaultLANConfig, DefaultLocalConfig and
// DefaultWANConfig.
const (
	// ProfileLAN: probe every 1 s, a dead node is declared in about 5-6 s
	// in small clusters. The default.
	ProfileLAN Profile = "lan"
	// ProfileLocal: faster probes for nodes on one host (tests).
	ProfileLocal Profile = "local"
	// ProfileWAN: slower probes for members across sites.
	ProfileWAN Profile = "wan"
)

// MembershipConfig configures the gossip membership.
type MembershipConfig struct {
	// Self describes this node (Name, Role, Root, HTTP, Weight). Name
	// defaults to the host name; it must be unique in the cluster and
	// stable across restarts.
	Self Node
	// Bind is the gossip address (TCP and UDP), "host:port". Default
	// ":7946"; port 0 picks a free port.
	Bind string
	// Advertise is the gossip address other nodes use, if not Bind's
	// (NAT, a wildcard Bind). Default: derived from Bind.
	Advertise string
	// Join lists gossip addresses of seed nodes ("host:port"). Joining
	// any one suffices; unreachable seeds are retried in the background.
	// Empty: this node starts a cluster that others join.
	Join []string
	// RejoinInterval is how often seeds that are not alive members are
	// joined again. Default 15 s; negative disables it (join once).
	RejoinInterval time.Duration
	// Profile selects memberlist's timings. Default "lan".
	Profile Profile
	// ProbeInterval overrides the profile's failure-detector probe
	// interval. Zero: the profile's. Shorter detects failures sooner at
	// the expense of more UDP traffic (one probe per node per interval).
	ProbeInterval time.Duration
	// SecretKey (16, 24 or 32 bytes) encrypts gossip with AES-GCM. Default
	// none: gossip is plain, keep it on a private network.
	SecretKey []byte
	// Label is mixed into every gossip packet; nodes with another label
	// are ignored. Default "hepcache".
	Label string
	// Logger receives membership events. Default slog.Default().
	Logger *slog.Logger

	// tweak adjusts the memberlist configuration; a test seam.
	tweak func(*memberlist.Config)
}

// Stats counts membership events. Fields are read with Load.
type Stats struct {
	// Joins counts nodes seen joining (this node's own join included).
	Joins atomic.Int64
	// Leaves counts nodes that left gracefully.
	Leaves atomic.Int64
	// Failures counts nodes declared dead by the failure detector.
	Failures atomic.Int64
	// Updates counts metadata changes of nodes.
	Updates atomic.Int64
}

// Membership is this node's gossip membership (hashicorp/memberlist): it
// joins the seeds, keeps the View of alive nodes current as nodes join,
// fail and leave, and leaves gracefully on Close.
type Membership struct {
	cfg   MembershipConfig
	ml    *memberlist.Memberlist
	stats Stats
	view  atomic.Pointer[View]

	// mu protects nodes and version.
	mu      sync.Mutex
	nodes   map[string]Node
	version uint64
	// changed receives a value (without blocking) on every change.
	changed chan struct{}

	shutdownCh chan struct{}
	wg         sync.WaitGroup
	closeOnce  sync.Once
	closeErr   error
	// leaving is set by Close before it announces the departure.
	leaving atomic.Bool
}

var _ Members = (*Membership)(nil)

// EnsureDefaults fills zero fields with their defaults.
func (c *MembershipConfig) EnsureDefaults() {
	if c.Self.Name == "" {
		c.Self.Name, _ = os.Hostname()
	}
	if c.Self.Role == "" {
		c.Self.Role = RoleCache
	}
	if c.Bind == "" {
		c.Bind = defaultBind
	}
	if c.RejoinInterval == 0 {
		c.RejoinInterval = defaultRejoinInterval
	}
	if c.Profile == "" {
		c.Profile = ProfileLAN
	}
	if c.Label == "" {
		c.Label = defaultLabel
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports every problem in one error.
func (c *MembershipConfig) Validate() error {
	var errs []error
	if c.Self.Name == "" || strings.ContainsAny(c.Self.Name, " \t\n,&?=") {
		errs = append(errs, fmt.Errorf("node name %q: required, without spaces or any of ,&?=", c.Self.Name))
	}
	switch c.Self.Role {
	case RoleCache, RoleRedirector:
	default:
		errs = append(errs, fmt.Errorf("role %q: want cache or redirector", c.Self.Role))
	}
	if c.Self.Root == "" {
		errs = append(errs, errors.New("root address: required (the root:// address clients are sent to)"))
	} else if _, _, err := net.SplitHostPort(c.Self.Root); err != nil {
		errs = append(errs, fmt.Errorf("root address %q: %w", c.Self.Root, err))
	}
	if c.Self.Weight < 0 {
		errs = append(errs, fmt.Errorf("weight %v: must not be negative", c.Self.Weight))
	}
	for _, a := range append([]string{c.Bind, c.Advertise}, c.Join...) {
		if a == "" {
			continue
		}
		if _, p, err := net.SplitHostPort(a); err != nil {
			errs = append(errs, fmt.Errorf("gossip address %q: %w", a, err))
		} else if n, err := strconv.Atoi(p); err != nil || n < 0 || n > 65535 {
			errs = append(errs, fmt.Errorf("gossip address %q: bad port", a))
		}
	}
	switch c.Profile {
	case ProfileLAN, ProfileLocal, ProfileWAN:
	default:
		errs = append(errs, fmt.Errorf("profile %q: want lan, local or wan", c.Profile))
	}
	if n := len(c.SecretKey); n != 0 && n != 16 && n != 24 && n != 32 {
		errs = append(errs, fmt.Errorf("secret key: %d bytes, want 16, 24 or 32", n))
	}
	if c.ProbeInterval < 0 {
		errs = append(errs, fmt.Errorf("probe interval %v: must not be negative", c.ProbeInterval))
	}
	if b, err := json.Marshal(c.Self); err == nil && len(b) > metaLimit {
		errs = append(errs, fmt.Errorf("node metadata is %d bytes, at most %d (shorten the addresses)", len(b), metaLimit))
	}
	return errors.Join(errs...)
}

// Join starts the membership: it binds the gossip port, joins the seeds
// (in the background if none answers yet) and returns. Close leaves.
func Join(cfg *MembershipConfig) (*Membership, error) {
	c := *cfg
	c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("cluster membership config: %w", err)
	}
	m := &Membership{
		cfg:        c,
		nodes:      map[string]Node{},
		changed:    make(chan struct{}, 1),
		shutdownCh: make(chan struct{}),
	}
	mc, err := m.memberlistConfig()
	if err != nil {
		return nil, err
	}
	m.publishLocked() // a view of one until memberlist reports
	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("start gossip on %s: %w", c.Bind, err)
	}
	m.ml = ml
	c.Logger.Info("cluster membership started", "node", c.Self.Name, "role", c.Self.Role,
		"gossip", m.GossipAddr(), "root", c.Self.Root, "http", c.Self.HTTP, "seeds", strings.Join(c.Join, ","))
	if len(c.Join) > 0 {
		if n, err := m.join(c.Join); n == 0 {
			c.Logger.Warn("no seed answered yet, retrying in the background", "seeds", strings.Join(c.Join, ","), "err", err)
		}
	}
	if len(c.Join) > 0 && c.RejoinInterval > 0 {
		m.wg.Add(1)
		go m.rejoinLoop()
	}
	return m, nil
}

func (m *Membership) memberlistConfig() (*memberlist.Config, error) {
	c := m.cfg
	var mc *memberlist.Config
	switch c.Profile {
	case ProfileLocal:
		mc = memberlist.DefaultLocalConfig()
	case ProfileWAN:
		mc = memberlist.DefaultWANConfig()
	default:
		mc = memberlist.DefaultLANConfig()
	}
	mc.Name = c.Self.Name
	host, port, err := splitAddr(c.Bind)
	if err != nil {
		return nil, fmt.Errorf("gossip bind %q: %w", c.Bind, err)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	mc.BindAddr, mc.BindPort = host, port
	mc.AdvertisePort = port
	if c.Advertise != "" {
		if mc.AdvertiseAddr, mc.AdvertisePort, err = splitAddr(c.Advertise); err != nil {
			return nil, fmt.Errorf("gossip advertise %q: %w", c.Advertise, err)
		}
	}
	if c.ProbeInterval > 0 {
		mc.ProbeInterval = c.ProbeInterval
		mc.ProbeTimeout = min(mc.ProbeTimeout, c.ProbeInterval/2)
	}
	mc.SecretKey = c.SecretKey
	mc.Label = c.Label
	mc.Delegate = delegate{m}
	mc.Events = events{m}
	mc.Logger = log.New(&slogWriter{l: c.Logger}, "", 0)
	if c.tweak != nil {
		c.tweak(mc)
	}
	return mc, nil
}

func splitAddr(a string) (string, int, error) {
	h, p, err := net.SplitHostPort(a)
	if err != nil {
		return "", 0, err
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("port %q: %w", p, err)
	}
	return h, n, nil
}

// join joins the seeds, returning how many answered.
func (m *Membership) join(seeds []string) (int, error) {
	n, err := m.ml.Join(seeds)
	if n > 0 {
		m.cfg.Logger.Info("joined the cluster", "seeds_answered", n, "members", m.ml.NumMembers())
	}
	return n, err
}

// rejoinLoop joins again the seeds that are not alive members.
func (m *Membership) rejoinLoop() {
	defer m.wg.Done()
	t := time.NewTicker(m.cfg.RejoinInterval)
	defer t.Stop()
	for {
		select {
		case <-m.shutdownCh:
			return
		case <-t.C:
		}
		alive := map[string]bool{}
		for _, n := range m.View().Nodes {
			alive[n.Gossip] = true
		}
		var missing []string
		for _, s := range m.cfg.Join {
			if !alive[resolve(s)] {
				missing = append(missing, s)
			}
		}
		if len(missing) > 0 {
			if n, err := m.join(missing); n == 0 {
				m.cfg.Logger.Debug("seeds still unreachable", "seeds", strings.Join(missing, ","), "err", err)
			}
		}
	}
}

// resolve turns "host:port" into "ip:port" for comparison with member
// addresses; on failure it returns a unchanged.
func resolve(a string) string {
	h, p, err := net.SplitHostPort(a)
	if err != nil {
		return a
	}
	if ip := net.ParseIP(h); ip != nil {
		return net.JoinHostPort(ip.String(), p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIP(ctx, "ip", h)
	if err != nil || len(ips) == 0 {
		return a
	}
	return net.JoinHostPort(ips[0].String(), p)
}

// View implements Members.
func (m *Membership) View() *View { return m.view.Load() }

// Stats returns the live counters.
func (m *Membership) Stats() *Stats { return &m.stats }

// Changed returns a channel that receives a value after membership
// changes (coalesced: one value may stand for several changes).
func (m *Membership) Changed() <-chan struct{} { return m.changed }

// GossipAddr is the gossip address other nodes reach this one at.
func (m *Membership) GossipAddr() string {
	n := m.ml.LocalNode()
	return net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
}

// Close leaves the cluster gracefully (the others drop this node at once
// instead of waiting for the failure detector) and stops gossip. It is
// idempotent.
func (m *Membership) Close() error {
	m.closeOnce.Do(func() {
		close(m.shutdownCh)
		m.wg.Wait()
		var errs []error
		// Announce the departure in the metadata first: memberlist's
		// leave notification does not tell a leave from a failure.
		m.leaving.Store(true)
		if err := m.ml.UpdateNode(defaultLeaveTimeout); err != nil {
			errs = append(errs, fmt.Errorf("announce leave: %w", err))
		}
		if err := m.ml.Leave(defaultLeaveTimeout); err != nil {
			errs = append(errs, fmt.Errorf("leave cluster: %w", err))
		}
		if err := m.ml.Shutdown(); err != nil {
			errs = append(errs, fmt.Errorf("stop gossip: %w", err))
		}
		m.closeErr = errors.Join(errs...)
		m.cfg.Logger.Info("left the cluster", "node", m.cfg.Self.Name)
	})
	return m.closeErr
}

// update records a member's state and publishes a new view.
func (m *Membership) update(n *memberlist.Node, alive bool) {
	node := Node{Name: n.Name}
	if alive {
		if err := json.Unmarshal(n.Meta, &node); err != nil {
			m.cfg.Logger.Warn("ignoring node with bad metadata", "node", n.Name, "err", err)
			alive = false
		}
		node.Name = n.Name
		node.Gossip = net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
	}
	m.mu.Lock()
	if alive {
		m.nodes[n.Name] = node
	} else {
		delete(m.nodes, n.Name)
	}
	m.version++
	m.publishLocked()
	m.mu.Unlock()
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// publishLocked swaps in a new view. MUST be called with mu held.
func (m *Membership) publishLocked() {
	nodes := make([]Node, 0, len(m.nodes))
	for _, n := range m.nodes {
		nodes = append(nodes, n)
	}
	self := m.cfg.Self
	if n, ok := m.nodes[self.Name]; ok {
		self = n
	}
	m.view.Store(NewView(self, nodes, m.version, time.Now()))
}

// events receives memberlist's notifications. They are called with
// memberlist's state lock held: they must not call back into memberlist.
type events struct{ m *Membership }

func (e events) NotifyJoin(n *memberlist.Node) {
	e.m.stats.Joins.Add(1)
	e.m.cfg.Logger.Info("node joined", "node", n.Name, "addr", n.Address())
	e.m.update(n, true)
}

func (e events) NotifyLeave(n *memberlist.Node) {
	e.m.mu.Lock()
	prev, known := e.m.nodes[n.Name]
	e.m.mu.Unlock()
	if known && prev.Leaving || n.Name == e.m.cfg.Self.Name {
		e.m.stats.Leaves.Add(1)
		e.m.cfg.Logger.Info("node left", "node", n.Name)
	} else {
		e.m.stats.Failures.Add(1)
		e.m.cfg.Logger.Warn("node failed", "node", n.Name, "addr", n.Address())
	}
	e.m.update(n, false)
}

func (e events) NotifyUpdate(n *memberlist.Node) {
	e.m.stats.Updates.Add(1)
	e.m.update(n, true)
}

// delegate gives memberlist this node's metadata; hepcache gossips no
// application state of its own.
type delegate struct{ m *Membership }

func (d delegate) NodeMeta(limit int) []byte {
	self := d.m.cfg.Self
	self.Leaving = d.m.leaving.Load()
	b, _ := json.Marshal(self) // validated to fit in Join
	if len(b) > limit {
		return nil
	}
	return b
}
func (delegate) NotifyMsg([]byte)                           {}
func (delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (delegate) LocalState(join bool) []byte                { return nil }
func (delegate) MergeRemoteState(buf []byte, join bool)     {}

// slogWriter turns memberlist's log lines ("[WARN] memberlist: ...") into
// slog records of the matching level.
type slogWriter struct{ l *slog.Logger }

func (w *slogWriter) Write(p []byte) (int, error) {
	line := string(bytes.TrimSpace(p))
	level := slog.LevelInfo
	for _, lv := range []struct {
		tag string
		l   slog.Level
	}{{"[DEBUG]", slog.LevelDebug}, {"[INFO]", slog.LevelInfo}, {"[WARN]", slog.LevelWarn}, {"[ERR]", slog.LevelError}} {
		if strings.HasPrefix(line, lv.tag) {
			level, line = lv.l, strings.TrimSpace(strings.TrimPrefix(line, lv.tag))
			break
		}
	}
	w.l.Log(context.Background(), level, line, "component", "gossip")
	return len(p), nil
}

var _ io.Writer = (*slogWriter)(nil)

// crash stops gossip without telling anyone, like kill -9; a test seam.
func (m *Membership) crash() {
	m.closeOnce.Do(func() {
		close(m.shutdownCh)
		m.wg.Wait()
		m.ml.Shutdown()
	})
}
