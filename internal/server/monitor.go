package server

import (
	"cmp"
	"net"
	"strconv"
	"time"

	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/metrics"
	"github.com/hepcache/hepcache/internal/monitor"
)

// newMonitor starts the XRootD monitoring streams of [monitor] (nil when
// none has a destination). The figures are read from the metrics registry
// at each summary report.
func (s *Server) newMonitor(cfg *config.Config) (*monitor.Monitor, error) {
	mc := &cfg.Monitor
	m := monitor.Config{
		Summary: mc.Dest(mc.Summary), FStream: mc.Dest(mc.FStream), GStream: mc.Dest(mc.GStream),
		SummaryInterval: time.Duration(mc.SummaryInterval), FStreamFlush: time.Duration(mc.FStreamFlush),
		XfrInterval: time.Duration(mc.XfrInterval), GStreamFlush: time.Duration(mc.GStreamFlush),
		GStreamJSONHeader: mc.GStreamHeader == "json", IdentInterval: time.Duration(mc.IdentInterval),
		Host: mc.Host, Site: mc.Site, Name: cmp.Or(mc.Instance, cfg.Cluster.Name), Stats: s.monitorFigures, Logger: s.log,
	}
	if !m.Enabled() {
		return nil, nil
	}
	if _, port, err := net.SplitHostPort(cfg.Server.Listen); err == nil {
		m.Port, _ = strconv.Atoi(port)
	}
	mon, err := monitor.New(m)
	if err != nil {
		return nil, err
	}
	s.metrics.Clients().SetOnRemove(mon.Disconnected)
	return mon, nil
}

// monitorFigures is also called by the monitor's last report at Close,
// which may follow a start that failed before the cache was built: then
// the cache's figures are zero.
func (s *Server) monitorFigures() monitor.Figures {
	snap := s.metrics.Snapshot()
	f := monitor.Figures{
		Connections: snap.Clients, ConnectionsTotal: s.metrics.Clients().Total(), BytesOut: snap.BytesServed(),
		Hits: snap.Hits, PartialHits: snap.PartialHits, Misses: snap.Misses, OpenErrors: snap.OpenErrors,
		BytesHit: snap.BytesHit, BytesMissed: snap.BytesMissed, BytesBypassed: snap.BytesBypassed,
		BytesFetched: snap.BytesFetched, PrefetchBytes: snap.PrefetchBytes, OpenFiles: snap.OpenFiles,
		Evictions: snap.Evictions, EvictedBytes: snap.Evicted, Files: snap.Files, BytesCached: snap.Cached,
		SpaceTotal: snap.Total, SpaceUsed: snap.Used,
	}
	if s.cache != nil {
		f.MemoryLimit = s.cache.Config().FetchMemory
	}
	f.Ops = rootOps(s.metrics.Requests())
	return f
}

// rootOps sums the root:// and roots:// requests into the xrootd section's
// operation counts.
func rootOps(reqs []metrics.RequestCount) monitor.Ops {
	var o monitor.Ops
	for _, r := range reqs {
		if r.Protocol != "root" && r.Protocol != "roots" {
			continue
		}
		switch r.Operation {
		case "open":
			o.Open += r.N
		case "read", "pgread":
			o.Read += r.N
		case "readv":
			o.ReadV += r.N
		case "sync":
			o.Sync += r.N
		case "login":
			o.Logins += r.N
		case "auth":
			if r.Outcome == "ok" {
				o.AuthOK += r.N
			} else {
				o.AuthFailed += r.N
			}
		default:
			o.Misc += r.N
		}
		switch r.Outcome {
		case "ok":
		case "redirect":
			o.Redirects += r.N
		case "busy":
			o.Delays += r.N
		default:
			o.Errors += r.N
		}
	}
	o.Unauthenticated = max(o.Logins-o.AuthOK-o.AuthFailed, 0)
	return o
}
