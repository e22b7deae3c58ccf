// Package policy implements cache replacement policies over dense file ids.
//
// Every policy keeps its state in flat slices indexed by file id (intrusive
// lists, indexed heaps), so a request costs no allocation and no map lookup.
// Sizes are bytes; a file may grow (block mode) but never shrinks while cached.
package policy

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Policy is a cache of files identified by dense ids in [0, NumFiles).
// Implementations are not safe for concurrent use; one replay owns one Policy.
//
// # Semantics shared by all policies
//
// A request asks for need bytes of a file: the whole file in whole-file mode,
// or the block-aligned prefix the client read in block mode. A request is a hit
// when the cache already holds at least need bytes of the file. On a miss the
// policy decides whether to store the file (all policies but admit2 and opt
// always do). A file needing more bytes than the capacity is never stored and
// leaves the cache untouched. When a cached file grows (block mode), the policy
// makes room by evicting other files: the file being read is never the victim.
type Policy interface {
	// Access records one request at trace time now (Unix ns, non-decreasing)
	// for need bytes of file id. It returns the bytes of the file held before
	// the request and whether the cache holds need bytes of it afterwards
	// (false: the request passed through to the origin uncached).
	Access(id uint32, need int64, now int64) (had int64, stored bool)
	// Used returns the bytes currently held.
	Used() int64
	// Stats returns the counters since creation.
	Stats() Stats
}

// Stats counts cache-content changes.
type Stats struct {
	Inserted     int64 // files created in the cache
	Evicted      int64 // files deleted from the cache
	EvictedBytes int64 // bytes deleted
	Purges       int64 // xcache: purge passes that deleted files
}

// Config selects and parameterises a policy. Zero values take the defaults.
type Config struct {
	// Name is the policy: one of Names().
	Name string
	// Capacity is the cache size in bytes; must be positive (except infinite).
	Capacity int64
	// NumFiles bounds the file ids: every id is < NumFiles. Memory is about
	// 16-40 bytes per file.
	NumFiles int
	// HighWatermark and LowWatermark (xcache) are the occupancy fractions that
	// start and end a purge. Defaults 0.95 and 0.90, as XCache's pfc.diskusage.
	HighWatermark, LowWatermark float64
	// PurgeInterval (xcache) is the trace time between purge checks. Zero means
	// 300 s (XCache's default); negative means after every request, which makes
	// xcache bounded exactly by LRU at the two watermarks.
	PurgeInterval time.Duration
	// SmallRatio (s3fifo) is the share of the capacity for the small FIFO.
	// Default 0.10, as in the S3-FIFO paper.
	SmallRatio float64
	// GhostRatio (s3fifo) is the ghost FIFO's byte budget as a share of the
	// capacity. Default 0.90 (libCacheSim's default).
	GhostRatio float64
	// Next (opt) is the trace's next-use index of every request
	// (trace.Trace.NextUse); opt must then see exactly those requests in order.
	Next []int32
}

const (
	defaultHighWatermark = 0.95
	defaultLowWatermark  = 0.90
	defaultPurgeInterval = 300 * time.Second
	defaultSmallRatio    = 0.10
	defaultGhostRatio    = 0.90
)

type constructor struct {
	doc string
	new func(cfg *Config) Policy
}

var constructors = map[string]constructor{
	"lru":      {"least recently used, evicts on every insertion", func(c *Config) Policy { return newLRU(c) }},
	"xcache":   {"XCache: LRU by last access, purge from high to low watermark every interval", func(c *Config) Policy { return newXCache(c) }},
	"fifo":     {"first in, first out", func(c *Config) Policy { return newFIFO(c) }},
	"lfu":      {"least frequently used since insertion, ties by LRU", func(c *Config) Policy { return newLFU(c) }},
	"sieve":    {"SIEVE (NSDI '24): FIFO with a visited bit and a moving hand", func(c *Config) Policy { return newSIEVE(c) }},
	"s3fifo":   {"S3-FIFO (SOSP '23): small FIFO, main 2-bit CLOCK, ghost FIFO", func(c *Config) Policy { return newS3FIFO(c) }},
	"arc":      {"ARC (FAST '03) with byte-sized lists and target", func(c *Config) Policy { return newARC(c) }},
	"gdsf":     {"GreedyDual-Size-Frequency: evict lowest L + freq/size", func(c *Config) Policy { return newGDSF(c) }},
	"admit2":   {"LRU that stores a file only on its second request", func(c *Config) Policy { return newAdmit2(c) }},
	"infinite": {"never evicts: only compulsory misses", func(c *Config) Policy { return newInfinite(c) }},
	"opt":      {"Belady's MIN: evict the file used furthest in the future", func(c *Config) Policy { return newOPT(c) }},
}

// aliases maps long names to policy names.
var aliases = map[string]string{
	"admit-on-second-access": "admit2",
	"belady":                 "opt",
	"s3-fifo":                "s3fifo",
	"inf":                    "infinite",
}

// Names returns the policy names in a stable order.
func Names() []string {
	return []string{"lru", "xcache", "fifo", "lfu", "sieve", "s3fifo", "arc", "gdsf", "admit2", "infinite", "opt"}
}

// Describe returns a one-line description of a policy.
func Describe(name string) string { return constructors[Canonical(name)].doc }

// Canonical maps an alias or differently-cased name to the policy name.
func Canonical(name string) string {
	n := strings.ToLower(strings.TrimSpace(name))
	if a, ok := aliases[n]; ok {
		return a
	}
	return n
}

// EnsureDefaults fills zero fields with their defaults.
func (c *Config) EnsureDefaults() {
	c.Name = Canonical(c.Name)
	if c.HighWatermark == 0 {
		c.HighWatermark = defaultHighWatermark
	}
	if c.LowWatermark == 0 {
		c.LowWatermark = defaultLowWatermark
	}
	if c.PurgeInterval == 0 {
		c.PurgeInterval = defaultPurgeInterval
	}
	if c.SmallRatio == 0 {
		c.SmallRatio = defaultSmallRatio
	}
	if c.GhostRatio == 0 {
		c.GhostRatio = defaultGhostRatio
	}
}

// Validate reports every problem of the configuration in one error.
func (c *Config) Validate() error {
	var errs []error
	if _, ok := constructors[c.Name]; !ok {
		names := Names()
		sort.Strings(names)
		errs = append(errs, fmt.Errorf("unknown policy %q (want one of %s)", c.Name, strings.Join(names, ", ")))
	}
	if c.Capacity <= 0 && c.Name != "infinite" {
		errs = append(errs, fmt.Errorf("capacity %d must be positive", c.Capacity))
	}
	if c.NumFiles < 0 || c.NumFiles >= 1<<32-8 {
		errs = append(errs, fmt.Errorf("number of files %d out of range", c.NumFiles))
	}
	if !(c.LowWatermark > 0 && c.LowWatermark <= c.HighWatermark && c.HighWatermark <= 1) {
		errs = append(errs, fmt.Errorf("watermarks low %g, high %g: want 0 < low <= high <= 1", c.LowWatermark, c.HighWatermark))
	}
	if !(c.SmallRatio > 0 && c.SmallRatio < 1) {
		errs = append(errs, fmt.Errorf("s3fifo small ratio %g outside (0, 1)", c.SmallRatio))
	}
	if c.GhostRatio < 0 {
		errs = append(errs, fmt.Errorf("s3fifo ghost ratio %g is negative", c.GhostRatio))
	}
	if c.Name == "opt" && c.Next == nil {
		errs = append(errs, errors.New("opt needs the trace's next-use indices (Config.Next)"))
	}
	return errors.Join(errs...)
}

// New returns the policy cfg names. It copies cfg, fills defaults and validates.
func New(cfg *Config) (Policy, error) {
	c := *cfg
	c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return constructors[c.Name].new(&c), nil
}
