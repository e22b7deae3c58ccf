package pelican

import (
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/buildinfo"
)

// Defaults. A zero Config field means "use the default".
const (
	// defaultAdvertiseInterval is Pelican's Server.AdvertisementInterval:
	// the director forgets a cache whose ads stop for Server.AdLifetime.
	defaultAdvertiseInterval = time.Minute
	// defaultAdLifetime is Pelican's Server.AdLifetime: how long the
	// director keeps an ad (its "expiry"); 15 advertisements may fail in a
	// row before the cache drops out.
	defaultAdLifetime = 15 * time.Minute
	// defaultRegisterRetry is Pelican's Server.RegistrationRetryInterval.
	defaultRegisterRetry = 10 * time.Second
	// defaultRequestTimeout bounds one request to the registry or the
	// director.
	defaultRequestTimeout = 30 * time.Second
	// pelicanVersion is the Pelican version whose cache behaviour
	// hepcache implements and advertises: the first whose caches support
	// authorization to origins (features/features.go, CacheAuthz,
	// NotBeforePelican v7.16), which the director requires of caches in
	// front of origins that need it (federation token, namespace
	// authorization). hepcache's own version follows it as semantic
	// version build metadata (AdVersion), which the director shows and
	// ignores when it compares versions.
	pelicanVersion = "7.16.0"
	// defaultTokenRetry is the wait after a failed federation token
	// request before the next.
	defaultTokenRetry = 30 * time.Second
)

// Config configures a Member.
type Config struct {
	// Federation is the federation's discovery URL
	// (https://osg-htc.org), whose /.well-known/pelican-configuration
	// names the director and the registry. Required unless DirectorURL
	// and RegistryURL are both given.
	Federation string
	// DirectorURL and RegistryURL override what discovery says. Default "".
	DirectorURL string
	RegistryURL string
	// Site is the cache's name in the federation (Pelican's
	// Xrootd.Sitename): it registers as /caches/<Site>. Required.
	Site string
	// KeyFile holds the cache's ECDSA P-256 key, created on first start
	// when absent. Required.
	KeyFile string
	// StateDir keeps what the membership must remember across restarts:
	// the server id given at registration and the last namespace list (so
	// that a restart while the director is down still knows which
	// namespaces are public). Required.
	StateDir string
	// DataURL is where clients read: the https:// front end ("https://
	// cache.example.org:8443"); the director redirects clients there.
	// Required.
	DataURL string
	// WebURL is where the director reports its tests and scrapes the load
	// (https://). Default: DataURL (hepcache serves both on one port).
	WebURL string
	// Namespaces, when not empty, restrict the namespaces the cache
	// offers to those under these prefixes (Pelican's
	// Cache.PermittedNamespaces). Default: all the director lists.
	Namespaces []string
	// Audiences are the "aud" values accepted on clients' tokens.
	// Default: DataURL, WebURL, "https://wlcg.cern.ch/jwt/v1/any", "ANY".
	Audiences []string
	// AllowTokensWithoutTLS accepts clients' tokens that came over
	// unencrypted connections (security.allow_tokens_without_tls).
	// Default false: they are ignored.
	AllowTokensWithoutTLS bool
	// AdvertiseInterval is how often the cache advertises to the director.
	// Default 1m (Pelican's).
	AdvertiseInterval time.Duration
	// AdLifetime is the expiry an ad asks for. Default 15m.
	AdLifetime time.Duration
	// RegisterRetry is the wait before a failed registration is tried
	// again. Default 10s.
	RegisterRetry time.Duration
	// RequestTimeout bounds one request to the federation. Default 30s.
	RequestTimeout time.Duration
	// Version is the version advertised. Default AdVersion of this
	// build: "7.16.0+hepcache.<version>".
	Version string
	// Coordinates are where the cache is, "lat,lon" in decimal degrees
	// (Pelican's GeoLocation): the director sorts caches by distance and
	// prefers what a server declares to its GeoIP guess. Default "": the
	// director's guess.
	Coordinates string
	// RootCAs verify the federation's https servers (registry, director,
	// issuers). Nil: the system pool.
	RootCAs *x509.CertPool
	// Health returns the cache's state for the ad's status ("ok",
	// "degraded", ...). Nil: always "ok".
	Health func() string
	// Load returns the storage operations served so far and those in
	// progress: the director ranks caches by the rate of the first
	// (xrootd_server_io_total, scraped from WebURL). Nil: zeros.
	Load func() (total, active int64)
	// Stager fetches whole files for the prestage API. Nil: no prestage.
	Stager backend.Stager
	// Evict removes the cached copy of a path (the evict API and the
	// director's test files); it returns the files removed. Nil: no evict.
	Evict func(path string) (int, error)
	// UserAgent is sent with every request. Default "hepcache".
	UserAgent string
	// Logger receives state changes and failures. Default slog.Default().
	Logger *slog.Logger

	// now is the clock; a test seam.
	now func() time.Time
	// coordinate is Coordinates parsed (Validate).
	coordinate *coordinate
}

// EnsureDefaults fills zero fields with their defaults.
func (c *Config) EnsureDefaults() {
	if c.WebURL == "" {
		c.WebURL = c.DataURL
	}
	if len(c.Audiences) == 0 {
		c.Audiences = []string{c.DataURL}
		if c.WebURL != c.DataURL {
			c.Audiences = append(c.Audiences, c.WebURL)
		}
		c.Audiences = append(c.Audiences, "https://wlcg.cern.ch/jwt/v1/any", "ANY")
	}
	if c.AdvertiseInterval == 0 {
		c.AdvertiseInterval = defaultAdvertiseInterval
	}
	if c.AdLifetime == 0 {
		c.AdLifetime = defaultAdLifetime
	}
	if c.RegisterRetry == 0 {
		c.RegisterRetry = defaultRegisterRetry
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = defaultRequestTimeout
	}
	if c.Version == "" {
		c.Version = AdVersion(buildinfo.Get().Version)
	}
	if c.UserAgent == "" {
		c.UserAgent = "hepcache"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.now == nil {
		c.now = time.Now
	}
}

// siteName is what Pelican accepts in a server prefix: no slashes, no
// spaces (registry/registry_validation.go validatePrefix).
var siteName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@-]*$`)

// Validate reports every problem with the configuration in one error.
func (c *Config) Validate() error {
	var errs []error
	httpsURL := func(key, v string, required, noPath bool) {
		if v == "" {
			if required {
				errs = append(errs, fmt.Errorf("%s: required", key))
			}
			return
		}
		u, err := url.Parse(v)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s %q: %w", key, v, err))
		case u.Scheme != "https" || u.Host == "":
			errs = append(errs, fmt.Errorf("%s %q: want https://host[:port]", key, v))
		case noPath && strings.Trim(u.Path, "/") != "":
			errs = append(errs, fmt.Errorf("%s %q: no path: the director appends object paths to it", key, v))
		case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
			errs = append(errs, fmt.Errorf("%s %q: no query, fragment or user information", key, v))
		}
	}
	httpsURL("federation", c.Federation, c.DirectorURL == "" || c.RegistryURL == "", false)
	httpsURL("director URL", c.DirectorURL, false, false)
	httpsURL("registry URL", c.RegistryURL, false, false)
	// The director always redirects clients with https (director.go
	// getRedirectURL keeps the ad's scheme, and Pelican clients refuse
	// plain http for objects that need a token).
	httpsURL("data URL", c.DataURL, true, true)
	httpsURL("web URL", c.WebURL, false, true)
	if !siteName.MatchString(c.Site) {
		errs = append(errs, fmt.Errorf("site %q: a name without slashes or spaces (it registers as /caches/<site>)", c.Site))
	}
	if c.KeyFile == "" {
		errs = append(errs, errors.New("key file: required"))
	}
	if c.StateDir == "" {
		errs = append(errs, errors.New("state dir: required"))
	}
	for _, n := range c.Namespaces {
		if !strings.HasPrefix(n, "/") {
			errs = append(errs, fmt.Errorf("namespace %q: an absolute path", n))
		}
	}
	if c.AdvertiseInterval < 0 || c.AdLifetime < 0 || c.RegisterRetry < 0 || c.RequestTimeout < 0 {
		errs = append(errs, fmt.Errorf("intervals (advertise %v, ad lifetime %v, register retry %v, request timeout %v): must not be negative",
			c.AdvertiseInterval, c.AdLifetime, c.RegisterRetry, c.RequestTimeout))
	}
	if c.AdLifetime > 0 && c.AdvertiseInterval > c.AdLifetime/3 {
		errs = append(errs, fmt.Errorf("advertise interval %v: at most a third of the ad lifetime %v, so that one lost ad does not drop the cache", c.AdvertiseInterval, c.AdLifetime))
	}
	if slices.Contains(c.Audiences, "") {
		errs = append(errs, errors.New("audiences: an empty audience"))
	}
	if c.Coordinates != "" {
		var err error
		if c.coordinate, err = parseCoordinate(c.Coordinates); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// AdVersion is the version a cache of hepcache version v advertises: the
// Pelican version it implements, with v as build metadata
// ("7.16.0+hepcache.1.2.3"), so that the director's feature checks see
// 7.16.0 and its server list names hepcache's release.
func AdVersion(v string) string {
	meta := strings.Map(func(r rune) rune {
		switch {
		case r >= '0' && r <= '9', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '-', r == '.':
			return r
		}
		return '-'
	}, strings.TrimPrefix(v, "v"))
	meta = strings.Trim(strings.ReplaceAll(meta, "..", "."), ".")
	if meta == "" {
		meta = "unknown"
	}
	return pelicanVersion + "+hepcache." + meta
}

// Prefix is the cache's registry prefix, /caches/<site>.
func (c *Config) Prefix() string { return "/caches/" + c.Site }
