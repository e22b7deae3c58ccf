package server

import (
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/frontend/xrootd"
	"github.com/hepcache/hepcache/internal/metrics"
	s3origin "github.com/hepcache/hepcache/origin/s3"
)

// Reload applies what may change while serving (SIGHUP): it reopens the
// access log (logrotate moved it), re-reads the TLS certificate and key, the CA certificates, the vomsdir
// and the S3 key files, and, given
// the configuration as it now reads (nil: only those files), replaces the
// [space] watermarks, max_age, max_files and pin, the [[quota]] tables and
// the root:// [limits]. Settings that need a restart are named in a
// warning. What fails to apply is reported and the rest still applies; a
// part that fails keeps its previous value.
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
	if next == nil {
		return errors.Join(errs...)
	}
	// The same checks as at start-up: a file the next start would refuse
	// is refused now, not reported reloaded.
	if err := Check(next); err != nil {
		return errors.Join(append(errs, fmt.Errorf("configuration refused (as it would be at start-up), nothing of it applied:\n%w", err))...)
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
	if changed := restartOnly(s.cfg, next); len(changed) > 0 {
		s.log.Warn("reload: these settings changed but take effect only at restart", "sections", changed)
	}
	if len(errs) == 0 {
		// What was applied is now the running configuration.
		s.cfg.Space, s.cfg.Quota, s.cfg.Limits = next.Space, next.Quota, next.Limits
	}
	return errors.Join(errs...)
}

// spaceOf maps [space] and [[quota]] onto the cache's run-time settings.
func spaceOf(cfg *config.Config) (cache.Space, error) { return cfg.SpaceRules() }

// rootLimits maps [limits] onto the root:// front end's.
func rootLimits(l config.LimitsConfig) xrootd.Limits {
	return xrootd.Limits{MaxConnections: l.MaxConnections, MaxInFlight: l.MaxRequestsPerConnection,
		MaxRequestBody: int(l.MaxRequestBody), MaxReadVSegments: l.MaxReadVSegments,
		MaxReadVSegmentSize: int(l.MaxReadVSegmentSize),
		HandshakeTimeout:    time.Duration(l.HandshakeTimeout), IdleTimeout: time.Duration(l.IdleTimeout)}
}

// restartOnly names the top-level sections of next that differ from cur
// in settings Reload does not apply.
func restartOnly(cur, next *config.Config) []string {
	a, b := *cur, *next
	// Blank what Reload applies.
	for _, c := range []*config.Config{&a, &b} {
		c.Space.Watermarks, c.Space.MaxAge, c.Space.MaxFiles, c.Space.Pin = "", 0, 0, nil
		c.Quota = nil
		c.Limits.MaxConnections, c.Limits.MaxRequestsPerConnection, c.Limits.MaxRequestBody = 0, 0, 0
		c.Limits.MaxReadVSegments, c.Limits.MaxReadVSegmentSize = 0, 0
		c.Limits.HandshakeTimeout, c.Limits.IdleTimeout = 0, 0
	}
	var out []string
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	for i := 0; i < va.NumField(); i++ {
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			name := va.Type().Field(i).Tag.Get("toml")
			if name == "" {
				name = va.Type().Field(i).Name
			}
			out = append(out, name)
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
	for _, d := range s.cache.Disks() {
		f.Disks = append(f.Disks, metrics.DiskFigure{Dir: d.Dir, Up: d.Up, Reason: d.Reason, Total: d.Total, Used: d.Used,
			High: d.High, Low: d.Low, Files: int64(d.Files), Bytes: d.Bytes, Errors: d.Errors, DirectIO: d.DirectIO})
	}
	for _, d := range s.cache.DirStats() {
		f.Dirs = append(f.Dirs, metrics.DirFigure{Dir: d.Dir, Files: int64(d.Files), Bytes: d.Bytes,
			Hits: d.Hits, Partial: d.Partial, Misses: d.Misses,
			BytesHit: d.BytesHit, BytesMissed: d.BytesMissed, BytesBypassed: d.BytesBypassed})
	}
	return f
}
