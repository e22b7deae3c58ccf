package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/cms"
	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/origin"
)

// startCmsd subscribes to the [cmsd] manager (nil when none is set). The
// manager's "have you got it?" is a stat through the clients' chain: true
// for what the cache holds and for what its origin can serve, since a
// cache node serves both.
func (s *Server) startCmsd(cfg *config.Config, be backend.Backend) (*cms.Node, error) {
	cc := &cfg.Cmsd
	if cc.Manager == "" {
		return nil, nil
	}
	_, port, err := net.SplitHostPort(s.rootLn.Addr().String())
	if err != nil {
		return nil, err
	}
	dataPort, _ := strconv.Atoi(port)
	site := cc.Site
	if site == "" {
		site = cfg.Monitor.Site
	}
	n, err := cms.Start(cms.Config{
		Manager: cc.Manager, DataPort: dataPort, Host: cc.Host, Paths: cc.Paths, Site: site,
		QueryTimeout: time.Duration(cc.QueryTimeout), Logger: s.log,
		Have: func(ctx context.Context, path string) (bool, error) {
			_, err := be.Stat(ctx, backend.Request{Path: path, User: "cmsd", Protocol: "root"})
			switch {
			case err == nil:
				return true, nil
			case errors.Is(err, origin.ErrNotFound):
				return false, nil
			default:
				s.log.Debug("cmsd state query: stat failed", "path", path, "err", err)
				return false, err
			}
		},
		// The node's load is how full its fetch memory is: a node whose
		// window to the origins is full serves new misses slowest.
		Load: func() int {
			if lim := s.cache.Config().FetchMemory; lim > 0 {
				return int(s.cache.FetchInFlight() * 100 / lim)
			}
			return 0
		},
		Space: func() (free, total uint64, util int) {
			u, err := s.cache.Usage()
			if err != nil || u.Total <= 0 {
				return 0, 0, 100
			}
			used := min(max(u.Used, 0), u.Total)
			return uint64(u.Total - used), uint64(u.Total), int(used * 100 / u.Total)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("cmsd: %w", err)
	}
	st := func(f func(cms.Stats) int64) func() int64 { return func() int64 { return f(n.Stats()) } }
	s.metrics.GaugeFunc("hepcache_cmsd_connected", "1 while logged in to the cmsd manager (cmsd.manager).", st(func(x cms.Stats) int64 {
		if x.Connected {
			return 1
		}
		return 0
	}))
	s.metrics.CounterFunc("hepcache_cmsd_logins_total", "Logins to the cmsd manager.", st(func(x cms.Stats) int64 { return x.Logins }))
	s.metrics.CounterFunc("hepcache_cmsd_queries_total", "State queries (\"do you have this file?\") from the cmsd manager.", st(func(x cms.Stats) int64 { return x.Queries }))
	s.metrics.CounterFunc("hepcache_cmsd_haves_total", "State queries answered \"have\".", st(func(x cms.Stats) int64 { return x.Haves }))
	return n, nil
}

// leaveCmsd tells the manager this node is gone (idempotent).
func (s *Server) leaveCmsd() {
	if s.cmsd != nil {
		s.cmsd.Close()
	}
}
