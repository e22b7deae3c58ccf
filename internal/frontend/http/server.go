// Package httpfront is hepcache's HTTP/WebDAV front end: GET and HEAD with
// byte ranges (multipart/byteranges for several), conditional requests,
// PROPFIND for stat and listing, and RFC 3230 digests, all translated into
// calls on backend.Backend. Bodies stream from File.Stream, so a cold read
// reaches the client piece by piece while the cache fetches it.
package httpfront

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/buildinfo"
	"github.com/hepcache/hepcache/internal/connlimit"
	"github.com/hepcache/hepcache/internal/metrics"
)

// Defaults. A zero Config field means "use the default".
const (
	// defaultReadHeaderTimeout bounds reading a request's headers, so a
	// slowloris client cannot hold a connection.
	defaultReadHeaderTimeout = 10 * time.Second
	// defaultIdleTimeout closes keep-alive connections idle this long.
	defaultIdleTimeout = 120 * time.Second
	// defaultWriteChunkTimeout bounds writing one chunk of a body: a client
	// that stops reading is cut off instead of pinning cache buffers.
	defaultWriteChunkTimeout = 60 * time.Second
	// defaultMaxRanges bounds the ranges of one request; uproot sends a few
	// hundred per multi-range GET at most (its header limit).
	defaultMaxRanges = 1024
	// defaultMaxHeaderBytes leaves room for long Range headers.
	defaultMaxHeaderBytes = 256 << 10
)

// Authorizer decides whether a request may proceed; it is the seam for
// tokens and X.509 (TLS client certificates are in r.TLS). Authorize may set
// req.User. It returns nil to allow, or an error wrapping
// backend.ErrForbidden whose message is sent with the 403. op is "read",
// "stat" or "list". It must be safe for concurrent use.
type Authorizer interface {
	Authorize(r *http.Request, req *backend.Request, op string) error
}

// Identifier names the client of r as the Authorizer sees it: the name of
// its verified credential, "" for a client without one; an error wrapping
// backend.ErrForbidden for a credential that does not verify. An
// Authorizer may implement it; the prestage API gives jobs their owner
// with it (without one, every client is owned by its host).
type Identifier interface {
	Identify(r *http.Request) (string, error)
}

// AuthorizerFunc adapts a function to Authorizer.
type AuthorizerFunc func(r *http.Request, req *backend.Request, op string) error

// Authorize calls f(r, req, op).
func (f AuthorizerFunc) Authorize(r *http.Request, req *backend.Request, op string) error {
	return f(r, req, op)
}

// Config configures a Server.
type Config struct {
	// Backend serves the files (the cache). Required.
	Backend backend.Backend
	// Authorizer is consulted before every file request. Nil: everyone may
	// read (the backend's namespace rules and forwarding allow-list still
	// apply).
	Authorizer Authorizer
	// DenyListing refuses directory listings (PROPFIND with depth 1, GET
	// of a directory) with 403, as XrdHttp's http.listingdeny. Default
	// false.
	DenyListing bool
	// Stager, if set, serves the prestage form and API at /prestage
	// (prestage.go). Nil: no /prestage route.
	Stager backend.Stager
	// Metrics receives request counts and connected clients. Nil: none.
	Metrics *metrics.Registry
	// Routes are extra handlers for exact paths, served before the file
	// namespace (e.g. "/metrics", "/health"; a key ending in "/" matches
	// the subtree, e.g. "/dashboard/"). A file at such a path cannot be read
	// over HTTP. Nil: files only.
	Routes map[string]http.Handler
	// TLSConfig turns on HTTPS: Serve then speaks TLS (and HTTP/2) on its
	// listener. It needs Certificates or GetCertificate (reload on SIGHUP
	// by swapping what GetCertificate returns). Nil: plain HTTP.
	TLSConfig *tls.Config
	// ReadHeaderTimeout bounds reading request headers. Default 10 s.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes idle keep-alive connections. Default 120 s.
	IdleTimeout time.Duration
	// WriteChunkTimeout bounds writing each chunk of a response body.
	// Default 60 s. Shorter frees the cache's buffers sooner from stalled
	// clients at the expense of cutting off very slow ones.
	WriteChunkTimeout time.Duration
	// MaxRanges bounds the ranges of one request; more get 416. Default
	// 1024.
	MaxRanges int
	// MaxHeaderBytes bounds the request headers. Default 256 KiB.
	MaxHeaderBytes int
	// ServerName is the Server header of every response (the Pelican
	// client records it as the server's version). Default
	// "hepcache/<version>".
	ServerName string
	// Logger receives operational messages. Default slog.Default().
	Logger *slog.Logger
}

// EnsureDefaults fills zero fields with their defaults.
func (c *Config) EnsureDefaults() {
	if c.ReadHeaderTimeout == 0 {
		c.ReadHeaderTimeout = defaultReadHeaderTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = defaultIdleTimeout
	}
	if c.WriteChunkTimeout == 0 {
		c.WriteChunkTimeout = defaultWriteChunkTimeout
	}
	if c.MaxRanges == 0 {
		c.MaxRanges = defaultMaxRanges
	}
	if c.MaxHeaderBytes == 0 {
		c.MaxHeaderBytes = defaultMaxHeaderBytes
	}
	if c.ServerName == "" {
		c.ServerName = "hepcache/" + buildinfo.Get().Version
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports every problem with the configuration in one error.
func (c *Config) Validate() error {
	var errs []error
	if c.Backend == nil {
		errs = append(errs, errors.New("backend: required"))
	}
	if c.ReadHeaderTimeout < 0 || c.IdleTimeout < 0 || c.WriteChunkTimeout < 0 {
		errs = append(errs, fmt.Errorf("timeouts %v, %v, %v: must not be negative", c.ReadHeaderTimeout, c.IdleTimeout, c.WriteChunkTimeout))
	}
	if c.MaxRanges < 0 || c.MaxHeaderBytes < 0 {
		errs = append(errs, fmt.Errorf("max ranges %d, max header bytes %d: must not be negative", c.MaxRanges, c.MaxHeaderBytes))
	}
	if c.TLSConfig != nil && len(c.TLSConfig.Certificates) == 0 && c.TLSConfig.GetCertificate == nil && c.TLSConfig.GetConfigForClient == nil {
		errs = append(errs, errors.New("tls config: no certificate (set Certificates or GetCertificate)"))
	}
	for p := range c.Routes {
		if len(p) == 0 || p[0] != '/' {
			errs = append(errs, fmt.Errorf("route %q: must start with /", p))
		}
	}
	return errors.Join(errs...)
}

// Server is the HTTP front end. Safe for concurrent use.
type Server struct {
	cfg Config
	srv *http.Server

	// mu protects conns.
	mu    sync.Mutex
	conns map[net.Conn]*metrics.Client
}

type clientKey struct{}

// passKey carries a connection's *connlimit.Pass in its requests' context.
type passKey struct{}

// New returns a Server; it listens only when Serve is called.
func New(cfg *Config) (*Server, error) {
	c := *cfg
	c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("http front end config: %w", err)
	}
	s := &Server{cfg: c, conns: map[net.Conn]*metrics.Client{}}
	if c.Metrics != nil {
		if c.TLSConfig != nil {
			c.Metrics.Clients().Declare("https")
		} else {
			c.Metrics.Clients().Declare("http")
		}
	}
	if c.Stager != nil {
		routes := map[string]http.Handler{prestagePath: s.prestageHandler()}
		for p, h := range c.Routes {
			routes[p] = h
		}
		s.cfg.Routes = routes
	}
	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: c.ReadHeaderTimeout,
		IdleTimeout:       c.IdleTimeout,
		MaxHeaderBytes:    c.MaxHeaderBytes,
		TLSConfig:         c.TLSConfig,
		ErrorLog:          slog.NewLogLogger(c.Logger.Handler(), slog.LevelDebug),
		ConnContext:       s.connContext,
		ConnState:         s.connState,
	}
	return s, nil
}

// Serve accepts connections on ln until Shutdown; with Config.TLSConfig it
// speaks TLS. It returns http.ErrServerClosed after Shutdown. Serve may be
// called for several listeners.
func (s *Server) Serve(ln net.Listener) error {
	if s.cfg.TLSConfig != nil {
		return s.srv.ServeTLS(ln, "", "")
	}
	return s.srv.Serve(ln)
}

// Shutdown stops accepting, lets requests in flight finish until ctx ends,
// then closes what is left.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		s.srv.Close()
		return fmt.Errorf("http front end shutdown: %w", err)
	}
	return nil
}

// connContext registers a new connection as a client and carries it in the
// requests' context, with its place under the connection bounds (a
// connlimit.Gate's listener).
func (s *Server) connContext(ctx context.Context, c net.Conn) context.Context {
	if p := connlimit.PassOf(c); p != nil {
		ctx = context.WithValue(ctx, passKey{}, p)
	}
	if s.cfg.Metrics == nil {
		return ctx
	}
	proto := "http"
	if s.cfg.TLSConfig != nil {
		proto = "https"
	}
	cl := s.cfg.Metrics.Clients().Add(proto, c.RemoteAddr().String())
	s.mu.Lock()
	s.conns[c] = cl
	s.mu.Unlock()
	return context.WithValue(ctx, clientKey{}, cl)
}

func (s *Server) connState(c net.Conn, st http.ConnState) {
	if st != http.StateClosed && st != http.StateHijacked {
		return
	}
	s.mu.Lock()
	cl := s.conns[c]
	delete(s.conns, c)
	s.mu.Unlock()
	if cl != nil {
		s.cfg.Metrics.Clients().Remove(cl)
	}
}
