package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/upstream"
	"github.com/hepcache/hepcache/origin"
)

// Mode is how a node serves a file that another node owns.
type Mode string

// Modes.
const (
	// ModeRedirect sends the client to the owner (kXR_redirect, HTTP 307).
	// The default.
	ModeRedirect Mode = "redirect"
	// ModeProxy fetches from the owner over root:// and relays the bytes,
	// for clients that cannot follow redirects. The file is cached only at
	// the owner.
	ModeProxy Mode = "proxy"
	// ModeLocal serves every file here (seed 003's cache on each worker
	// node); a miss asks the peers before the origin (PeerResolver).
	ModeLocal Mode = "local"
)

// Defaults.
const (
	// defaultPeerTimeout bounds opening a file at a peer in proxy mode
	// before the next node in the ranking is tried.
	defaultPeerTimeout = 10 * time.Second
	// noNodeWait is the kXR_wait a redirector without cache nodes asks for.
	noNodeWait = 5
)

// ErrNoNode is returned (inside a backend.WaitError) when no cache node is
// alive to serve a request.
var ErrNoNode = errors.New("cluster: no cache node alive")

// PeerDialFunc returns the Origin for a peer's root:// address
// ("host:port"). Origins are reused; the Router never closes them.
type PeerDialFunc func(ctx context.Context, rootAddr string) (origin.Origin, error)

// CachedOpener is implemented by a local cache that can open a file only if
// it is complete on disk, without contacting any origin (peer lookups).
type CachedOpener interface {
	// OpenCached opens the file whose cache key is (originURL, path), path
	// after name mapping. It returns an error wrapping origin.ErrNotFound
	// if the file is not complete in the cache.
	OpenCached(ctx context.Context, originURL, path string) (backend.File, error)
}

// RouterConfig configures a Router.
type RouterConfig struct {
	// Members is the cluster view. Required.
	Members Members
	// Local is this node's cache; nil for a redirector (no cache space).
	Local backend.Backend
	// Mode is redirect (default), proxy or local.
	Mode Mode
	// DefaultOrigin is the origin of requests that name none, as
	// configured (every node must have the same one). It is part of the
	// file key that is hashed.
	DefaultOrigin string
	// Dial opens peers' root:// endpoints; required for ModeProxy.
	Dial PeerDialFunc
	// PeerTimeout bounds an open at a peer in proxy mode before the next
	// node is tried. Default 10 s.
	PeerTimeout time.Duration
	// Logger receives routing decisions at debug level. Default
	// slog.Default().
	Logger *slog.Logger
}

// RouterStats counts routing decisions.
type RouterStats struct {
	Local, Redirected, Proxied, ProxyFailovers, PeerServed, PeerMisses, NoNode atomic.Int64
	// TriedReturns counts requests that came back with XrdCl's tried=
	// list after failing at another node (nodes listed are skipped).
	TriedReturns atomic.Int64
}

// Router is the node-selection decorator in front of the cache: for a file
// this node does not own it redirects the client to the owner, or proxies
// from it, or (ModeLocal) serves it here. It implements backend.Backend.
//
// # Design
//
// A file's key is its canonical origin URL plus its path; rendezvous
// hashing over the alive cache nodes of the current View ranks the nodes
// for it: the first owns the file, the others are the failover order, so a
// node that fails only moves its own files, each to the next node in its
// ranking. Every node can compute the owner on its own: there is no
// central directory, only the membership.
//
// Views of different nodes disagree for a few seconds after a change. A
// request routed once carries hc.rd and is then served where it lands, so
// clients never bounce between nodes. A client that fails at the owner
// comes back with XrdCl's tried= list (when this node is its manager) and
// is sent to the next node in the ranking without waiting for the failure
// detector; proxy mode fails over to the next node by itself.
type Router struct {
	cfg   RouterConfig
	stats RouterStats
	def   string

	// mu protects peers.
	mu    sync.Mutex
	peers map[string]origin.Origin
}

var _ backend.Backend = (*Router)(nil)

// NewRouter validates cfg and returns a Router.
func NewRouter(cfg *RouterConfig) (*Router, error) {
	c := *cfg
	if c.Mode == "" {
		c.Mode = ModeRedirect
	}
	if c.PeerTimeout == 0 {
		c.PeerTimeout = defaultPeerTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	var errs []error
	if c.Members == nil {
		errs = append(errs, errors.New("members: required"))
	}
	switch c.Mode {
	case ModeRedirect, ModeProxy:
	case ModeLocal:
		if c.Local == nil {
			errs = append(errs, errors.New("mode local needs a local cache"))
		}
	default:
		errs = append(errs, fmt.Errorf("mode %q: want redirect, proxy or local", c.Mode))
	}
	if c.Mode == ModeProxy && c.Dial == nil {
		errs = append(errs, errors.New("mode proxy needs a peer dialer"))
	}
	r := &Router{cfg: c, peers: map[string]origin.Origin{}}
	if c.DefaultOrigin != "" {
		d, err := upstream.Canonical(c.DefaultOrigin)
		if err != nil {
			errs = append(errs, fmt.Errorf("default origin: %w", err))
		}
		r.def = d
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("cluster router: %w", err)
	}
	return r, nil
}

// Stats returns the live counters.
func (r *Router) Stats() *RouterStats { return &r.stats }

// Key is the string hashed to pick a file's owner: the canonical origin
// URL and the path.
func (r *Router) Key(req backend.Request) string {
	o := r.def
	if req.Origin != "" {
		o = req.Origin
		if c, err := upstream.Canonical(req.Origin); err == nil {
			o = c
		}
	}
	return o + "/" + req.Path
}

// action is what to do with a request.
type action int

const (
	serveLocal action = iota
	redirectTo
	proxyTo
)

// route decides where req is served. For redirectTo and proxyTo, nodes
// are the candidates in order and first is the index of nodes[0] in the
// file's ranking.
func (r *Router) route(req backend.Request) (action, []Node, int, error) {
	v := r.cfg.Members.View()
	by, routed := opaqueGet(req.Opaque, KeyRouted)
	if routed && by != v.Self.Name && r.cfg.Local != nil {
		r.stats.Local.Add(1)
		return serveLocal, nil, 0, nil // another node routed it here: serve
	}
	if r.cfg.Mode == ModeLocal {
		r.stats.Local.Add(1)
		return serveLocal, nil, 0, nil
	}
	ranked := v.Rank(r.Key(req))
	if t := tried(req.Opaque); len(t) > 0 {
		// XrdCl lists the hosts that failed this request: skip them (but
		// not this node, which XrdCl names when it sent the client on).
		r.stats.TriedReturns.Add(1)
		self := hostOf(v.Self.Root)
		kept := ranked[:0:0]
		for _, n := range ranked {
			if h := hostOf(n.Root); !t[h] || h == self {
				kept = append(kept, n)
			}
		}
		ranked = kept
	}
	first := 0
	if routed && by == v.Self.Name {
		// The client came back: the node this one sent it to failed
		// before the failure detector noticed. Send it to the next.
		k, _ := strconv.Atoi(opaqueValue(req.Opaque, keyRoutedIndex))
		first = min(k+1, len(ranked))
	}
	cands := ranked[first:]
	if len(cands) == 0 || cands[0].Name == v.Self.Name {
		if r.cfg.Local != nil {
			r.stats.Local.Add(1)
			return serveLocal, nil, 0, nil
		}
		r.stats.NoNode.Add(1)
		return 0, nil, 0, &backend.WaitError{Seconds: noNodeWait, Reason: ErrNoNode.Error()}
	}
	if r.cfg.Mode == ModeProxy || isHTTP(req.Protocol) && cands[0].HTTP == "" {
		return proxyTo, cands, first, nil
	}
	return redirectTo, cands, first, nil
}

func isHTTP(p string) bool { return p == "http" || p == "https" }

// redirect returns the RedirectError sending req to n, the index-th node
// of the file's ranking, marked as routed by self.
func (r *Router) redirect(req backend.Request, n Node, index int) error {
	r.stats.Redirected.Add(1)
	self := r.cfg.Members.View().Self.Name
	mark := KeyRouted + "=" + self
	if index > 0 {
		mark += "&" + keyRoutedIndex + "=" + strconv.Itoa(index)
	}
	if isHTTP(req.Protocol) {
		p := req.Path
		if req.Origin != "" {
			p = "/" + req.Origin + p
		}
		q := opaqueSet(req.Opaque, KeyRouted, self)
		if index > 0 {
			q = opaqueSet(q, keyRoutedIndex, strconv.Itoa(index))
		}
		u := strings.TrimRight(n.HTTP, "/") + (&url.URL{Path: p}).EscapedPath() + "?" + q
		return &backend.RedirectError{URL: u}
	}
	host, port, _ := net.SplitHostPort(n.Root)
	var pn int
	fmt.Sscan(port, &pn)
	// The root:// front end sends host and port; the client keeps its
	// own path and opaque and adds ours.
	return &backend.RedirectError{
		URL:  "root://" + n.Root + "/" + req.Path + "?" + mark,
		Host: host,
		Port: pn,
	}
}

// Open implements backend.Backend.
func (r *Router) Open(ctx context.Context, req backend.Request) (backend.File, error) {
	if _, ok := opaqueGet(req.Opaque, KeyPeer); ok {
		return r.openForPeer(ctx, req)
	}
	act, nodes, first, err := r.route(req)
	switch {
	case err != nil:
		return nil, err
	case act == serveLocal:
		return r.cfg.Local.Open(ctx, req)
	case act == redirectTo:
		return nil, r.redirect(req, nodes[0], first)
	}
	return r.proxyOpen(ctx, req, nodes)
}

// Stat implements backend.Backend: routed like Open, so that the owner
// answers from its cache (and kXR_locate names the owner).
func (r *Router) Stat(ctx context.Context, req backend.Request) (origin.FileInfo, error) {
	act, nodes, first, err := r.route(req)
	switch {
	case err != nil:
		return origin.FileInfo{}, err
	case act == serveLocal:
		return r.cfg.Local.Stat(ctx, req)
	case act == redirectTo:
		return origin.FileInfo{}, r.redirect(req, nodes[0], first)
	}
	var fi origin.FileInfo
	_, err = r.proxy(ctx, req, nodes, func(ctx context.Context, o origin.Origin, p string) (err error) {
		fi, err = o.Stat(ctx, p)
		return err
	})
	if errors.Is(err, errLocal) {
		return r.cfg.Local.Stat(ctx, req)
	}
	return fi, err
}

// Checksum implements backend.Backend; routed like Open.
func (r *Router) Checksum(ctx context.Context, req backend.Request, algo string) (string, error) {
	act, nodes, first, err := r.route(req)
	switch {
	case err != nil:
		return "", err
	case act == serveLocal:
		return r.cfg.Local.Checksum(ctx, req, algo)
	case act == redirectTo:
		return "", r.redirect(req, nodes[0], first)
	}
	var sum string
	_, err = r.proxy(ctx, req, nodes, func(ctx context.Context, o origin.Origin, p string) (err error) {
		sum, err = o.Checksum(ctx, p, algo)
		return err
	})
	if errors.Is(err, errLocal) {
		return r.cfg.Local.Checksum(ctx, req, algo)
	}
	return sum, err
}

// List implements backend.Backend. Listings come from the origin through
// any cache, so a node with a cache answers itself; a redirector routes
// the directory like a file.
func (r *Router) List(ctx context.Context, req backend.Request, withStat bool) ([]origin.FileInfo, error) {
	if r.cfg.Local != nil {
		return r.cfg.Local.List(ctx, req, withStat)
	}
	act, nodes, first, err := r.route(req)
	switch {
	case err != nil:
		return nil, err
	case act == redirectTo:
		return nil, r.redirect(req, nodes[0], first)
	}
	var out []origin.FileInfo
	_, err = r.proxy(ctx, req, nodes, func(ctx context.Context, o origin.Origin, p string) (err error) {
		out, err = o.List(ctx, p, withStat)
		return err
	})
	return out, err
}

// ListEach implements backend.EachLister: a node with a cache lists
// through it in parts; elsewhere as List.
func (r *Router) ListEach(ctx context.Context, req backend.Request, withStat bool, fn func(origin.FileInfo) error) error {
	if r.cfg.Local != nil {
		return backend.ListEach(ctx, r.cfg.Local, req, withStat, fn)
	}
	list, err := r.List(ctx, req, withStat)
	return origin.Each(list, err, fn)
}

// openForPeer serves a peer lookup: only a file complete in the local
// cache, named by its cache key, and only to cluster members.
func (r *Router) openForPeer(ctx context.Context, req backend.Request) (backend.File, error) {
	co, ok := r.cfg.Local.(CachedOpener)
	if !ok {
		r.stats.PeerMisses.Add(1)
		return nil, fmt.Errorf("peer lookup %s: this node has no cache: %w", req.Path, origin.ErrNotFound)
	}
	if !r.isMember(req.Client) {
		return nil, fmt.Errorf("peer lookup %s from %s: not a cluster member: %w", req.Path, req.Client, backend.ErrForbidden)
	}
	o, _ := opaqueGet(req.Opaque, KeyOrigin)
	if uo, err := url.QueryUnescape(o); err == nil {
		o = uo
	}
	if o == "" {
		o = r.def
	}
	f, err := co.OpenCached(ctx, o, req.Path)
	if err != nil {
		r.stats.PeerMisses.Add(1)
		return nil, err
	}
	r.stats.PeerServed.Add(1)
	return f, nil
}

// isMember reports whether a client address ("ip:port") is the address of
// an alive member (its gossip or root:// host). Nodes sharing one host
// (tests, several nodes per machine on 127.0.0.x addresses) connect from
// the host's default loopback source address, so a loopback client is a
// member when this node's own address is loopback.
func (r *Router) isMember(client string) bool {
	h := hostOf(client)
	v := r.cfg.Members.View()
	if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
		if sip := net.ParseIP(hostOf(v.Self.Root)); sip != nil && sip.IsLoopback() {
			return true
		}
	}
	for _, n := range v.Nodes {
		if hostOf(n.Gossip) == h || hostOf(n.Root) == h {
			return true
		}
	}
	return false
}

// peer returns the Origin for a node's root:// endpoint.
func (r *Router) peer(ctx context.Context, n Node) (origin.Origin, error) {
	r.mu.Lock()
	o := r.peers[n.Root]
	r.mu.Unlock()
	if o != nil {
		return o, nil
	}
	o, err := r.cfg.Dial(ctx, n.Root)
	if err != nil {
		return nil, fmt.Errorf("dial node %s at %s: %w", n.Name, n.Root, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if prev := r.peers[n.Root]; prev != nil {
		o.Close()
		return prev, nil
	}
	r.peers[n.Root] = o
	return o, nil
}

// Close closes the connections to peers.
func (r *Router) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for k, o := range r.peers {
		errs = append(errs, o.Close())
		delete(r.peers, k)
	}
	return errors.Join(errs...)
}

// peerPath is the path to ask a node for req in proxy mode: forwarding
// syntax for a named origin, marked as routed.
func (r *Router) peerPath(req backend.Request) string {
	p := req.Path
	if req.Origin != "" {
		p = "/" + req.Origin + "/" + p
	}
	self := r.cfg.Members.View().Self.Name
	return p + "?" + opaqueSet(stripCluster(req.Opaque), KeyRouted, self)
}

// stripCluster removes XrdCl's tried list, which names hosts of this
// cluster and means nothing to the peer.
func stripCluster(opaque string) string {
	var out []string
	for _, kv := range strings.Split(opaque, "&") {
		if k, _, _ := strings.Cut(kv, "="); kv == "" || k == keyTried || k == "triedrc" {
			continue
		}
		out = append(out, kv)
	}
	return strings.Join(out, "&")
}

// proxy runs op at the first node of nodes that answers, then at the next
// ones while the failure is the node's (unavailable), and finally here if
// this node has a cache.
func (r *Router) proxy(ctx context.Context, req backend.Request, nodes []Node, op func(ctx context.Context, o origin.Origin, p string) error) (Node, error) {
	var errs []error
	for _, n := range nodes {
		if n.Name == r.cfg.Members.View().Self.Name {
			break // this node comes before the rest of the ranking
		}
		o, err := r.peer(ctx, n)
		if err == nil {
			pctx, cancel := context.WithTimeout(ctx, r.cfg.PeerTimeout)
			err = op(pctx, o, r.peerPath(req))
			cancel()
			if err == nil {
				r.stats.Proxied.Add(1)
				return n, nil
			}
		}
		if !nodeFailure(ctx, err) {
			return n, err // the node answered: not found, forbidden, ...
		}
		r.cfg.Logger.Warn("node failed, trying the next in the ranking", "node", n.Name, "path", req.Path, "err", err)
		r.stats.ProxyFailovers.Add(1)
		errs = append(errs, err)
	}
	if r.cfg.Local != nil {
		r.stats.Local.Add(1)
		return Node{}, errLocal
	}
	return Node{}, fmt.Errorf("%s: every node failed: %w", req.Path, errors.Join(append(errs, origin.ErrUnavailable)...))
}

// errLocal tells proxy's callers to serve locally.
var errLocal = errors.New("serve locally")

// nodeFailure reports whether err means the node (not the file) failed.
func nodeFailure(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	return errors.Is(err, origin.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

// proxyOpen opens req at the first node of nodes that answers (or here).
func (r *Router) proxyOpen(ctx context.Context, req backend.Request, nodes []Node) (backend.File, error) {
	var of origin.File
	at, err := r.proxy(ctx, req, nodes, func(ctx context.Context, o origin.Origin, p string) (err error) {
		of, err = o.Open(ctx, p)
		return err
	})
	if errors.Is(err, errLocal) {
		return r.cfg.Local.Open(ctx, req)
	}
	if err != nil {
		return nil, err
	}
	return &proxyFile{r: r, req: req, info: of.Info(), cur: of, at: at.Name, failed: map[string]bool{}}, nil
}
