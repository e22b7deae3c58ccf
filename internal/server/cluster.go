package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/cluster"
	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/federation"
	"github.com/hepcache/hepcache/internal/metrics"
	"github.com/hepcache/hepcache/internal/upstream"
	"github.com/hepcache/hepcache/origin"
	xrdorigin "github.com/hepcache/hepcache/origin/xrootd"
)

// clusterNode is a server's cluster layer (docs/deployment.md): the gossip
// membership, the Router in front of the cache and the peer lookups behind
// it. The cache is built before the listeners and the membership after
// them, so that no node is sent clients before it can serve: until then
// the Router and the peer lookups see this node alone (cluster.Deferred).
type clusterNode struct {
	cfg      *config.Config
	log      *slog.Logger
	self     cluster.Node
	members  *cluster.Deferred
	ml       *cluster.Membership
	router   *cluster.Router
	peers    *cluster.PeerLookup
	peerDial cluster.PeerDialFunc
}

// newClusterNode returns the cluster layer, or nil if cluster mode is off.
func newClusterNode(cfg *config.Config, log *slog.Logger) *clusterNode {
	if !cfg.Cluster.Enabled {
		return nil
	}
	self := cluster.Node{
		Name:   cfg.NodeName(),
		Role:   cluster.Role(cfg.Cluster.Role),
		Root:   cfg.RootAdvertise(),
		HTTP:   cfg.HTTPAdvertise(),
		Weight: cfg.Cluster.Weight,
	}
	return &clusterNode{
		cfg: cfg, log: log, self: self, members: cluster.NewDeferred(self),
		peerDial: func(ctx context.Context, addr string) (origin.Origin, error) {
			return xrdorigin.New(&xrdorigin.Config{
				URL:          "root://" + addr,
				ConnsPerHost: cfg.Origin.Connections,
				Timeout:      time.Duration(cfg.Origin.Timeout),
			})
		},
	}
}

// resolver wraps the cache's origins with peer lookups (a miss asks the
// other nodes first) when they are on.
func (cn *clusterNode) resolver(r origin.Resolver) (origin.Resolver, error) {
	if cn == nil || !cn.cfg.Cluster.PeerLookup || cn.self.Role != cluster.RoleCache {
		return r, nil
	}
	max := cn.cfg.Cluster.PeerLookupMax
	if cn.cfg.Cluster.Mode != "local" {
		// The owner asks the next nodes of the ranking: after a node
		// joins, they are where its files were cached until then.
		max = min(max, 2)
	}
	pl, err := cluster.NewPeerLookup(&cluster.PeerLookupConfig{
		Members: cn.members, Dial: cn.peerDial, MaxPeers: max, Logger: cn.log,
	})
	if err != nil {
		return nil, err
	}
	cn.peers = pl
	return pl.Resolver(r), nil
}

// backend puts the Router in front of the cache (nil for a redirector).
func (cn *clusterNode) backend(local backend.Backend) (backend.Backend, error) {
	if cn == nil {
		return local, nil
	}
	if cn.self.Role == cluster.RoleRedirector {
		local = nil
	}
	r, err := cluster.NewRouter(&cluster.RouterConfig{
		Members:       cn.members,
		Local:         local,
		Mode:          cluster.Mode(cn.cfg.Cluster.Mode),
		DefaultOrigin: cn.cfg.Origin.Default,
		Dial:          cn.peerDial,
		PeerTimeout:   time.Duration(cn.cfg.Origin.Timeout),
		Logger:        cn.log,
	})
	if err != nil {
		return nil, err
	}
	cn.router = r
	return r, nil
}

// join starts the membership once the listeners are up. A configured port
// 0 is replaced by the port actually bound.
func (cn *clusterNode) join(rootLn, httpLn net.Listener) error {
	if cn == nil {
		return nil
	}
	self := cn.self
	self.Root = withPort(self.Root, rootLn)
	if self.HTTP != "" && httpLn != nil && cn.cfg.Cluster.AdvertiseHTTP == "" {
		self.HTTP = "http://" + withPort(strings.TrimPrefix(self.HTTP, "http://"), httpLn)
	}
	key, err := cn.cfg.GossipKey()
	if err != nil {
		return err
	}
	ml, err := cluster.Join(&cluster.MembershipConfig{
		Self:      self,
		Bind:      cn.cfg.Cluster.GossipListen,
		Advertise: cn.cfg.Cluster.GossipAdvertise,
		Join:      cn.cfg.Cluster.Join,
		Profile:   cluster.Profile(cn.cfg.Cluster.Profile),
		SecretKey: key,
		Label:     cn.cfg.Cluster.Label,
		Logger:    cn.log,
	})
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	cn.ml = ml
	cn.members.Attach(ml)
	return nil
}

// withPort replaces a port 0 in addr by ln's port.
func withPort(addr string, ln net.Listener) string {
	h, p, err := net.SplitHostPort(addr)
	if err != nil || p != "0" || ln == nil {
		return addr
	}
	return net.JoinHostPort(h, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
}

// leave announces the departure: the other nodes stop sending clients here
// while the reads in progress finish.
func (cn *clusterNode) leave() error {
	if cn == nil || cn.ml == nil {
		return nil
	}
	return cn.ml.Close()
}

// close releases the connections to peers.
func (cn *clusterNode) close() {
	if cn == nil {
		return
	}
	cn.leave()
	if cn.router != nil {
		cn.router.Close()
	}
	if cn.peers != nil {
		cn.peers.Close()
	}
}

// federationDialers adds the federation to the origin dialers: root://
// requests carry the via list (loop detection by the next cache), and the
// default origin fails over to origin.fallback in order.
func federationDialers(cfg *config.Config, dial map[string]upstream.DialFunc, log *slog.Logger) (map[string]upstream.DialFunc, error) {
	self := cfg.NodeName()
	base := map[string]upstream.DialFunc{}
	for sch, d := range dial {
		base[sch] = d
		if sch == "root" || sch == "roots" {
			base[sch] = func(ctx context.Context, c string) (origin.Origin, error) {
				o, err := d(ctx, c)
				if err != nil {
					return nil, err
				}
				return federation.ViaOrigin(o, self), nil
			}
		}
	}
	if len(cfg.Origin.Fallback) == 0 {
		return base, nil
	}
	def, err := upstream.Canonical(cfg.Origin.Default)
	if err != nil {
		return nil, fmt.Errorf("origin.default: %w", err)
	}
	ups := []string{def}
	for _, f := range cfg.Origin.Fallback {
		c, err := upstream.Canonical(f)
		if err != nil {
			return nil, fmt.Errorf("origin.fallback %q: %w", f, err)
		}
		if _, ok := base[schemeOf(c)]; !ok {
			return nil, fmt.Errorf("origin.fallback %q: scheme not supported", f)
		}
		ups = append(ups, c)
	}
	out := map[string]upstream.DialFunc{}
	for sch, d := range base {
		out[sch] = d
	}
	defDial := base[schemeOf(def)]
	out[schemeOf(def)] = func(ctx context.Context, c string) (origin.Origin, error) {
		if c != def {
			return defDial(ctx, c)
		}
		return federation.NewFailover(&federation.FailoverConfig{
			Name:      def,
			Upstreams: ups,
			Dial: func(ctx context.Context, u string) (origin.Origin, error) {
				return base[schemeOf(u)](ctx, u)
			},
			Logger: log,
		})
	}
	return out, nil
}

func schemeOf(c string) string {
	s, _, _ := strings.Cut(c, "://")
	return s
}

// register exports the cluster's state and counters on /metrics.
func (cn *clusterNode) register(m *metrics.Registry) {
	if cn == nil {
		return
	}
	m.GaugeFunc("hepcache_cluster_members", "Alive cluster nodes in this node's view, itself included.",
		func() int64 { return int64(len(cn.members.View().Nodes)) })
	m.GaugeFunc("hepcache_cluster_view_version", "Membership changes this node has seen.",
		func() int64 { return int64(cn.members.View().Version) })
	ms := func(f func(*cluster.Stats) int64) func() int64 {
		return func() int64 {
			if cn.ml == nil {
				return 0
			}
			return f(cn.ml.Stats())
		}
	}
	m.CounterFunc("hepcache_cluster_node_failures_total", "Nodes declared dead by the failure detector.", ms(func(s *cluster.Stats) int64 { return s.Failures.Load() }))
	m.CounterFunc("hepcache_cluster_node_leaves_total", "Nodes that left gracefully.", ms(func(s *cluster.Stats) int64 { return s.Leaves.Load() }))
	m.CounterFunc("hepcache_cluster_node_joins_total", "Nodes seen joining.", ms(func(s *cluster.Stats) int64 { return s.Joins.Load() }))
	if r := cn.router; r != nil {
		st := r.Stats()
		m.CounterFunc("hepcache_cluster_local_total", "Requests served by this node.", st.Local.Load)
		m.CounterFunc("hepcache_cluster_redirected_total", "Requests redirected to the owner.", st.Redirected.Load)
		m.CounterFunc("hepcache_cluster_proxied_total", "Requests proxied from the owner.", st.Proxied.Load)
		m.CounterFunc("hepcache_cluster_proxy_failovers_total", "Proxied requests moved to the next node after a node failed.", st.ProxyFailovers.Load)
		m.CounterFunc("hepcache_cluster_peer_served_total", "Peer lookups this node answered from its cache.", st.PeerServed.Load)
		m.CounterFunc("hepcache_cluster_tried_returns_total", "Requests that came back after failing at another node (XrdCl tried=).", st.TriedReturns.Load)
		m.CounterFunc("hepcache_cluster_no_node_total", "Requests with no cache node alive (clients told to wait).", st.NoNode.Load)
	}
	if p := cn.peers; p != nil {
		st := p.Stats()
		m.CounterFunc("hepcache_cluster_peer_hits_total", "Misses served by a peer's copy instead of the origin.", st.Hits.Load)
		m.CounterFunc("hepcache_cluster_peer_misses_total", "Misses no peer had a copy of.", st.Misses.Load)
		m.CounterFunc("hepcache_cluster_peer_fallbacks_total", "Peer reads that failed and went on at the origin.", st.Fallbacks.Load)
	}
}
