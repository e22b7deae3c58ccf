package config

import (
	"flag"
	"fmt"
	"net"
	"strings"
)

// CmsdConfig is the [cmsd] section: subscription to an XRootD redirector's
// cmsd manager as a data server (docs/deployment.md).
type CmsdConfig struct {
	// Manager is the cmsd manager's "host:port" (the redirector's
	// all.manager, usually port 1213), or several separated by commas:
	// the node subscribes to each (redundant redirectors, all.manager
	// all). Flag --cmsd-manager. Default "" (no subscription).
	Manager string `toml:"manager"`
	// Paths are the path prefixes offered to the manager. Default ["/"].
	Paths []string `toml:"paths"`
	// Site is the site name given at login (cmsd's all.sitename).
	// Default: monitor.site.
	Site string `toml:"site"`
	// Host is the name this node gives the manager (myHN). Default: the
	// host name. The manager redirects clients to the address the
	// subscription comes from and server.listen's port.
	Host string `toml:"host"`
	// QueryTimeout bounds the answer to one "do you have this file?"
	// query: a cache lookup, then a stat at the origin. Default 5s.
	QueryTimeout Duration `toml:"query_timeout"`
}

func defaultCmsd() CmsdConfig {
	return CmsdConfig{Paths: []string{"/"}, QueryTimeout: Duration(5e9)}
}

func (m *CmsdConfig) flags(fs *flag.FlagSet) {
	fs.StringVar(&m.Manager, "cmsd-manager", m.Manager, "subscribe as a data server to this XRootD cmsd manager HOST:PORT (cmsd.manager)")
}

// Managers returns the managers of cmsd.manager, in order.
func (m *CmsdConfig) Managers() []string {
	var out []string
	for _, s := range strings.Split(m.Manager, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func (m *CmsdConfig) validate(bad func(key string, val any, allowed string)) {
	managers := m.Managers()
	if len(managers) == 0 {
		return
	}
	seen := map[string]bool{}
	for _, a := range managers {
		if h, p, err := net.SplitHostPort(a); err != nil || h == "" || p == "" || seen[a] {
			bad("cmsd.manager", fmt.Sprintf("%q", m.Manager), "the cmsd managers' host:port, separated by commas and each once, e.g. \"redirector.example.org:1213\"")
			break
		}
		seen[a] = true
	}
	if len(m.Paths) == 0 {
		bad("cmsd.paths", "[]", "at least one path prefix, e.g. [\"/\"]")
	}
	for i, p := range m.Paths {
		if !strings.HasPrefix(p, "/") || strings.ContainsAny(p, " \t\n\x00") {
			bad(fmt.Sprintf("cmsd.paths[%d]", i), fmt.Sprintf("%q", p), "an absolute path without spaces")
		}
	}
	if strings.ContainsAny(m.Site, " &=\n\x00") {
		bad("cmsd.site", fmt.Sprintf("%q", m.Site), "a name without spaces, & or =")
	}
	if m.QueryTimeout <= 0 {
		bad("cmsd.query_timeout", m.QueryTimeout, "a positive duration")
	}
}
