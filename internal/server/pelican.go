package server

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/buildinfo"
	"github.com/hepcache/hepcache/internal/config"
	httpfront "github.com/hepcache/hepcache/internal/frontend/http"
	"github.com/hepcache/hepcache/internal/frontend/xrootd"
	"github.com/hepcache/hepcache/internal/metrics"
	"github.com/hepcache/hepcache/internal/pelican"
	"github.com/hepcache/hepcache/internal/security"
	"github.com/hepcache/hepcache/internal/upstream"
	"github.com/hepcache/hepcache/origin"
	httporigin "github.com/hepcache/hepcache/origin/http"
)

// pelicanDiscoveryTimeout bounds the discovery done at start-up.
const pelicanDiscoveryTimeout = 30 * time.Second

// PelicanMemberConfig maps the [pelican] section onto the membership's
// Config, for serve and for `hepcache pelican register|status`: the
// federation's servers are verified with the CAs of the cache's origin
// credentials (cred.TLS; none: the system's).
func PelicanMemberConfig(cfg *config.Config, cred *security.OriginCredentials, log *slog.Logger) (*pelican.Config, error) {
	p := &cfg.Pelican
	var roots *x509.CertPool
	if cred.TLS != nil {
		roots = cred.TLS.RootCAs
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("pelican.data_url: no host name to make it of: %w", err)
	}
	return &pelican.Config{
		Federation: p.Federation, DirectorURL: p.DirectorURL, RegistryURL: p.RegistryURL,
		Site: p.Site, KeyFile: cfg.PelicanKeyFile(), StateDir: cfg.PelicanStateDir(),
		DataURL: cfg.PelicanDataURL(host), WebURL: p.WebURL, Namespaces: p.Namespaces, Audiences: p.Audiences,
		AdvertiseInterval: time.Duration(p.AdvertiseInterval), RootCAs: roots, Coordinates: p.Coordinates,
		AllowTokensWithoutTLS: cfg.Security.AllowTokensWithoutTLS,
		UserAgent:             "hepcache/" + buildinfo.Get().Version, Logger: log,
	}, nil
}

// newPelican makes the [pelican] membership (none when the section is
// off) and learns the federation's endpoints now: with origin.default
// empty the cache reads through the director's origin redirect, so the
// default origin becomes it in the configuration returned (a copy: the
// server's own stays as written, which reloads compare with).
func (s *Server) newPelican(cfg *config.Config, cred *security.OriginCredentials) (*config.Config, error) {
	if !cfg.Pelican.Enabled() {
		return cfg, nil
	}
	pc, err := PelicanMemberConfig(cfg, cred, s.log)
	if err != nil {
		return nil, err
	}
	pc.Health = func() string {
		switch s.metrics.Health().Status {
		case metrics.Healthy:
			return "ok"
		case metrics.Degraded:
			return "degraded"
		default:
			return "critical"
		}
	}
	pc.Load = func() (int64, int64) {
		sn := s.metrics.Snapshot()
		return sn.Hits + sn.PartialHits + sn.Misses, sn.OpenFiles
	}
	pc.Stager = lazyStager{s}
	pc.Evict = s.evictDefault
	if s.pel, err = pelican.New(pc); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), pelicanDiscoveryTimeout)
	defer cancel()
	if err := s.pel.Discover(ctx); err != nil {
		return nil, fmt.Errorf("pelican: %w (pelican.federation %q; the cache needs the director's address to read through it)", err, cfg.Pelican.Federation)
	}
	if cfg.Origin.Default == "" {
		c := *cfg
		c.Origin.Default = s.pel.OriginURL()
		s.log.Info("pelican: reading through the director's origin redirect", "origin", c.Origin.Default)
		return &c, nil
	}
	return cfg, nil
}

// lazyStager is the server's prestager, which is made after the
// membership (the membership comes before the origins it reads through).
type lazyStager struct{ s *Server }

var _ backend.Stager = lazyStager{}

// Stage implements backend.Stager.
func (l lazyStager) Stage(o backend.Owner, reqs []backend.Request) (string, error) {
	return l.s.stage.Stage(o, reqs)
}

// StageStatus implements backend.Stager.
func (l lazyStager) StageStatus(o backend.Owner, id string) (backend.StageJob, error) {
	return l.s.stage.StageStatus(o, id)
}

// CancelStage implements backend.Stager.
func (l lazyStager) CancelStage(o backend.Owner, id string) error {
	return l.s.stage.CancelStage(o, id)
}

// pelicanDialers makes the director's origin redirect an https origin
// that carries the federation token to every origin it redirects to.
func (s *Server) pelicanDialers(d map[string]upstream.DialFunc, cred *security.OriginCredentials) map[string]upstream.DialFunc {
	if s.pel == nil {
		return d
	}
	dirOrigin, err := upstream.Canonical(s.pel.OriginURL())
	if err != nil {
		return d
	}
	next := d["https"]
	d["https"] = func(ctx context.Context, c string) (origin.Origin, error) {
		if c != dirOrigin {
			return next(ctx, c)
		}
		// The federation token on every hop (origins that admit only the
		// federation's caches ask for it); the reader's own token, as
		// authz, for private namespaces (origins authorize each reader:
		// XCache in a Pelican cache passes it on the same way).
		return httporigin.New(&httporigin.Config{URL: c, Logger: s.log, TLSConfig: cred.TLS,
			Authorize: s.pel.Authorize, AuthorizeRedirects: true, ForwardClientToken: true})
	}
	return d
}

// evictDefault drops the cached copy of p from the default origin and
// says whether there was one (a file open by a client is refused: busy).
func (s *Server) evictDefault(p string) (int, error) {
	o, err := s.cache.Config().Origins.Resolve(context.Background(), "")
	if err != nil {
		return 0, err
	}
	n, err := s.cache.Evict(o.String(), p)
	if err != nil || n == 0 {
		return 0, err
	}
	return 1, nil
}

// pelicanAuthorizers puts the federation's namespace authorization in
// front of the site's.
func (s *Server) pelicanAuthorizers(h httpfront.Authorizer, x xrootd.Authorizer) (httpfront.Authorizer, xrootd.Authorizer) {
	if s.pel == nil {
		return h, x
	}
	return s.pel.Authorizer().HTTP(h), s.pel.Authorizer().XRootD(x)
}

// pelicanRoutes adds the director's and the Pelican client's endpoints to
// the https front end's routes, and the load metric the director scrapes
// at /metrics (other requests for /metrics get the cache's own figures
// when they are served on this listener).
func (s *Server) pelicanRoutes(routes map[string]http.Handler) map[string]http.Handler {
	if s.pel == nil {
		return routes
	}
	out := maps.Clone(routes)
	if out == nil {
		out = map[string]http.Handler{}
	}
	maps.Copy(out, s.pel.Routes())
	out[pelican.MetricsPath] = s.pel.MetricsHandler(out[pelican.MetricsPath])
	return out
}

// startPelican begins advertising (once the front ends serve) and exports
// the membership's figures.
func (s *Server) startPelican() {
	if s.pel == nil {
		return
	}
	st := s.pel.Stats()
	state := func(want string) func() int64 {
		return func() int64 {
			if s.pel.Status().State == want {
				return 1
			}
			return 0
		}
	}
	s.metrics.GaugeFunc("hepcache_pelican_advertising", "1 while the Pelican director accepts this cache's ads.", state(pelican.StateAdvertising))
	s.metrics.GaugeFunc("hepcache_pelican_pending_approval", "1 while the cache waits for the federation's approval of its registration.", state(pelican.StatePending))
	s.metrics.GaugeFunc("hepcache_pelican_refused", "1 while the registry or the director refuses the cache (the log says why).", state(pelican.StateRefused))
	s.metrics.GaugeFunc("hepcache_pelican_unreachable", "1 while the federation's registry or director does not answer.", state(pelican.StateUnreachable))
	s.metrics.CounterFunc("hepcache_pelican_ads_total", "Advertisements the Pelican director accepted.", st.Ads.Load)
	s.metrics.CounterFunc("hepcache_pelican_ad_failures_total", "Advertisements not accepted (unreachable, refused, not approved).", st.AdFailures.Load)
	s.metrics.CounterFunc("hepcache_pelican_registrations_total", "Registrations the Pelican registry created.", st.Registrations.Load)
	s.metrics.CounterFunc("hepcache_pelican_fed_tokens_total", "Federation tokens obtained from the director.", st.FedTokens.Load)
	s.metrics.CounterFunc("hepcache_pelican_fed_token_errors_total", "Failed federation token requests.", st.FedTokenErrors.Load)
	s.metrics.CounterFunc("hepcache_pelican_director_tests_total", "Director test reports received.", st.DirectorTests.Load)
	s.metrics.CounterFunc("hepcache_pelican_director_tests_ok_total", "Director test reports received that say ok.", st.DirectorTestOK.Load)
	s.metrics.GaugeFunc("hepcache_pelican_namespaces", "Federation namespaces in force for authorization.", func() int64 { return int64(s.pel.Status().Namespaces) })
	s.metrics.GaugeFunc("hepcache_pelican_last_ad_timestamp_seconds", "When the director last accepted an ad (Unix time, 0: never).", func() int64 {
		if t := s.pel.Status().LastAd; !t.IsZero() {
			return t.Unix()
		}
		return 0
	})
	s.pel.Start()
}

// leavePelican tells the director the cache is going (idempotent).
func (s *Server) leavePelican(ctx context.Context) {
	if s.pel != nil {
		s.pel.Leave(ctx)
	}
}
