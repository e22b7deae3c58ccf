package config

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// PelicanConfig is the [pelican] section: membership of a Pelican
// federation (the OSDF) as one of its caches (docs/pelican.md).
type PelicanConfig struct {
	// Federation is the federation's discovery URL ("https://osg-htc.org"
	// for the OSDF). Default "": not a member.
	Federation string `toml:"federation"`
	// DirectorURL and RegistryURL override what discovery says. Default
	// "": discovered.
	DirectorURL string `toml:"director_url"`
	RegistryURL string `toml:"registry_url"`
	// Site is the cache's name in the federation (Pelican's
	// Xrootd.Sitename): it registers as /caches/<site>. Required with
	// federation.
	Site string `toml:"site"`
	// KeyFile holds the cache's ECDSA P-256 key, created (mode 0600) on
	// the first start when absent; keep it: the registration is bound to
	// it. Default "": <cache.dir>/pelican/issuer.pem.
	KeyFile string `toml:"key_file"`
	// DataURL is where the director sends clients: the https:// front end
	// (server.http_listen with security.tls_cert). Default "":
	// https://<host name>:<port of server.http_listen>.
	DataURL string `toml:"data_url"`
	// WebURL is where the director reports its tests and scrapes the load.
	// Default "": data_url (served on the same listener).
	WebURL string `toml:"web_url"`
	// Namespaces, when set, restrict the namespaces the cache serves to
	// those under these prefixes (Pelican's Cache.PermittedNamespaces).
	// Default []: every namespace the director lists.
	Namespaces []string `toml:"namespaces"`
	// Audiences are the token audiences accepted from clients. Default []:
	// data_url, web_url, "https://wlcg.cern.ch/jwt/v1/any" and "ANY".
	Audiences []string `toml:"audiences"`
	// AdvertiseInterval is how often the cache advertises itself to the
	// director. Default 1m, as a Pelican cache: the director drops a cache
	// after 15 minutes without an ad.
	AdvertiseInterval Duration `toml:"advertise_interval"`
	// Coordinates are where the cache is, "lat,lon" in decimal degrees
	// (Pelican's GeoLocation): the director sorts caches by distance from
	// the client and prefers a declared place to its GeoIP guess.
	// Default "": the director's guess.
	Coordinates string `toml:"coordinates"`
}

// Enabled reports whether the cache is a member of a federation.
func (p *PelicanConfig) Enabled() bool { return p.Federation != "" || p.DirectorURL != "" }

// PelicanKeyFile is pelican.key_file or its default.
func (c *Config) PelicanKeyFile() string {
	if c.Pelican.KeyFile != "" {
		return c.Pelican.KeyFile
	}
	return filepath.Join(c.Cache.Dir, "pelican", "issuer.pem")
}

// PelicanStateDir is where the membership keeps its state (server id,
// namespace list, federation endpoints): <cache.dir>/pelican.
func (c *Config) PelicanStateDir() string { return filepath.Join(c.Cache.Dir, "pelican") }

// PelicanDataURL is pelican.data_url or its default from host, the host
// name to use.
func (c *Config) PelicanDataURL(host string) string {
	if c.Pelican.DataURL != "" {
		return c.Pelican.DataURL
	}
	_, port, err := net.SplitHostPort(c.Server.HTTPListen)
	if err != nil || port == "" {
		return ""
	}
	if port == "443" {
		return "https://" + host
	}
	return "https://" + net.JoinHostPort(host, port)
}

var pelicanSite = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@-]*$`)

func (c *Config) validatePelican(bad func(key string, val any, allowed string)) {
	p := &c.Pelican
	if !p.Enabled() {
		for key, v := range map[string]string{"pelican.site": p.Site, "pelican.registry_url": p.RegistryURL, "pelican.data_url": p.DataURL} {
			if v != "" {
				bad(key, fmt.Sprintf("%q", v), "needs pelican.federation (the federation's discovery URL, e.g. \"https://osg-htc.org\")")
			}
		}
		return
	}
	httpsURL := func(key, v string, noPath bool) {
		if v == "" {
			return
		}
		u, err := url.Parse(v)
		switch {
		case err != nil || u.Scheme != "https" || u.Host == "":
			bad(key, fmt.Sprintf("%q", v), "an https://host[:port] URL")
		case noPath && strings.Trim(u.Path, "/") != "":
			bad(key, fmt.Sprintf("%q", v), "no path: the director appends object paths to it")
		case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
			bad(key, fmt.Sprintf("%q", v), "no query, fragment or user information")
		}
	}
	httpsURL("pelican.federation", p.Federation, false)
	httpsURL("pelican.director_url", p.DirectorURL, false)
	httpsURL("pelican.registry_url", p.RegistryURL, false)
	httpsURL("pelican.data_url", p.DataURL, true)
	httpsURL("pelican.web_url", p.WebURL, true)
	if p.Federation == "" && (p.DirectorURL == "" || p.RegistryURL == "") {
		bad("pelican.federation", `""`, "the federation's discovery URL, or both pelican.director_url and pelican.registry_url")
	}
	if !pelicanSite.MatchString(p.Site) {
		bad("pelican.site", fmt.Sprintf("%q", p.Site), "required: the cache's name in the federation, without slashes or spaces (it registers as /caches/<site>)")
	}
	// The director always sends clients to an https:// URL.
	if c.Server.HTTPListen == "" {
		bad("server.http_listen", `""`, "a Pelican cache serves its clients over https: set server.http_listen (e.g. \":8443\") and security.tls_cert")
	}
	if c.Security.TLSCert == "" {
		bad("security.tls_cert", `""`, "a Pelican cache serves its clients over https: a host certificate the federation's clients trust")
	}
	for i, n := range p.Namespaces {
		if !strings.HasPrefix(n, "/") {
			bad(fmt.Sprintf("pelican.namespaces[%d]", i), fmt.Sprintf("%q", n), "an absolute namespace path, e.g. \"/ospool\"")
		}
	}
	for i, a := range p.Audiences {
		if a == "" {
			bad(fmt.Sprintf("pelican.audiences[%d]", i), `""`, "a token audience (a URL, or \"ANY\")")
		}
	}
	if p.Coordinates != "" {
		la, lo, ok := strings.Cut(p.Coordinates, ",")
		lat, err1 := strconv.ParseFloat(strings.TrimSpace(la), 64)
		long, err2 := strconv.ParseFloat(strings.TrimSpace(lo), 64)
		if !ok || err1 != nil || err2 != nil || lat < -90 || lat > 90 || long < -180 || long > 180 {
			bad("pelican.coordinates", fmt.Sprintf("%q", p.Coordinates), `"lat,lon" in decimal degrees (latitude within ±90, longitude within ±180), e.g. "41.8781,-87.6298"`)
		}
	}
	if p.AdvertiseInterval < 0 || p.AdvertiseInterval > Duration(5*60e9) {
		bad("pelican.advertise_interval", p.AdvertiseInterval, "0s (1m) to 5m: the director drops a cache after 15 minutes without an ad, and three may be lost")
	}
}
