package config

import (
	"flag"
	"fmt"
	"net"
)

// MonitorConfig is the [monitor] section: XRootD monitoring streams sent
// over UDP to the site's collectors (docs/monitoring.md).
type MonitorConfig struct {
	// Destination is a collector ("host:port") receiving every stream that
	// has no destination of its own; flag --monitor. Default "" (off).
	Destination string `toml:"destination"`
	// Summary, FStream and GStream are per-stream destinations: the summary
	// report (xrd.report XML), the f-stream (file open/transfer/close with
	// user mapping) and the cache g-stream (XrdPfc file_close JSON).
	Summary string `toml:"summary"`
	FStream string `toml:"fstream"`
	GStream string `toml:"gstream"`
	// SummaryInterval is the time between summary reports. Default 60s.
	SummaryInterval Duration `toml:"summary_interval"`
	// FStreamFlush is the longest an f-stream record waits. Default 60s.
	FStreamFlush Duration `toml:"fstream_flush"`
	// XfrInterval is the time between transfer records of open files;
	// "0s" (default) sends none.
	XfrInterval Duration `toml:"xfr_interval"`
	// GStreamFlush is the longest a g-stream record waits. Default 60s.
	GStreamFlush Duration `toml:"gstream_flush"`
	// GStreamHeader is "binary" (XrdXrootdMonGS, as collectors receive the
	// pfc stream; default) or "json" (mongstream ... send json dflthdr).
	GStreamHeader string `toml:"gstream_header"`
	// IdentInterval is the time between server identification records.
	// Default 1h.
	IdentInterval Duration `toml:"ident_interval"`
	// Site is the site name the reports carry (all.sitename). Default "".
	Site string `toml:"site"`
	// Instance is the instance name the summary (ins) and the server
	// identification carry, as xrootd's -n names it (from-xcache
	// --instance). Default "": cluster.name, else "anon" (xrootd's).
	Instance string `toml:"instance"`
	// Host is the server name the reports carry. Default: the host name.
	Host string `toml:"host"`
}

func defaultMonitor() MonitorConfig {
	return MonitorConfig{SummaryInterval: Duration(60e9), FStreamFlush: Duration(60e9), GStreamFlush: Duration(60e9),
		GStreamHeader: "binary", IdentInterval: Duration(3600e9)}
}

// Dest returns a stream's destination: its own, else Destination.
func (m *MonitorConfig) Dest(stream string) string {
	if stream != "" {
		return stream
	}
	return m.Destination
}

func (m *MonitorConfig) flags(fs *flag.FlagSet) {
	fs.StringVar(&m.Destination, "monitor", m.Destination, "send all XRootD monitoring streams (summary, f-stream, g-stream) to this UDP collector HOST:PORT (monitor.destination)")
}

func (m *MonitorConfig) validate(bad func(key string, val any, allowed string)) {
	for key, v := range map[string]string{"monitor.destination": m.Destination, "monitor.summary": m.Summary,
		"monitor.fstream": m.FStream, "monitor.gstream": m.GStream} {
		if v == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(v); err != nil {
			bad(key, fmt.Sprintf("%q", v), "a UDP collector host:port")
		}
	}
	for key, d := range map[string]Duration{"monitor.summary_interval": m.SummaryInterval, "monitor.fstream_flush": m.FStreamFlush,
		"monitor.gstream_flush": m.GStreamFlush, "monitor.ident_interval": m.IdentInterval} {
		if d <= 0 {
			bad(key, d, "a positive duration")
		}
	}
	if m.XfrInterval < 0 {
		bad("monitor.xfr_interval", m.XfrInterval, "0s (off) or a positive duration")
	}
	switch m.GStreamHeader {
	case "binary", "json":
	default:
		bad("monitor.gstream_header", fmt.Sprintf("%q", m.GStreamHeader), "binary or json")
	}
}
