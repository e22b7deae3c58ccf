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
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hepcache/hepcache/internal/accesslog"
	"github.com/hepcache/hepcache/internal/admin"
	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/frontend/xrootd"
	"github.com/hepcache/hepcache/internal/policy"
	"github.com/hepcache/hepcache/internal/upstream"
	"github.com/hepcache/hepcache/origin"
	"github.com/hepcache/hepcache/origin/posix"
	xrdorigin "github.com/hepcache/hepcache/origin/xrootd"
)

// Server is a running hepcache.
type Server struct {
	cfg    *config.Config
	log    *slog.Logger
	unlock func()

	origins *upstream.Set
	cache   *cache.Cache
	alog    *accesslog.Log
	admin   *admin.Server

	root   *xrootd.Server
	rootLn net.Listener

	wg        sync.WaitGroup
	serveErrs chan error
	closeOnce sync.Once
}

// New builds and starts a server: it validates cfg, takes the cache
// directory's lock, rebuilds the cache index and starts listening. Serving
// goroutines run until Shutdown.
func New(cfg *config.Config, log *slog.Logger) (s *Server, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid configuration:\n%w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	s = &Server{cfg: cfg, log: log, serveErrs: make(chan error, 4)}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if err := os.MkdirAll(cfg.Cache.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("cache.dir %q: %w", cfg.Cache.Dir, err)
	}
	if s.unlock, err = admin.Lock(cfg.Cache.Dir); err != nil {
		return nil, err
	}
	if s.origins, err = upstream.New(upstream.Config{
		Default:      cfg.Origin.Default,
		ForwardAllow: cfg.Origin.ForwardAllow,
		Trusted:      mapOrigins(cfg.Map),
		Dial:         dialers(cfg, log),
	}); err != nil {
		return nil, fmt.Errorf("origins: %w", err)
	}
	pol, err := buildPolicy(cfg)
	if err != nil {
		return nil, err
	}
	low, high, _ := cfg.Space.ParseWatermarks()
	ccfg := &cache.Config{
		Dir:                cfg.Cache.Dir,
		Origins:            s.origins,
		BlockSize:          int64(cfg.Cache.BlockSize),
		PieceSize:          int64(cfg.Cache.PieceSize),
		Prefetch:           cfg.Cache.Prefetch,
		FetchMemory:        int64(cfg.Cache.FetchMemory),
		SyncInterval:       time.Duration(cfg.Cache.SyncInterval),
		CompleteAfterClose: cfg.Cache.CompleteAfterClose,
		OriginTimeout:      time.Duration(cfg.Origin.Timeout),
		Capacity:           int64(cfg.Space.Capacity),
		LowWatermark:       low,
		HighWatermark:      high,
		PurgeInterval:      time.Duration(cfg.Space.PurgeInterval),
		MaxAge:             time.Duration(cfg.Space.MaxAge),
		MaxFiles:           cfg.Space.MaxFiles,
		VerifyChecksum:     cfg.Space.VerifyChecksum,
		Policy:             pol,
		Logger:             log,
	}
	if cfg.Cache.Prefetch == 0 {
		ccfg.Prefetch = -1 // config 0 means off; cache 0 means default
	}
	if cfg.Log.AccessLog != "" {
		if s.alog, err = accesslog.Open(cfg.Log.AccessLog); err != nil {
			return nil, err
		}
		ccfg.OnAccess = s.alog.Record
	}
	if s.cache, err = cache.New(ccfg); err != nil {
		return nil, err
	}
	if s.admin, err = admin.Listen(s.cache); err != nil {
		return nil, err
	}
	if s.root, err = xrootd.New(&xrootd.Config{Backend: s.cache, Logger: log}); err != nil {
		return nil, fmt.Errorf("root:// front end: %w", err)
	}
	if s.rootLn, err = net.Listen("tcp", cfg.Server.Listen); err != nil {
		return nil, fmt.Errorf("server.listen: %w", err)
	}
	s.serve("root", func() error { return s.root.Serve(s.rootLn) })
	log.Info("hepcache serving", "root", s.rootLn.Addr().String(), "cache_dir", cfg.Cache.Dir,
		"origin", cfg.Origin.Default, "forward_allow", strings.Join(cfg.Origin.ForwardAllow, ","))
	return s, nil
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
// ctx ends, then closes the cache so that every sidecar is consistent.
func (s *Server) Shutdown(ctx context.Context) error {
	var errs []error
	if s.root != nil {
		if err := s.root.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			errs = append(errs, err)
		}
	}
	errs = append(errs, s.Close())
	return errors.Join(errs...)
}

// Close stops everything at once (Shutdown without the grace period).
func (s *Server) Close() error {
	var errs []error
	s.closeOnce.Do(func() {
		if s.root != nil {
			s.root.Close()
		} else if s.rootLn != nil {
			s.rootLn.Close()
		}
		s.wg.Wait()
		if s.admin != nil {
			s.admin.Close()
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
		if s.unlock != nil {
			s.unlock()
		}
		s.log.Info("hepcache stopped")
	})
	return errors.Join(errs...)
}

// dialers creates origins per URL scheme.
func dialers(cfg *config.Config, log *slog.Logger) map[string]upstream.DialFunc {
	return map[string]upstream.DialFunc{
		"file": func(ctx context.Context, canonical string) (origin.Origin, error) {
			return posix.New(strings.TrimPrefix(canonical, "file://"))
		},
		"root": func(ctx context.Context, canonical string) (origin.Origin, error) {
			return xrdorigin.New(&xrdorigin.Config{
				URL:         canonical,
				Connections: cfg.Origin.Connections,
				Timeout:     time.Duration(cfg.Origin.Timeout),
				Logger:      log,
			})
		},
	}
}

func mapOrigins(maps []config.MapRule) []string {
	var out []string
	for _, m := range maps {
		if m.Origin != "" {
			out = append(out, m.Origin)
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
	for _, m := range cfg.Map {
		maps = append(maps, policy.MapRule{Match: m.Match, Replace: m.Replace, Origin: m.Origin})
	}
	if len(rules) == 0 && len(maps) == 0 {
		return nil, nil
	}
	return policy.New(rules, maps)
}
