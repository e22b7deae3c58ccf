package cache

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/hepcache/hepcache/internal/catalog"
)

// spaceRules are the space settings that can change while the cache runs
// (SetSpace, on SIGHUP): watermarks, age and count limits, quotas and pins.
// A value is never modified; SetSpace swaps in a new one.
type spaceRules struct {
	high, low float64
	maxAge    time.Duration
	maxFiles  int
	quotas    []Quota
	pins      []string
	pinShare  float64
	// capacity is Config.Capacity (0: the file systems' size).
	capacity int64
	// verifyChecksum and purgeInterval are Config's.
	verifyChecksum string
	purgeInterval  time.Duration
}

func rulesOf(c *Config) *spaceRules {
	return &spaceRules{high: c.HighWatermark, low: c.LowWatermark, maxAge: c.MaxAge, maxFiles: c.MaxFiles,
		quotas: append([]Quota(nil), c.Quotas...), pins: append([]string(nil), c.Pin...), pinShare: c.PinShare,
		capacity: c.Capacity, verifyChecksum: c.VerifyChecksum, purgeInterval: c.PurgeInterval}
}

// catalog is the part of r the catalogue applies: quotas and pins.
func (r *spaceRules) catalog() catalog.Rules {
	return catalog.Rules{Quotas: r.quotas, Pins: r.pins, PinShare: r.pinShare}
}

// validSpaceRules checks quotas and pins.
func validSpaceRules(quotas []Quota, pins []string) []error {
	var errs []error
	absPrefix := func(what, p string) error {
		if !strings.HasPrefix(p, "/") || path.Clean(p) != strings.TrimSuffix(p, "/") && p != "/" || strings.Contains(p, "..") {
			return fmt.Errorf("%s %q: want a clean absolute path prefix such as /store/user/", what, p)
		}
		return nil
	}
	seen := map[string]bool{}
	for _, q := range quotas {
		if err := absPrefix("quota prefix", q.Prefix); err != nil {
			errs = append(errs, err)
		}
		key := strings.TrimSuffix(q.Prefix, "/")
		if seen[key] {
			errs = append(errs, fmt.Errorf("quota prefix %q: given twice", q.Prefix))
		}
		seen[key] = true
		switch {
		case q.Size < 0 || q.Share < 0:
			errs = append(errs, fmt.Errorf("quota %s: size %d, share %v: must not be negative", q.Prefix, q.Size, q.Share))
		case (q.Size > 0) == (q.Share > 0):
			errs = append(errs, fmt.Errorf("quota %s: give exactly one of size and share", q.Prefix))
		case q.Share > 1:
			errs = append(errs, fmt.Errorf("quota %s: share %v: a fraction of the capacity, at most 1", q.Prefix, q.Share))
		}
		if q.LowWatermark <= 0 || q.HighWatermark <= 0 || q.LowWatermark >= q.HighWatermark ||
			(q.LowWatermark <= 1) != (q.HighWatermark <= 1) {
			errs = append(errs, fmt.Errorf("quota %s: watermarks low %v, high %v: want 0 < low < high, both fractions or both sizes", q.Prefix, q.LowWatermark, q.HighWatermark))
		}
	}
	for _, p := range pins {
		if err := absPrefix("pin", p); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// Space holds the settings SetSpace changes while the cache runs.
type Space struct {
	HighWatermark, LowWatermark float64
	MaxAge                      time.Duration
	MaxFiles                    int
	Quotas                      []Quota
	Pin                         []string
	PinShare                    float64
	// Capacity, VerifyChecksum and PurgeInterval are Config's; zero
	// values mean their defaults, as in Config (Capacity 0: the file
	// systems' size).
	Capacity       int64
	VerifyChecksum string
	PurgeInterval  time.Duration
}

// SetSpace replaces the watermarks, age and count limits, quotas and pins
// of a running cache (a configuration reload), with the defaults and
// checks of New. A purge follows at once. On error nothing changes.
func (c *Cache) SetSpace(s Space) error {
	nc := c.cfg
	nc.HighWatermark, nc.LowWatermark = s.HighWatermark, s.LowWatermark
	nc.MaxAge, nc.MaxFiles = s.MaxAge, s.MaxFiles
	nc.Quotas = append([]Quota(nil), s.Quotas...)
	nc.Pin = append([]string(nil), s.Pin...)
	nc.PinShare = s.PinShare
	nc.Capacity, nc.VerifyChecksum, nc.PurgeInterval = s.Capacity, s.VerifyChecksum, s.PurgeInterval
	nc.EnsureDefaults()
	if err := nc.Validate(); err != nil {
		return fmt.Errorf("cache space settings: %w", err)
	}
	r := rulesOf(&nc)
	c.rules.Store(r)
	c.catalog.SetRules(r.catalog())
	c.kickPurge()
	return nil
}

// QuotaUsage is the state of one quota.
type QuotaUsage = catalog.QuotaUsage

// Quotas returns the state of every quota, in configuration order.
func (c *Cache) Quotas() []QuotaUsage { return c.catalog.Quotas() }

// DirStat is what the cache holds and serves for one directory (the first
// DirStatsDepth components of the cached paths under it), like XCache's
// pfc.dirstats. Cached figures are current; the rest count since start-up.
type DirStat = catalog.DirStat

// DirStats returns the per-directory statistics, sorted by directory.
func (c *Cache) DirStats() []DirStat { return c.catalog.DirStats() }

// errPinnedOverHigh is logged when pinned files alone keep the cache over
// its high watermark.
var errPinnedOverHigh = errors.New("cache: pinned files alone exceed the high watermark")

// errPinShareFull is logged when a file in a pinned namespace is not pinned
// because pinned files already hold their share of the capacity.
var errPinShareFull = errors.New("cache: pinned files hold space.pin_share of the capacity")
