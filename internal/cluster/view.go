package cluster

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/hepcache/hepcache/internal/hrw"
)

// Role is what a node does in the cluster.
type Role string

// Roles.
const (
	// RoleCache nodes have cache space and own files.
	RoleCache Role = "cache"
	// RoleRedirector nodes own no files: they only send clients to the
	// cache nodes (seed 004's single entry point).
	RoleRedirector Role = "redirector"
)

// Node is one member of the cluster as this node knows it.
type Node struct {
	// Name is unique and stable across restarts: files are hashed to it.
	Name string `json:"-"`
	// Role is cache or redirector.
	Role Role `json:"role"`
	// Root is the root:// address clients use, "host:port".
	Root string `json:"root,omitempty"`
	// HTTP is the http(s) base URL clients use ("http://host:port"), or "".
	HTTP string `json:"http,omitempty"`
	// Weight scales the node's share of files (1 if zero).
	Weight float64 `json:"w,omitempty"`
	// Leaving is set by a node that is shutting down gracefully: it gets
	// no new clients while it finishes its reads.
	Leaving bool `json:"leaving,omitempty"`
	// Gossip is the node's memberlist address (set from the member list,
	// not from its metadata).
	Gossip string `json:"-"`
}

// View is an immutable snapshot of the cluster: the alive members.
// Routing a file needs one View, so a request sees one consistent
// membership even while it changes.
type View struct {
	// Self is this node.
	Self Node
	// Nodes are the alive members that are not leaving, this node
	// included, sorted by name.
	Nodes []Node
	// Version counts membership changes seen by this node.
	Version uint64
	// Changed is when the membership last changed.
	Changed time.Time

	owners []hrw.Node // the cache-role nodes, for ranking
	byName map[string]int
}

// NewView builds a view of nodes and self; members that are leaving are
// left out (self stays, but owns nothing once it is leaving).
func NewView(self Node, nodes []Node, version uint64, changed time.Time) *View {
	v := &View{Self: self, Version: version, Changed: changed, byName: map[string]int{}}
	for _, n := range nodes {
		if !n.Leaving && n.Name != self.Name {
			v.Nodes = append(v.Nodes, n)
		}
	}
	v.Nodes = append(v.Nodes, self)
	slices.SortFunc(v.Nodes, func(a, b Node) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	for i, n := range v.Nodes {
		v.byName[n.Name] = i
		if n.Role == RoleCache && !n.Leaving {
			v.owners = append(v.owners, hrw.Node{Name: n.Name, Weight: n.Weight})
		}
	}
	return v
}

// Node returns the alive member called name.
func (v *View) Node(name string) (Node, bool) {
	i, ok := v.byName[name]
	if !ok {
		return Node{}, false
	}
	return v.Nodes[i], true
}

// Rank returns the alive cache nodes in rendezvous order for key: the
// first owns the file, the others are the failover order.
func (v *View) Rank(key string) []Node {
	r := hrw.Rank(v.owners, key)
	out := make([]Node, len(r))
	for i, n := range r {
		out[i] = v.Nodes[v.byName[n.Name]]
	}
	return out
}

// Owner returns the alive cache node that owns key, or false if there is
// none.
func (v *View) Owner(key string) (Node, bool) {
	n, ok := hrw.Owner(v.owners, key)
	if !ok {
		return Node{}, false
	}
	return v.Nodes[v.byName[n.Name]], true
}

// Members gives the current view of the cluster. Implementations are safe
// for concurrent use and View never blocks.
type Members interface {
	// View returns the current snapshot; callers must not modify it.
	View() *View
}

// Static is a fixed membership, for tests and for clusters configured
// without gossip.
type Static struct{ V *View }

// View implements Members.
func (s Static) View() *View { return s.V }

// Deferred is Members whose source is attached later: a server builds its
// cache (which needs Members for peer lookups) before it listens, and
// joins the cluster only once it can serve. Until Attach, the view is
// this node alone.
type Deferred struct {
	alone *View
	src   atomic.Pointer[Members]
}

// NewDeferred returns Members that see only self until Attach.
func NewDeferred(self Node) *Deferred {
	return &Deferred{alone: NewView(self, nil, 0, time.Now())}
}

// Attach makes m the source of views.
func (d *Deferred) Attach(m Members) { d.src.Store(&m) }

// View implements Members.
func (d *Deferred) View() *View {
	if m := d.src.Load(); m != nil {
		return (*m).View()
	}
	return d.alone
}
