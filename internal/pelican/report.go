package pelican

import (
	"context"
	"fmt"
	"net/http"
	"strings"
)

// Register registers the cache now (what Start does first), for
// `hepcache pelican register`: it returns the state reached
// (StateRegistered, StatePending or StateRefused) and why.
func (m *Member) Register(ctx context.Context) (state, reason string, err error) {
	if err := m.Discover(ctx); err != nil {
		return "", "", err
	}
	m.mu.Lock()
	fed := m.fed
	m.mu.Unlock()
	state, reason, err = m.ensureRegistered(ctx, fed)
	if err == nil {
		m.setState(state, reason)
	}
	return state, reason, err
}

// Report is what the federation says of the cache, for `hepcache pelican
// status`.
type Report struct {
	Federation, Director, Registry string
	Prefix, KeyFile, KeyID         string
	// Registered: the registry holds the prefix; KeyMatch: with this key;
	// Approved: an administrator approved it (or none needs to).
	Registered, KeyMatch, Approved bool
	// Listed: the director lists the cache; the rest is what it says.
	Listed       bool
	Name         string
	DataURL      string
	HealthStatus string // the director's test result ("OK", "Error", ...)
	ServerStatus string // the status of the cache's last ad ("ok", ...)
	Version      string
	Namespaces   []string
	// Filtered: the director sends the cache no client, FilteredType says
	// why ("Temporarily disabled by the server admin": a downtime of its
	// own); InDowntime: a downtime the director holds for the cache is in
	// force.
	Filtered     bool
	FilteredType string
	InDowntime   bool
}

// Inspect asks the registry and the director about the cache. It fails
// only when they cannot be asked.
func (m *Member) Inspect(ctx context.Context) (Report, error) {
	r := Report{Federation: m.cfg.Federation, Prefix: m.cfg.Prefix(), KeyFile: m.key.File(), KeyID: m.key.KID()}
	if err := m.Discover(ctx); err != nil {
		return r, err
	}
	m.mu.Lock()
	fed := m.fed
	m.mu.Unlock()
	r.Director, r.Registry = fed.Director, fed.Registry
	var err error
	if r.Registered, r.KeyMatch, err = m.c.keyStatus(ctx, fed.Registry, r.Prefix, m.key); err != nil {
		return r, err
	}
	if r.Registered {
		if r.Approved, err = m.c.approved(ctx, fed.Registry, r.Prefix); err != nil {
			return r, err
		}
	}
	// The director's server list (director/director_ui.go listServers)
	// is public.
	var servers []struct {
		Name              string   `json:"name"`
		URL               string   `json:"url"`
		Type              string   `json:"type"`
		HealthStatus      string   `json:"healthStatus"`
		ServerStatus      string   `json:"serverStatus"`
		RegistryPrefix    string   `json:"registryPrefix"`
		Version           string   `json:"version"`
		NamespacePrefixes []string `json:"namespacePrefixes"`
		Filtered          bool     `json:"filtered"`
		FilteredType      string   `json:"filteredType"`
		Downtimes         []struct {
			Start int64 `json:"startTime"`
			End   int64 `json:"endTime"`
		} `json:"downtimes"`
	}
	if _, err := m.c.do(ctx, http.MethodGet, join(fed.Director, "api", "v1.0", "director_ui", "servers"), "", nil, &servers, maxNamespaceBody); err != nil {
		return r, fmt.Errorf("the director's server list: %w", err)
	}
	for _, s := range servers {
		if s.Type == "Cache" && (s.RegistryPrefix == r.Prefix || strings.EqualFold(s.Name, m.cfg.Site)) {
			r.Listed, r.Name, r.DataURL = true, s.Name, s.URL
			r.HealthStatus, r.ServerStatus, r.Version, r.Namespaces = s.HealthStatus, s.ServerStatus, s.Version, s.NamespacePrefixes
			r.Filtered, r.FilteredType = s.Filtered, s.FilteredType
			now := m.cfg.now().UnixMilli()
			for _, d := range s.Downtimes {
				if d.Start <= now && (d.End == -1 || now <= d.End) {
					r.InDowntime = true
				}
			}
			break
		}
	}
	return r, nil
}

// String renders the report for people, one fact a line.
func (r Report) String() string {
	var b strings.Builder
	yes := func(v bool) string {
		if v {
			return "yes"
		}
		return "no"
	}
	fmt.Fprintf(&b, "federation:   %s\ndirector:     %s\nregistry:     %s\n", r.Federation, r.Director, r.Registry)
	fmt.Fprintf(&b, "prefix:       %s\nkey:          %s (kid %s)\n", r.Prefix, r.KeyFile, r.KeyID)
	switch {
	case !r.Registered:
		b.WriteString("registered:   no (hepcache pelican register, or start the server)\n")
	case !r.KeyMatch:
		b.WriteString("registered:   yes, under ANOTHER key: this cache cannot advertise\n")
	default:
		fmt.Fprintf(&b, "registered:   yes, with this key\napproved:     %s\n", yes(r.Approved))
	}
	if !r.Listed {
		b.WriteString("director:     does not list this cache (not advertising)\n")
		return b.String()
	}
	fmt.Fprintf(&b, "listed as:    %s at %s (version %s)\nstatus:       %s (the cache's own)\ndirector test: %s\nnamespaces:   %s\n",
		r.Name, r.DataURL, r.Version, r.ServerStatus, r.HealthStatus, strings.Join(r.Namespaces, " "))
	switch {
	case r.InDowntime && r.Filtered:
		fmt.Fprintf(&b, "downtime:     IN FORCE: the director sends this cache no client (%s; hepcache pelican downtime)\n", r.FilteredType)
	case r.Filtered:
		fmt.Fprintf(&b, "filtered:     the director sends this cache no client (%s)\n", r.FilteredType)
	case r.InDowntime:
		b.WriteString("downtime:     IN FORCE, but the director still sends clients (it may ignore the cache's own downtimes)\n")
	default:
		b.WriteString("downtime:     none in force: the director sends clients\n")
	}
	return b.String()
}
