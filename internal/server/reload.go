package server

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/frontend/xrootd"
	"github.com/hepcache/hepcache/internal/metrics"
	"github.com/hepcache/hepcache/internal/security"
	s3origin "github.com/hepcache/hepcache/origin/s3"
)

// Reload applies what may change while serving (SIGHUP, hepcache reload):
// it reopens the access log (logrotate moved it), re-reads the TLS
// certificate and key, the CA certificates, the vomsdir and the S3 key
// files, and, given the configuration as it now reads (nil: only those
// files), replaces the whole [space] section but dir_stats_depth and
// dir_stats_max (capacity, watermarks, max_age, max_files, pin,
// pin_share, verify_checksum, purge_interval), the [[quota]] tables, the
// root:// [limits], origin.timeout and origin.failure_log_interval, the
// authorization rules, token issuers and audiences, grid map, CRL settings,
// voms_required and allow_hosts (new connections and requests see them;
// open files keep what they were granted).
// Keys that changed but need a restart are named, each by its full key,
// in a warning. What fails to apply is reported and the rest still
// applies; a part that fails keeps its previous value. log.level and
// log.file are the caller's (serve): it owns the logger. Data disks out of
// service are probed and taken back if they are there again.
func (s *Server) Reload(next *config.Config) error {
	var errs []error
	if s.alog != nil {
		if err := s.alog.Reopen(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := s.sec.Reload(); err != nil {
		errs = append(errs, err)
	}
	if r, ok := s.s3creds.(s3origin.Reloader); ok {
		if err := r.Reload(); err != nil {
			errs = append(errs, err)
		}
	}
	// A data disk out of service is tried again: the admin may have
	// mounted or repaired it (the periodic check takes back only those
	// that were not mounted).
	s.cache.RetryDisks()
	if next == nil {
		return errors.Join(errs...)
	}
	// The same checks as at start-up: a file the next start would refuse
	// is refused now, not reported reloaded.
	warns, err := Check(next)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("configuration refused (as it would be at start-up), nothing of it applied:\n%w", err))...)
	}
	for _, w := range warns {
		s.log.Warn("reload: " + w)
	}
	sp, err := spaceOf(next)
	if err == nil {
		err = s.cache.SetSpace(sp)
	}
	if err != nil {
		errs = append(errs, err)
	}
	if err := s.root.SetLimits(rootLimits(next.Limits)); err != nil {
		errs = append(errs, err)
	}
	s.fds.setLimits(next.Limits)
	if err := s.sec.Apply(security.FromConfig(&next.Security, s.log)); err != nil {
		errs = append(errs, err)
	} else {
		s.cfg.Security.Rules, s.cfg.Security.Issuers, s.cfg.Security.Audiences = next.Security.Rules, next.Security.Issuers, next.Security.Audiences
		s.cfg.Security.GridMap, s.cfg.Security.GridMapRequired, s.cfg.Security.VOMSRequired = next.Security.GridMap, next.Security.GridMapRequired, next.Security.VOMSRequired
		s.cfg.Security.CRL, s.cfg.Security.CRLDirs, s.cfg.Security.CRLRefresh, s.cfg.Security.Authorize = next.Security.CRL, next.Security.CRLDirs, next.Security.CRLRefresh, next.Security.Authorize
	}
	if err := s.allow.Set(next.Security.AllowHosts); err != nil {
		errs = append(errs, err)
	} else {
		s.cfg.Security.AllowHosts = next.Security.AllowHosts
	}
	s.otimeout.Set(time.Duration(next.Origin.Timeout))
	s.metrics.SetOriginLogInterval(time.Duration(next.Origin.FailureLogInterval))
	if keys := restartOnly(s.cfg, next); len(keys) > 0 {
		verb := "needs"
		if len(keys) > 1 {
			verb = "need"
		}
		s.log.Warn("reload: "+strings.Join(keys, ", ")+" "+verb+" a restart; the rest was applied", "keys", keys)
	}
	if len(errs) == 0 {
		// What was applied is now the running configuration.
		s.cfg.Space, s.cfg.Quota, s.cfg.Limits = next.Space, next.Quota, next.Limits
		s.cfg.Origin.Timeout, s.cfg.Origin.FailureLogInterval = next.Origin.Timeout, next.Origin.FailureLogInterval
		s.cfg.Log.Level = next.Log.Level
	}
	return errors.Join(errs...)
}

// SetReload makes fn what a reload request on the admin socket runs
// (`hepcache reload`): serve gives it its SIGHUP reload.
func (s *Server) SetReload(fn func() error) { s.admin.SetReload(fn) }

// SetUpgrade makes fn what an upgrade request on the admin socket runs
// (`hepcache upgrade`): serve gives it its SIGUSR2 hand-over.
func (s *Server) SetUpgrade(fn func() (string, error)) { s.admin.SetUpgrade(fn) }

// spaceOf maps [space] and [[quota]] onto the cache's run-time settings.
func spaceOf(cfg *config.Config) (cache.Space, error) { return cfg.SpaceRules() }

// rootLimits maps [limits] onto the root:// front end's; its bound on all
// connections is the server's (descriptors.go), shared with HTTP.
func rootLimits(l config.LimitsConfig) xrootd.Limits {
	return xrootd.Limits{MaxConnectionsPerClient: l.MaxConnectionsPerClient, MaxInFlight: l.MaxRequestsPerConnection,
		MaxRequestBody: int(l.MaxRequestBody), MaxReadVSegments: l.MaxReadVSegments,
		MaxReadVSegmentSize: int(l.MaxReadVSegmentSize),
		HandshakeTimeout:    time.Duration(l.HandshakeTimeout), IdleTimeout: time.Duration(l.IdleTimeout)}
}

// restartOnly names, by full key ("cache.ram", "security.issuer"), what
// differs between cur and next among the settings Reload does not apply.
func restartOnly(cur, next *config.Config) []string {
	a, b := *cur, *next
	// Blank what Reload (and serve, for log.level) applies.
	for _, c := range []*config.Config{&a, &b} {
		keep := c.Space
		c.Space = config.SpaceConfig{DirStatsDepth: keep.DirStatsDepth, DirStatsMax: keep.DirStatsMax}
		c.Quota = nil
		c.Limits.MaxConnections, c.Limits.MaxRequestsPerConnection, c.Limits.MaxRequestBody = 0, 0, 0
		c.Limits.MaxConnectionsPerClient, c.Limits.IPv6ClientPrefix = 0, 0
		c.Limits.MaxReadVSegments, c.Limits.MaxReadVSegmentSize = 0, 0
		c.Limits.HandshakeTimeout, c.Limits.IdleTimeout = 0, 0
		c.Origin.Timeout, c.Origin.FailureLogInterval = 0, 0
		c.Log.Level = ""
		c.Security.Rules, c.Security.Issuers, c.Security.Audiences, c.Security.AllowHosts = nil, nil, nil, nil
		c.Security.GridMap, c.Security.GridMapRequired, c.Security.VOMSRequired, c.Security.Authorize = "", false, false, false
		c.Security.CRL, c.Security.CRLDirs, c.Security.CRLRefresh = "", nil, 0
	}
	return diffKeys(reflect.ValueOf(a), reflect.ValueOf(b), "")
}

// diffKeys lists the keys whose values differ between a and b (structs of
// one type), descending into sections; a table array ([[quota]]) or a map
// is named as a whole.
func diffKeys(a, b reflect.Value, prefix string) []string {
	var out []string
	for i := 0; i < a.NumField(); i++ {
		f := a.Type().Field(i)
		name := f.Tag.Get("toml")
		if name == "" || name == "-" {
			name = f.Name
		}
		name, _, _ = strings.Cut(name, ",")
		fa, fb := a.Field(i), b.Field(i)
		if fa.Kind() == reflect.Struct && f.Type.PkgPath() == reflect.TypeFor[config.Config]().PkgPath() {
			out = append(out, diffKeys(fa, fb, prefix+name+".")...)
			continue
		}
		if !reflect.DeepEqual(fa.Interface(), fb.Interface()) {
			out = append(out, prefix+name)
		}
	}
	return out
}

// spaceFigures reports quotas, pins and directory statistics to /metrics.
func (s *Server) spaceFigures() metrics.SpaceFigures {
	var f metrics.SpaceFigures
	if u, err := s.cache.Usage(); err == nil {
		f.PinnedBytes = u.Pinned
	}
	for _, q := range s.cache.Quotas() {
		f.Quotas = append(f.Quotas, metrics.QuotaFigure{Prefix: q.Prefix, Limit: q.Limit, High: q.High, Low: q.Low,
			Bytes: q.Bytes, Files: int64(q.Files), EvictedFiles: q.EvictedFiles, EvictedBytes: q.EvictedBytes})
	}
	f.Disks = s.diskFigures()
	for _, d := range s.cache.DirStats() {
		f.Dirs = append(f.Dirs, metrics.DirFigure{Dir: d.Dir, Files: int64(d.Files), Bytes: d.Bytes,
			Hits: d.Hits, Partial: d.Partial, Misses: d.Misses,
			BytesHit: d.BytesHit, BytesMissed: d.BytesMissed, BytesBypassed: d.BytesBypassed})
	}
	return f
}

// diskFigures reports the data disks to /metrics and /health.
func (s *Server) diskFigures() []metrics.DiskFigure {
	var out []metrics.DiskFigure
	for _, d := range s.cache.Disks() {
		out = append(out, metrics.DiskFigure{Dir: d.Dir, Up: d.Up, Reason: d.Reason, Total: d.Total, Used: d.Used,
			High: d.High, Low: d.Low, Files: int64(d.Files), Bytes: d.Bytes, Errors: d.Errors, DirectIO: d.DirectIO})
	}
	return out
}

// perClientMax is limits.max_connections_per_client as connlimit takes
// it: the default for 0, none (0) for a negative value.
func perClientMax(l config.LimitsConfig) int {
	switch {
	case l.MaxConnectionsPerClient < 0:
		return 0
	case l.MaxConnectionsPerClient == 0:
		return xrootd.DefaultMaxConnectionsPerClient
	}
	return l.MaxConnectionsPerClient
}
