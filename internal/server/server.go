// Package server assembles a running hepcache from its configuration: the
// origins (with the forwarding allow-list), the block cache, the root:// and
// HTTP front ends, the access log and the admin socket, and shuts them down
// in order (stop accepting, let reads finish, sync every sidecar).
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hepcache/hepcache/disk"
	"github.com/hepcache/hepcache/internal/cachemetrics"

	"github.com/hepcache/hepcache/internal/accesslog"
	"github.com/hepcache/hepcache/internal/admin"
	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/cms"
	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/dashboard"
	"github.com/hepcache/hepcache/internal/federation"
	httpfront "github.com/hepcache/hepcache/internal/frontend/http"
	"github.com/hepcache/hepcache/internal/frontend/xrootd"
	"github.com/hepcache/hepcache/internal/hostallow"
	"github.com/hepcache/hepcache/internal/listenfds"
	"github.com/hepcache/hepcache/internal/logbound"
	"github.com/hepcache/hepcache/internal/metrics"
	"github.com/hepcache/hepcache/internal/monitor"
	"github.com/hepcache/hepcache/internal/notfound"
	"github.com/hepcache/hepcache/internal/origintimeout"
	"github.com/hepcache/hepcache/internal/pelican"
	"github.com/hepcache/hepcache/internal/policy"
	"github.com/hepcache/hepcache/internal/prestage"
	"github.com/hepcache/hepcache/internal/security"
	"github.com/hepcache/hepcache/internal/units"
	"github.com/hepcache/hepcache/internal/upstream"
	"github.com/hepcache/hepcache/origin"
	httporigin "github.com/hepcache/hepcache/origin/http"
	"github.com/hepcache/hepcache/origin/posix"
	s3origin "github.com/hepcache/hepcache/origin/s3"
	xrdorigin "github.com/hepcache/hepcache/origin/xrootd"
)

// Server is a running hepcache.
type Server struct {
	cfg    *config.Config
	log    *slog.Logger
	unlock func()

	origins *upstream.Set
	// otimeout bounds every origin call by origin.timeout (reloadable).
	otimeout *origintimeout.Timeout
	cache    *cache.Cache
	alog     *accesslog.Log
	// fds is the descriptor budget and the bounds that enforce it
	// (descriptors.go).
	fds   *descriptors
	admin *admin.Server
	// stage fetches whole files on request (kXR_prepare, hepcache
	// prestage, the HTTP form).
	stage   *prestage.Stager
	metrics *metrics.Registry
	dash    *dashboard.Dashboard
	// mon sends the XRootD monitoring streams (monitor.go); nil when off.
	mon *monitor.Monitor
	// sec authenticates and authorizes clients (the [security] section);
	// with no security configured it allows everything.
	sec *security.Security
	// allow is security.allow_hosts, checked as each front end accepts a
	// connection; Reload replaces its patterns.
	allow *hostallow.List
	// s3creds sign the requests to s3:// origins; nil when none is
	// configured. Key files are re-read on Reload.
	s3creds s3origin.Credentials

	root   *xrootd.Server
	rootLn net.Listener
	http   *httpfront.Server
	httpLn net.Listener
	// adminHTTP serves /metrics, /health and the dashboard on
	// server.metrics_listen.
	adminHTTP *http.Server
	adminLn   net.Listener
	// cl is the cluster layer, nil when cluster mode is off (cluster.go).
	cl *clusterNode
	// cmsd are the subscriptions to XRootD redirectors (cmsd.go); none
	// when cmsd.manager is not set.
	cmsd []*cms.Node
	// sockets are the listening sockets handed to this process (nil: none).
	sockets *listenfds.Set
	// pel is the membership of a Pelican federation (pelican.go); nil
	// without a [pelican] section.
	pel *pelican.Member

	wg        sync.WaitGroup
	serveErrs chan error
	// closeOnce starts closeAll; closeDone is closed when it has ended,
	// with its result in closeErr.
	closeOnce sync.Once
	closeDone chan struct{}
	closeErr  error
}

// New builds and starts a server: it validates cfg, takes the cache
// directory's lock, rebuilds the cache index and starts listening. Serving
// goroutines run until Shutdown.
func New(cfg *config.Config, log *slog.Logger) (*Server, error) { return NewInherited(cfg, log, nil) }

// Inherit is what a server starts with besides its configuration when it
// takes over from another process: the listening sockets (systemd's
// socket activation, or the hepcache it replaces), so that no connection
// is refused meanwhile.
type Inherit struct {
	// Sockets are matched to server.listen, server.http_listen and
	// server.metrics_listen by name (root, http, metrics) or address; the
	// ones not matched are closed with a warning. Nil: none.
	Sockets *listenfds.Set
	// Ready, if set, is called once the configuration passed every check,
	// before the cache directory's lock is taken: the process serving now
	// then finishes its requests and lets go of the cache.
	Ready func() error
	// LockWait is how long the lock may be held by another process (the
	// one finishing); 0: not at all.
	LockWait time.Duration
}

// NewInherited is New for a server taking over from another process (in:
// nil for none).
func NewInherited(cfg *config.Config, log *slog.Logger, in *Inherit) (s *Server, err error) {
	if in == nil {
		in = &Inherit{}
	}
	if log == nil {
		log = slog.Default()
	}
	// The one validation, as `hepcache check` and a reload run it.
	warns, err := Check(cfg)
	if err != nil {
		return nil, fmt.Errorf("invalid configuration:\n%w", err)
	}
	for _, w := range warns {
		log.Warn(w)
	}
	// Clients cause many log lines (failed requests, denials, bad
	// handshakes): each is cut short and each message rate-bounded, with
	// the count of dropped lines on the next one.
	lb := logbound.New(log.Handler(), logbound.Config{})
	log = slog.New(lb)
	s = &Server{cfg: cfg, log: log, serveErrs: make(chan error, 4), closeDone: make(chan struct{}), sockets: in.Sockets}
	// "return nil, err" sets s to nil: close what was built through a copy.
	built := s
	defer func() {
		if err != nil {
			built.Close()
		}
	}()
	// The descriptor budget, before anything holds many.
	s.fds = newDescriptors(cfg, log)
	// Made (or found) once by descriptor, every directory on the way
	// checked (disk.OpenTrusted): no other user can swap it.
	if d, _, err := disk.OpenTrusted(cfg.Cache.Dir, disk.Self(), -1, true); err != nil {
		return nil, fmt.Errorf("cache.dir %q: %w", cfg.Cache.Dir, err)
	} else {
		d.Close()
	}
	if in.Ready != nil {
		if err := in.Ready(); err != nil {
			return nil, err
		}
	}
	if s.unlock, err = admin.LockWait(cfg.Cache.Dir, in.LockWait); err != nil {
		return nil, err
	}
	if s.sec, err = security.New(security.FromConfig(&cfg.Security, log)); err != nil {
		return nil, err
	}
	ocred, err := security.NewOriginCredentials(&cfg.Security)
	if err != nil {
		return nil, err
	}
	if s.s3creds, err = s3Credentials(cfg, os.Getenv); err != nil {
		return nil, err
	}
	if cfg, err = s.newPelican(cfg, ocred); err != nil {
		return nil, err
	}
	dial, err := federationDialers(cfg, s.pelicanDialers(dialers(cfg, log, ocred, s.s3creds), ocred), log)
	if err != nil {
		return nil, err
	}
	if s.origins, err = upstream.New(upstream.Config{
		Default:      cfg.Origin.Default,
		ForwardAllow: cfg.Origin.ForwardAllow,
		Trusted:      mapOrigins(cfg),
		Dial:         dial,
	}); err != nil {
		return nil, fmt.Errorf("origins: %w", err)
	}
	if s.metrics, err = metrics.New(&metrics.Config{CacheDir: cfg.Cache.Dir, HealthWindow: time.Duration(cfg.Server.HealthWindow), Logger: log,
		OriginLogInterval: time.Duration(cfg.Origin.FailureLogInterval)}); err != nil {
		return nil, err
	}
	if s.dash, err = dashboard.New(&dashboard.Config{Metrics: s.metrics, Logger: log}); err != nil {
		return nil, err
	}
	pol, err := buildPolicy(cfg)
	if err != nil {
		return nil, err
	}
	// Negative caching sits outside the metrics wrapper: the origin
	// request metrics count only requests that reached an origin.
	s.otimeout = origintimeout.New(time.Duration(cfg.Origin.Timeout))
	neg, err := notFoundResolver(cfg, s.metrics.WrapResolver(s.otimeout.Resolver(s.origins)))
	if err != nil {
		return nil, err
	}
	s.metrics.CounterFunc("hepcache_log_suppressed_total", "Log lines not written because their message came faster than its rate bound.", lb.Stats().Suppressed.Load)
	s.metrics.CounterFunc("hepcache_origin_not_found_remembered_total", "Origin 'not found' answers remembered (negative caching).", neg.Stats().Remembered.Load)
	s.metrics.CounterFunc("hepcache_origin_not_found_hits_total", "Stat and open requests answered 'not found' from memory, without the origin.", neg.Stats().Hits.Load)
	ccfg, err := cfg.CacheConfig()
	if err != nil {
		return nil, err
	}
	ccfg.Origins, ccfg.Policy, ccfg.Logger = neg, pol, log
	ccfg.MaxLingering = s.fds.budget.Lingering
	// origin.timeout is enforced around every origin call (otimeout), so
	// that a reload changes it; the cache's own bound is only a backstop.
	ccfg.OriginTimeout = originTimeoutBackstop
	s.cl = newClusterNode(cfg, log)
	if ccfg.Origins, err = s.cl.resolver(ccfg.Origins); err != nil {
		return nil, err
	}
	if cfg.Log.AccessLog != "" {
		if s.alog, err = accesslog.Open(cfg.Log.AccessLog); err != nil {
			return nil, err
		}
		s.metrics.CounterFunc("hepcache_access_log_dropped_total", "Access records dropped because the log writer fell behind.", s.alog.Dropped.Load)
	}
	if s.mon, err = s.newMonitor(cfg); err != nil {
		return nil, err
	}
	ccfg.OnAccess = func(r cache.AccessRecord) {
		if s.alog != nil {
			s.alog.Record(r)
		}
		s.dash.Record(r)
		s.mon.Access(r)
	}
	if s.cache, err = cache.New(ccfg); err != nil {
		return nil, err
	}
	s.metrics.SetCache(cachemetrics.Source(s.cache))
	s.metrics.SetSpace(s.spaceFigures)
	s.metrics.SetDisks(s.diskFigures)
	// The front ends call the loop guard, then the cluster's Router,
	// then the cache.
	be, err := s.cl.backend(s.cache)
	if err != nil {
		return nil, err
	}
	be = federation.NewGuard(be, cfg.NodeName(), cfg.Origin.MaxHops)
	// Prestaging reads through the same chain as the clients.
	s.stage = prestage.New(be, prestage.Config{Workers: cfg.Prestage.Workers, MaxQueued: cfg.Prestage.MaxQueued,
		MaxListBytes: int64(cfg.Prestage.MaxListMemory), Logger: log})
	s.metrics.SetPrestage(s.prestageFigures)
	adminLn := func(ln net.Listener) net.Listener { return s.fds.listener("admin", ln, log) }
	if s.admin, err = admin.Listen(s.cache, s.stage, adminLn); err != nil {
		return nil, err
	}
	s.cl.register(s.metrics)
	// The f-stream sees what clients open, not what prestaging reads.
	fe := s.mon.Wrap(be)
	lim := rootLimits(cfg.Limits)
	httpAuthz, rootAuthz := s.pelicanAuthorizers(s.sec.HTTPAuthorizer(), s.sec.XRootDAuthorizer())
	if s.root, err = xrootd.New(&xrootd.Config{Backend: fe, Metrics: s.metrics, Logger: log, Stager: s.stage,
		Authenticator: s.sec.XRootDAuthenticator(), Authorizer: rootAuthz,
		TLS: s.sec.TLSConfig(), RequireTLS: s.sec.RequireTLS(),
		Limits: s.fds.conns, MaxConnectionsPerClient: lim.MaxConnectionsPerClient, MaxInFlight: lim.MaxInFlight,
		MaxReadVSegments: lim.MaxReadVSegments, MaxReadVSegmentSize: lim.MaxReadVSegmentSize,
		MaxRequestBody:   lim.MaxRequestBody,
		HandshakeTimeout: lim.HandshakeTimeout, IdleTimeout: lim.IdleTimeout,
		// With local redirects, XrdCl must come back here when it cannot
		// open the local file (no mount): it does so only to a manager.
		// A cluster node that redirects is a manager too: XrdCl comes back
		// after failing at the node it was sent to.
		Manager: cfg.Cache.LocalRedirect != "" || s.cl != nil,
	}); err != nil {
		return nil, fmt.Errorf("root:// front end: %w", err)
	}
	if s.rootLn, err = s.listen("root", cfg.Server.Listen); err != nil {
		return nil, fmt.Errorf("server.listen: %w", err)
	}
	if s.allow, err = hostallow.New(cfg.Security.AllowHosts, nil); err != nil {
		return nil, err
	}
	allowed := func(ln net.Listener) net.Listener { return s.allow.Listener(ln, log) }
	rootLn := allowed(s.fds.listener("root", s.rootLn, log))
	s.serve("root", func() error { return s.root.Serve(rootLn) })
	if cfg.Server.HTTPListen != "" {
		hc := &httpfront.Config{Backend: fe, Metrics: s.metrics, Logger: log, Stager: s.stage,
			Authorizer: httpAuthz, TLSConfig: s.sec.TLSConfig(),
			ReadHeaderTimeout: time.Duration(cfg.Limits.HTTPHeaderTimeout), IdleTimeout: time.Duration(cfg.Limits.HTTPIdleTimeout),
			MaxHeaderBytes: int(cfg.Limits.HTTPMaxHeaderBytes), DenyListing: cfg.Security.DenyHTTPListing}
		if cfg.Server.MetricsListen == "" {
			hc.Routes = dashboard.AdminRoutes(s.metrics, s.dash)
		}
		hc.Routes = s.pelicanRoutes(hc.Routes)
		if s.http, err = httpfront.New(hc); err != nil {
			return nil, fmt.Errorf("http front end: %w", err)
		}
		if s.httpLn, err = s.listen("http", cfg.Server.HTTPListen); err != nil {
			return nil, fmt.Errorf("server.http_listen: %w", err)
		}
		s.fds.httpGate = s.fds.conns.Gate(perClientMax(cfg.Limits))
		httpLn := s.fds.httpGate.Listener(allowed(s.fds.listener("http", s.httpLn, log)))
		s.serve("http", func() error { return s.http.Serve(httpLn) })
	}
	if cfg.Server.MetricsListen != "" {
		if s.adminLn, err = s.listen("metrics", cfg.Server.MetricsListen); err != nil {
			return nil, fmt.Errorf("server.metrics_listen: %w", err)
		}
		h := dashboard.AdminHandler(s.metrics, s.dash)
		if cfg.Server.DebugPprof {
			h = withPprof(h)
		}
		s.adminHTTP = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		metricsLn := s.fds.listener("metrics", s.adminLn, log)
		s.serve("metrics", func() error {
			if err := s.adminHTTP.Serve(metricsLn); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
	}
	s.metrics.SetDescriptors(s.descriptorFigures)
	s.metrics.CounterFunc("hepcache_descriptor_shortages_total", "Opens of a cached file's data or sidecar that met the descriptor limit (EMFILE) and ended lingering files early to try again.", s.cache.Stats().FDShortages.Load)
	if err := s.cl.join(s.rootLn, s.httpLn); err != nil {
		return nil, err
	}
	// Subscribe last: the manager sends clients as soon as we answer.
	if s.cmsd, err = s.startCmsd(cfg, be); err != nil {
		return nil, err
	}
	cc := s.cache.Config()
	ramArgs := []any{"ram", units.Format(cc.RAM), "from", cc.RAMFrom, "fetch_memory", units.Format(cc.FetchMemory)}
	if note := cfg.RAMNote(); note != "" {
		ramArgs = append(ramArgs, "note", note)
	}
	log.Info("hepcache ram", ramArgs...)
	if rest := s.sockets.CloseRest(); len(rest) > 0 {
		log.Warn("sockets handed to this process that no listen address of the configuration names were closed", "sockets", rest)
	}
	s.startPelican()
	log.Info("hepcache serving", "root", s.rootLn.Addr().String(), "http", addrOf(s.httpLn), "metrics", addrOf(s.adminLn),
		"cache_dir", cfg.Cache.Dir, "origin", cfg.Origin.Default, "forward_allow", strings.Join(cfg.Origin.ForwardAllow, ","))
	return s, nil
}

// listen returns the socket handed to this process for name or addr, else
// a new one listening on addr.
func (s *Server) listen(name, addr string) (net.Listener, error) {
	if ln := s.sockets.Take(name, addr); ln != nil {
		s.log.Info("listening on a socket handed over", "listener", name, "addr", ln.Addr().String(), "from", s.sockets.From)
		return ln, nil
	}
	return net.Listen("tcp", addr)
}

// HandOver prepares this server's listening sockets (root://, HTTP,
// metrics) for the process that replaces it (hepcache upgrade): they stay
// open in it while this one finishes, so that no connection is refused.
func (s *Server) HandOver() (*listenfds.Handover, error) {
	var names []string
	var lns []net.Listener
	for _, l := range []struct {
		name string
		ln   net.Listener
	}{{"root", s.rootLn}, {"http", s.httpLn}, {"metrics", s.adminLn}} {
		if l.ln != nil {
			names, lns = append(names, l.name), append(lns, l.ln)
		}
	}
	return listenfds.Prepare(names, lns)
}

func addrOf(ln net.Listener) string {
	if ln == nil {
		return ""
	}
	return ln.Addr().String()
}

// HTTPAddr is the http:// listening address, nil if HTTP is off.
func (s *Server) HTTPAddr() net.Addr {
	if s.httpLn == nil {
		return nil
	}
	return s.httpLn.Addr()
}

// MetricsAddr is the address serving /metrics, /health and the dashboard:
// the metrics listener, else the HTTP listener, else nil.
func (s *Server) MetricsAddr() net.Addr {
	if s.adminLn != nil {
		return s.adminLn.Addr()
	}
	return s.HTTPAddr()
}

func (s *Server) serve(name string, fn func() error) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := fn(); err != nil && !errors.Is(err, net.ErrClosed) {
			s.serveErrs <- fmt.Errorf("%s front end: %w", name, err)
		}
	}()
}

// RootAddr is the root:// listening address.
func (s *Server) RootAddr() net.Addr { return s.rootLn.Addr() }

// Cache is the server's cache.
func (s *Server) Cache() *cache.Cache { return s.cache }

// Run serves until ctx ends or a front end fails, then shuts down gracefully
// within the configured timeout.
func (s *Server) Run(ctx context.Context) error {
	var err error
	select {
	case <-ctx.Done():
	case err = <-s.serveErrs:
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Duration(s.cfg.Server.ShutdownTimeout))
	defer cancel()
	return errors.Join(err, s.Shutdown(sctx))
}

// Shutdown stops accepting connections, lets in-flight requests finish until
// ctx ends, then closes the cache so that every sidecar is consistent. It
// returns soon after ctx ends whatever is still waiting (closeWithin).
func (s *Server) Shutdown(ctx context.Context) error {
	var errs []error
	// Leave the redirector, the federation and the cluster first: they
	// stop sending clients here while the reads in progress finish.
	s.leaveCmsd()
	s.leavePelican(ctx)
	if err := s.cl.leave(); err != nil {
		errs = append(errs, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, shut := range []func(context.Context) error{s.rootShutdown, s.httpShutdown} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := shut(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	// A front end closing at the deadline waits for its connections,
	// which may wait for the origin: closeWithin deals with that.
	fronts := make(chan struct{})
	go func() { wg.Wait(); close(fronts) }()
	select {
	case <-fronts:
	case <-ctx.Done():
	}
	err := s.closeWithin(ctx)
	mu.Lock()
	defer mu.Unlock()
	return errors.Join(append(errs, err)...)
}

func (s *Server) rootShutdown(ctx context.Context) error {
	if s.root == nil {
		return nil
	}
	return s.root.Shutdown(ctx)
}

func (s *Server) httpShutdown(ctx context.Context) error {
	if s.http == nil {
		return nil
	}
	return s.http.Shutdown(ctx)
}

// Close stops everything at once (Shutdown without the grace period for
// the front ends); the cache still gets server.shutdown_timeout for its
// final syncs (closeWithin).
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(s.cfg.Server.ShutdownTimeout))
	defer cancel()
	return s.closeWithin(ctx)
}

// finalSyncGrace is how long closing may go on after the shutdown deadline
// once the origins are cut: enough for the cache's last sidecar syncs.
const finalSyncGrace = time.Second

// closeWithin closes everything (closeAll, once, however many callers) and
// returns when that is done or soon after ctx ends. At the deadline the
// origins are closed, which ends every call still waiting for one (a read
// from an origin that stopped answering, the close of its file: each would
// otherwise last origin.timeout); closing then gets finalSyncGrace to
// finish. Past that it is abandoned with an error and the process may exit:
// blocks are marked present only once durable, so nothing is lost but
// blocks to fetch again.
func (s *Server) closeWithin(ctx context.Context) error {
	s.closeOnce.Do(func() {
		go func() {
			s.closeErr = s.closeAll()
			close(s.closeDone)
		}()
	})
	select {
	case <-s.closeDone:
		return s.closeErr
	case <-ctx.Done():
	}
	if s.origins != nil {
		s.log.Warn("shutdown: server.shutdown_timeout reached with work in progress; closing the origin connections")
		s.origins.Close()
	}
	t := time.NewTimer(finalSyncGrace)
	defer t.Stop()
	select {
	case <-s.closeDone:
		return s.closeErr
	case <-t.C:
		s.log.Error("shutdown: still closing after server.shutdown_timeout; exiting without waiting (blocks not yet durable will be fetched again)",
			"shutdown_timeout", time.Duration(s.cfg.Server.ShutdownTimeout).String())
		for _, g := range goroutineGroups(32) {
			s.log.Error("shutdown: still waiting", "goroutines", g.n, "stack", g.stack)
		}
		return fmt.Errorf("shutdown: not finished within server.shutdown_timeout (%v) plus %v", time.Duration(s.cfg.Server.ShutdownTimeout), finalSyncGrace)
	}
}

// goroutineGroup is n goroutines with one stack, innermost call first.
type goroutineGroup struct {
	n     int
	stack string
}

// goroutineGroups returns the process's goroutines grouped by stack, the
// largest groups first, at most max, each stack without the runtime's
// frames ("fn file:line <- caller file:line ..."): what a shutdown that does
// not finish was waiting for, for the log (no one is left to ask
// /debug/pprof), a line per group.
func goroutineGroups(max int) []goroutineGroup {
	var b strings.Builder
	pprof.Lookup("goroutine").WriteTo(&b, 1)
	var out []goroutineGroup
	_, groups, _ := strings.Cut(b.String(), "\n") // after "goroutine profile: total N"
	for _, block := range strings.Split(groups, "\n\n") {
		lines := strings.Split(strings.TrimSpace(block), "\n")
		var g goroutineGroup
		if _, err := fmt.Sscanf(lines[0], "%d @", &g.n); err != nil {
			continue
		}
		var frames []string
		for _, l := range lines[1:] {
			f := strings.Fields(l) // "#", pc, fn+off, file:line
			if len(f) < 4 || strings.HasPrefix(f[2], "runtime.") {
				continue
			}
			fn, _, _ := strings.Cut(f[2], "+0x")
			frames = append(frames, fn+" "+filepath.Base(f[3]))
		}
		g.stack = strings.Join(frames, " <- ")
		out = append(out, g)
	}
	slices.SortStableFunc(out, func(a, b goroutineGroup) int { return b.n - a.n })
	return out[:min(len(out), max)]
}

// closeAll closes every part in order; see closeWithin.
func (s *Server) closeAll() error {
	var errs []error
	s.leaveCmsd()
	if s.root != nil {
		s.root.Close()
	} else if s.rootLn != nil {
		s.rootLn.Close()
	}
	if s.http != nil {
		done, cancel := context.WithCancel(context.Background())
		cancel()
		s.http.Shutdown(done) // with an ended context: close at once
	} else if s.httpLn != nil {
		s.httpLn.Close()
	}
	if s.adminHTTP != nil {
		s.adminHTTP.Close()
	}
	s.wg.Wait()
	if s.pel != nil {
		s.pel.Close()
	}
	s.cl.close()
	if s.dash != nil {
		s.dash.Close()
	}
	if s.admin != nil {
		s.admin.Close()
	}
	if s.stage != nil {
		s.stage.Close() // before the cache its reads go to
	}
	if s.cache != nil {
		errs = append(errs, s.cache.Close())
	}
	if s.origins != nil {
		errs = append(errs, s.origins.Close())
	}
	if s.alog != nil {
		errs = append(errs, s.alog.Close())
	}
	s.mon.Close() // after the cache: its last closes are on the g-stream
	if s.sec != nil {
		s.sec.Close()
	}
	if s.unlock != nil {
		s.unlock()
	}
	s.log.Info("hepcache stopped")
	return errors.Join(errs...)
}

// originTimeoutBackstop is the cache's own bound on an origin call; the
// bound in force is origin.timeout, applied by otimeout.
const originTimeoutBackstop = 24 * time.Hour

// dialers creates origins per URL scheme. Origins get the cache's own
// credential (cred), never a client's: the token only over TLS (https://,
// ztn on roots://), the client certificate and CAs on every TLS origin.
// notFoundResolver maps origin.not_found_ttl[_by_origin] onto negative
// caching, where the config's "0s" means off.
func notFoundResolver(cfg *config.Config, next origin.Resolver) (*notfound.Resolver, error) {
	ttl := func(d config.Duration) time.Duration {
		if d == 0 {
			return -1
		}
		return time.Duration(d)
	}
	nc := &notfound.Config{TTL: ttl(cfg.Origin.NotFoundTTL), PerOrigin: map[string]time.Duration{}}
	for raw, d := range cfg.Origin.NotFoundTTLByOrigin {
		c, err := upstream.Canonical(raw)
		if err != nil {
			return nil, fmt.Errorf("origin.not_found_ttl_by_origin %q: %w", raw, err)
		}
		nc.PerOrigin[c] = ttl(d)
	}
	return notfound.New(nc, next)
}

func dialers(cfg *config.Config, log *slog.Logger, cred *security.OriginCredentials, s3creds s3origin.Credentials) map[string]upstream.DialFunc {
	root := func(ctx context.Context, canonical string) (origin.Origin, error) {
		return xrdorigin.New(&xrdorigin.Config{
			URL:          canonical,
			ConnsPerHost: cfg.Origin.Connections,
			Timeout:      time.Duration(cfg.Origin.Timeout),
			TLS:          cred.TLS,
			Token:        cred.Token,
			GSI:          cred.GSI,
		})
	}
	d := map[string]upstream.DialFunc{
		"file": func(ctx context.Context, canonical string) (origin.Origin, error) {
			return posix.New(strings.TrimPrefix(canonical, "file://"))
		},
		"http":  httporigin.Dial(httporigin.Config{Logger: log}),
		"https": httporigin.Dial(httporigin.Config{Logger: log, TLSConfig: cred.TLS, Authorize: cred.Authorize}),
		"root":  root,
		"roots": root,
	}
	if s3creds != nil {
		region := cfg.Origin.S3Region
		if region == "" {
			region = os.Getenv("AWS_REGION")
		}
		d["s3"] = s3origin.Dial(s3origin.Config{Endpoint: cfg.Origin.S3Endpoint, Region: region,
			Addressing: cfg.Origin.S3Addressing, Credentials: s3creds, MaxConns: cfg.Origin.S3Connections,
			TLSConfig: cred.TLS, Logger: log})
	}
	return d
}

// s3Credentials finds the credentials of the s3:// origins (nil when the
// configuration names none), so that missing ones fail at start-up, not at
// the first client's read.
func s3Credentials(cfg *config.Config, getenv func(string) string) (s3origin.Credentials, error) {
	if len(cfg.S3Origins()) == 0 {
		return nil, nil
	}
	c, err := s3origin.ResolveCredentials(s3origin.CredentialsConfig{
		AccessKeyFile: cfg.Origin.S3AccessKeyFile, SecretKeyFile: cfg.Origin.S3SecretKeyFile,
		Profile: cfg.Origin.S3Profile, Anonymous: cfg.Origin.S3Anonymous}, getenv)
	if err != nil {
		return nil, fmt.Errorf("origin %s: %w (origin.s3_access_key_file, AWS_ACCESS_KEY_ID, ~/.aws/credentials or origin.s3_anonymous)", cfg.S3Origins()[0], err)
	}
	return c, nil
}

// mapOrigins lists the origins the [[map]] and [[namespace]] rules name:
// trusted like the default origin.
func mapOrigins(cfg *config.Config) []string {
	var out []string
	for _, m := range cfg.Map {
		if m.Origin != "" {
			out = append(out, m.Origin)
		}
	}
	for _, n := range cfg.Namespace {
		if n.Origin != "" {
			out = append(out, n.Origin)
		}
	}
	return out
}

func buildPolicy(cfg *config.Config) (*policy.Policy, error) {
	var rules []policy.Rule
	for _, r := range cfg.Namespace {
		a, err := policy.ParseAction(r.Action)
		if err != nil {
			return nil, err
		}
		rules = append(rules, policy.Rule{Prefix: r.Prefix, Pattern: r.Pattern, Action: a, Mutable: r.Mutable})
	}
	var maps []policy.MapRule
	// A [[namespace]] rule's origin is a map rule replacing its prefix,
	// tried before the [[map]] rules as the namespace rules are first.
	for _, r := range cfg.Namespace {
		if r.Origin == "" {
			continue
		}
		pre := strings.TrimSuffix(r.Prefix, "/")
		maps = append(maps, policy.MapRule{Match: "^" + regexp.QuoteMeta(pre) + "(/.*)?$", Replace: "/$1", Origin: r.Origin})
	}
	for _, m := range cfg.Map {
		maps = append(maps, policy.MapRule{Match: m.Match, Replace: m.Replace, Origin: m.Origin})
	}
	if len(rules) == 0 && len(maps) == 0 {
		return nil, nil
	}
	return policy.New(rules, maps)
}

// prestageFigures reports the prestager and its ten newest jobs.
func (s *Server) prestageFigures() metrics.PrestageFigures {
	st := s.stage.Stats()
	f := metrics.PrestageFigures{Queued: st.Queued.Load(), Running: st.Running.Load(), Done: st.Done.Load(),
		Failed: st.Failed.Load(), Bytes: st.Bytes.Load()}
	for _, j := range s.stage.Jobs(10) {
		c := j.Counts
		f.Jobs = append(f.Jobs, metrics.PrestageJob{ID: j.ID, Submitted: j.Submitted.UTC().Format(time.RFC3339), Files: j.Total,
			Done: c[backend.StageDone], Failed: c[backend.StageFailed], Cancelled: c[backend.StageCancelled],
			Bytes: j.Bytes, Size: j.Size})
	}
	return f
}
