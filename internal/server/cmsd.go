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

// startCmsd subscribes to every [cmsd] manager (none when none is set), as
// an xrootd data server with "all.manager all" does with redundant
// redirectors. A manager's "have you got it?" is a stat through the
// clients' chain: true for what the cache holds and for what its origin
// can serve, since a cache node serves both.
func (s *Server) startCmsd(cfg *config.Config, be backend.Backend) ([]*cms.Node, error) {
	cc := &cfg.Cmsd
	managers := cc.Managers()
	if len(managers) == 0 {
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
	have := func(ctx context.Context, path string) (bool, error) {
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
	}
	// The node's load is how full its fetch memory is: a node whose
	// window to the origins is full serves new misses slowest.
	load := func() int {
		if lim := s.cache.Config().FetchMemory; lim > 0 {
			return int(s.cache.FetchInFlight() * 100 / lim)
		}
		return 0
	}
	space := func() (free, total uint64, util int) {
		u, err := s.cache.Usage()
		if err != nil || u.Total <= 0 {
			return 0, 0, 100
		}
		used := min(max(u.Used, 0), u.Total)
		return uint64(u.Total - used), uint64(u.Total), int(used * 100 / u.Total)
	}
	var nodes []*cms.Node
	for _, m := range managers {
		n, err := cms.Start(cms.Config{
			Manager: m, DataPort: dataPort, Host: cc.Host, Paths: cc.Paths, Site: site,
			QueryTimeout: time.Duration(cc.QueryTimeout), Logger: s.log,
			Have: have, Load: load, Space: space,
		})
		if err != nil {
			for _, n := range nodes {
				n.Close()
			}
			return nil, fmt.Errorf("cmsd: %w", err)
		}
		nodes = append(nodes, n)
	}
	sum := func(f func(cms.Stats) int64) func() int64 {
		return func() int64 {
			var t int64
			for _, n := range nodes {
				t += f(n.Stats())
			}
			return t
		}
	}
	s.metrics.GaugeFunc("hepcache_cmsd_connected", "cmsd managers (cmsd.manager) this node is logged in to now.", sum(func(x cms.Stats) int64 {
		if x.Connected {
			return 1
		}
		return 0
	}))
	s.metrics.CounterFunc("hepcache_cmsd_logins_total", "Logins to cmsd managers.", sum(func(x cms.Stats) int64 { return x.Logins }))
	s.metrics.CounterFunc("hepcache_cmsd_queries_total", "State queries (\"do you have this file?\") from cmsd managers.", sum(func(x cms.Stats) int64 { return x.Queries }))
	s.metrics.CounterFunc("hepcache_cmsd_haves_total", "State queries answered \"have\".", sum(func(x cms.Stats) int64 { return x.Haves }))
	return nodes, nil
}

// leaveCmsd tells every manager this node is gone (idempotent).
func (s *Server) leaveCmsd() {
	for _, n := range s.cmsd {
		n.Close()
	}
}
