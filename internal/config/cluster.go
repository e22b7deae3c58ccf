package config

import (
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"strings"
)

// ClusterConfig is the [cluster] section: several hepcache nodes acting as
// one cache (docs/deployment.md).
type ClusterConfig struct {
	// Enabled turns cluster mode on. Default false (a single cache).
	Enabled bool `toml:"enabled"`
	// Name is this node's name, unique in the cluster and stable across
	// restarts (files are hashed to names). Default: the host name.
	Name string `toml:"name"`
	// Role is "cache" (owns files; the default) or "redirector" (no cache
	// space: the single entry point that sends clients to cache nodes).
	Role string `toml:"role"`
	// Mode is how a request for another node's file is served: "redirect"
	// (kXR_redirect / HTTP 307 to the owner; the default), "proxy" (fetch
	// from the owner and relay, for clients that cannot follow redirects)
	// or "local" (serve it here; misses ask the peers before the origin:
	// a cache on every worker node).
	Mode string `toml:"mode"`
	// GossipListen is the membership (memberlist) address, TCP and UDP.
	// Default ":7946".
	GossipListen string `toml:"gossip_listen"`
	// GossipAdvertise is the gossip address other nodes use, if not
	// GossipListen's (NAT, a wildcard listen address). Default "".
	GossipAdvertise string `toml:"gossip_advertise"`
	// Join lists gossip addresses of other nodes ("host:7946"); any one
	// that answers suffices. Default empty (this node starts a cluster).
	Join []string `toml:"join"`
	// AdvertiseRoot is the root:// "host:port" clients are sent to.
	// Default: this host's name and server.listen's port.
	AdvertiseRoot string `toml:"advertise_root"`
	// AdvertiseHTTP is the base URL HTTP clients are sent to
	// ("https://host:8443"). Default: derived from server.http_listen,
	// empty if HTTP is off.
	AdvertiseHTTP string `toml:"advertise_http"`
	// Weight scales this node's share of files (e.g. its disk size in TB).
	// Default 1.
	Weight float64 `toml:"weight"`
	// PeerLookup makes a miss ask other nodes for a complete copy before
	// the origin: in mode local every peer (up to peer_lookup_max), else
	// the next nodes in the file's ranking, which held it before the last
	// membership change. Default true.
	PeerLookup bool `toml:"peer_lookup"`
	// PeerLookupMax is how many peers a miss asks at once. Default 8.
	PeerLookupMax int `toml:"peer_lookup_max"`
	// Profile selects the failure detector's timings: "lan" (the default;
	// a dead node is dropped in about 5 s), "wan" or "local".
	Profile string `toml:"profile"`
	// SecretKeyFile holds a base64 AES key (16, 24 or 32 bytes) that
	// encrypts gossip. Default "": gossip in clear, keep it on a private
	// network.
	SecretKeyFile string `toml:"secret_key_file"`
	// Label separates clusters sharing a network: nodes with another label
	// are ignored. Default "hepcache".
	Label string `toml:"label"`
}

func defaultCluster() ClusterConfig {
	return ClusterConfig{Role: "cache", Mode: "redirect", GossipListen: ":7946", Weight: 1,
		PeerLookup: true, PeerLookupMax: 8, Profile: "lan", Label: "hepcache"}
}

// NodeName is the cluster and federation name of this node: cluster.name,
// else the host name.
func (c *Config) NodeName() string {
	if c.Cluster.Name != "" {
		return c.Cluster.Name
	}
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "hepcache"
	}
	return h
}

// RootAdvertise is the root:// address clients are sent to.
func (c *Config) RootAdvertise() string {
	if c.Cluster.AdvertiseRoot != "" {
		return c.Cluster.AdvertiseRoot
	}
	return advertise(c.Server.Listen)
}

// HTTPAdvertise is the base URL HTTP clients are sent to, or "".
func (c *Config) HTTPAdvertise() string {
	if c.Cluster.AdvertiseHTTP != "" || c.Server.HTTPListen == "" {
		return strings.TrimRight(c.Cluster.AdvertiseHTTP, "/")
	}
	return "http://" + advertise(c.Server.HTTPListen)
}

// advertise replaces a wildcard host of a listen address with the host
// name.
func advertise(listen string) string {
	h, p, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if h == "" || h == "0.0.0.0" || h == "::" {
		h, _ = os.Hostname()
	}
	return net.JoinHostPort(h, p)
}

// GossipKey reads cluster.secret_key_file.
func (c *Config) GossipKey() ([]byte, error) {
	if c.Cluster.SecretKeyFile == "" {
		return nil, nil
	}
	b, err := os.ReadFile(c.Cluster.SecretKeyFile)
	if err != nil {
		return nil, fmt.Errorf("cluster.secret_key_file: %w", err)
	}
	k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("cluster.secret_key_file %s: not base64: %w", c.Cluster.SecretKeyFile, err)
	}
	if n := len(k); n != 16 && n != 24 && n != 32 {
		return nil, fmt.Errorf("cluster.secret_key_file %s: %d bytes, want 16, 24 or 32", c.Cluster.SecretKeyFile, n)
	}
	return k, nil
}

// validateCluster reports the invalid [cluster] and federation values.
func (c *Config) validateCluster(bad func(key string, val any, allowed string)) {
	if c.Origin.MaxHops < 1 || c.Origin.MaxHops > 16 {
		bad("origin.max_hops", c.Origin.MaxHops, "1 to 16")
	}
	for _, f := range c.Origin.Fallback {
		if !strings.Contains(f, "://") {
			bad("origin.fallback", fmt.Sprintf("%q", f), "origin URLs such as \"root://host:1094\"")
		}
	}
	if len(c.Origin.Fallback) > 0 && c.Origin.Default == "" {
		bad("origin.fallback", c.Origin.Fallback, "needs origin.default (the fallbacks stand in for it)")
	}
	cl := c.Cluster
	if !cl.Enabled {
		return
	}
	if strings.ContainsAny(c.NodeName(), " \t,&?=") {
		bad("cluster.name", fmt.Sprintf("%q", c.NodeName()), "no spaces or any of ,&?=")
	}
	switch cl.Role {
	case "cache", "redirector":
	default:
		bad("cluster.role", fmt.Sprintf("%q", cl.Role), "cache or redirector")
	}
	switch cl.Mode {
	case "redirect", "proxy":
	case "local":
		if cl.Role == "redirector" {
			bad("cluster.mode", `"local"`, "a redirector has no cache to serve locally; use redirect or proxy")
		}
	default:
		bad("cluster.mode", fmt.Sprintf("%q", cl.Mode), "redirect, proxy or local")
	}
	for _, a := range append([]string{cl.GossipListen, cl.GossipAdvertise}, cl.Join...) {
		if a == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			bad("cluster gossip address", fmt.Sprintf("%q", a), "host:port")
		}
	}
	if _, _, err := net.SplitHostPort(c.RootAdvertise()); err != nil {
		bad("cluster.advertise_root", fmt.Sprintf("%q", c.RootAdvertise()), "host:port")
	}
	if h := cl.AdvertiseHTTP; h != "" && !strings.HasPrefix(h, "http://") && !strings.HasPrefix(h, "https://") {
		bad("cluster.advertise_http", fmt.Sprintf("%q", h), "an http:// or https:// URL")
	}
	if cl.Weight <= 0 {
		bad("cluster.weight", cl.Weight, "a positive number")
	}
	if cl.PeerLookupMax < 1 {
		bad("cluster.peer_lookup_max", cl.PeerLookupMax, "at least 1")
	}
	switch cl.Profile {
	case "lan", "wan", "local":
	default:
		bad("cluster.profile", fmt.Sprintf("%q", cl.Profile), "lan, wan or local")
	}
	if _, err := c.GossipKey(); err != nil {
		bad("cluster.secret_key_file", fmt.Sprintf("%q", cl.SecretKeyFile), err.Error())
	}
}
