// Package config is hepcache's configuration: one TOML file in which every
// key has a documented default (docs/hepcache.toml), overridden by command-line
// flags. Load reports unknown keys and every invalid value with the key, the
// value and what is allowed, so a bad config fails at start-up.
package config

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/upstream"
	"github.com/hepcache/hepcache/origin"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// Config is the whole configuration.
type Config struct {
	Server ServerConfig `toml:"server"`
	Cache  CacheConfig  `toml:"cache"`
	Space  SpaceConfig  `toml:"space"`
	Origin OriginConfig `toml:"origin"`
	Log    LogConfig    `toml:"log"`
	// Cluster is the [cluster] section (cluster.go).
	Cluster ClusterConfig `toml:"cluster"`
	// Namespace rules, tried in order; the first match wins.
	Namespace []NamespaceRule `toml:"namespace"`
	// Map rules rewrite logical names to physical names, in order.
	Map []MapRule `toml:"map"`
	// Security is TLS, authentication, authorization and the cache's own
	// credential (security.go, docs/security.md).
	Security SecurityConfig `toml:"security"`
	// Limits bound what one client may hold on the front ends.
	Limits LimitsConfig `toml:"limits"`
	// Quota tables partition the space between path prefixes.
	Quota []QuotaRule `toml:"quota"`
	// Prestage is how files named by kXR_prepare, `hepcache prestage` and
	// the HTTP form are fetched.
	Prestage PrestageConfig `toml:"prestage"`
	// Monitor is where the XRootD monitoring streams go (monitor.go).
	Monitor MonitorConfig `toml:"monitor"`
	// Cmsd is the subscription to an XRootD redirector (cmsd.go).
	Cmsd CmsdConfig `toml:"cmsd"`
	// Pelican is the membership of a Pelican federation (pelican.go).
	Pelican PelicanConfig `toml:"pelican"`
}

// PrestageConfig is the [prestage] section.
type PrestageConfig struct {
	// Workers is how many files are staged at once. Default 4.
	Workers int `toml:"workers"`
	// MaxQueued bounds the files waiting to be staged; a request beyond it
	// is refused (busy). Default 100000.
	MaxQueued int `toml:"max_queued"`
	// MaxListMemory bounds the memory of the file lists of unfinished
	// jobs (names plus about 400 bytes a file); a request beyond it is
	// refused (busy). Finished jobs keep counts only (at most 2 KiB each,
	// the newest 1000). Default 64M.
	MaxListMemory Size `toml:"max_list_memory"`
}

// QuotaRule is one [[quota]] table: the space the files under a path prefix
// may hold, purged within its own watermarks before the global purge.
type QuotaRule struct {
	// Prefix is the path prefix ("/store/user/").
	Prefix string `toml:"prefix"`
	// Size is the quota ("20T"), or Share a fraction of the capacity (0.2);
	// exactly one of the two.
	Size  Size    `toml:"size"`
	Share float64 `toml:"share"`
	// Watermarks are "low,high" fractions of the quota (or sizes).
	// Default "": those of [space] when they are fractions, else 0.90,0.95.
	Watermarks string `toml:"watermarks"`
}

// SpaceConfig is the [space] section: how much the cache may hold.
type SpaceConfig struct {
	// Capacity is the space the cache may fill. Default "" (0): the size of
	// the file system holding cache.dir, whose used bytes count.
	Capacity Size `toml:"capacity"`
	// Watermarks are "low,high": when usage passes high, least recently
	// used files are evicted until usage is under low. Fractions of the
	// capacity ("0.90,0.95", the default) or sizes ("450G,475G").
	Watermarks string `toml:"watermarks"`
	// PurgeInterval is how often usage is re-checked besides after writes,
	// and how often max_age applies. Default 30s.
	PurgeInterval Duration `toml:"purge_interval"`
	// MaxAge evicts files not accessed for this long. Default "0s": off.
	MaxAge Duration `toml:"max_age"`
	// MaxFiles bounds the number of cached files. Default 0: no limit.
	MaxFiles int `toml:"max_files"`
	// VerifyChecksum is compared with the origin when a file completes:
	// adler32 (default), crc32c, or none.
	VerifyChecksum string `toml:"verify_checksum"`
	// Pin lists path prefixes whose files purge never evicts. Default none.
	Pin []string `toml:"pin"`
	// PinShare is the most of the capacity pinned files may hold; a file
	// beyond it is cached unpinned, with a warning. Default 0.5.
	PinShare float64 `toml:"pin_share"`
	// DirStatsDepth is how many leading path components name a directory in
	// the per-directory statistics. Default 2; -1 turns them off.
	DirStatsDepth int `toml:"dir_stats_depth"`
	// DirStatsMax bounds the directories tracked. Default 1000.
	DirStatsMax int `toml:"dir_stats_max"`
}

// NamespaceRule is one [[namespace]] table.
type NamespaceRule struct {
	// Prefix or Pattern (a shell glob on the whole path) selects paths.
	Prefix  string `toml:"prefix"`
	Pattern string `toml:"pattern"`
	// Action is cache (default), passthrough or deny.
	Action string `toml:"action"`
	// Mutable paths are revalidated against the origin at open.
	Mutable bool `toml:"mutable"`
	// Origin, with a prefix, serves the paths under it from that origin,
	// the prefix replaced by the origin's own path: prefix "/store/data/"
	// with origin "s3://bucket/cms" reads /store/data/a/f.root from the
	// object cms/a/f.root. Default "": the default origin, path unchanged.
	Origin string `toml:"origin"`
}

// MapRule is one [[map]] table: logical name to physical name.
type MapRule struct {
	Match   string `toml:"match"`
	Replace string `toml:"replace"`
	Origin  string `toml:"origin"`
}

// ServerConfig is the [server] section: where hepcache listens.
type ServerConfig struct {
	// Listen is the root:// address. Default ":1094".
	Listen string `toml:"listen"`
	// HTTPListen is the http:// address; empty (default) turns HTTP off.
	HTTPListen string `toml:"http_listen"`
	// MetricsListen serves /metrics and /health on a separate address;
	// empty (default) serves them on the HTTP listener if there is one.
	MetricsListen string `toml:"metrics_listen"`
	// DebugPprof serves Go's profiles under /debug/pprof/ on MetricsListen
	// (goroutine dumps of a stuck node: /debug/pprof/goroutine?debug=2).
	// Default false; needs MetricsListen (never on the clients' HTTP
	// listener). A CPU profile costs CPU while it runs.
	DebugPprof bool `toml:"debug_pprof"`
	// ShutdownTimeout is how long SIGTERM waits for reads to finish;
	// then origin calls are cut and the process exits at most 1s later,
	// whatever still waits. Default 30s.
	ShutdownTimeout Duration `toml:"shutdown_timeout"`
	// HealthWindow is how long an origin or disk error keeps /health
	// "degraded". Default 5m: long enough for a load balancer polling
	// every minute to see it.
	HealthWindow Duration `toml:"health_window"`
}

// CacheConfig is the [cache] section: the block cache.
type CacheConfig struct {
	// Dir holds the cached data and metadata. Required.
	Dir string `toml:"dir"`
	// BlockChecksums checks every block read back from disk against the
	// CRC32C recorded when it was written; a block that fails is fetched
	// again. Default true.
	BlockChecksums bool `toml:"block_checksums"`
	// DirectIO writes and reads data files with O_DIRECT, without the
	// page cache; a file system that refuses it falls back to buffered
	// I/O by itself. Default true.
	DirectIO bool `toml:"direct_io"`
	// RAM is the memory holding blocks: in flight from origins and a RAM
	// cache of recently used ones (XCache's pfc.ram). Default 0: the
	// node's memory (cgroup limit, else the machine's) less a reserve, at
	// least twice fetch_memory; handed back under memory pressure.
	RAM Size `toml:"ram"`
	// HugePages asks for transparent huge pages for ram. Default true.
	HugePages bool `toml:"huge_pages"`
	// DiskReadDepth is how many blocks a reader keeps in flight from a
	// data disk. Default 0: 16 on solid state, 8 on rotational disks.
	DiskReadDepth int `toml:"disk_read_depth"`
	// DataDirs put the data files on several disks (one directory per
	// disk), Dir keeping the metadata. Default []: the data lives in Dir.
	DataDirs []string `toml:"data_dirs"`
	// BlockSize is the caching unit. Default 1M.
	BlockSize Size `toml:"block_size"`
	// PieceSize is the stream-through unit within a block. Default 128K.
	PieceSize Size `toml:"piece_size"`
	// Prefetch is how many blocks are read ahead while a file is open.
	// Default 10; 0 turns prefetch off.
	Prefetch int `toml:"prefetch"`
	// PrefetchMax lets the read-ahead window of a file widen up to this
	// many blocks while its reader keeps catching up with blocks in
	// flight (high-latency origins). Default 0: same as prefetch, a fixed
	// window as in XCache.
	PrefetchMax int `toml:"prefetch_max"`
	// FetchMemory caps the bytes in flight from all origins together, a
	// part of ram; each origin's window adapts below it. Default 0: half
	// of ram.
	FetchMemory Size `toml:"fetch_memory"`
	// SyncInterval is how often written blocks are made durable. Default 2s.
	SyncInterval Duration `toml:"sync_interval"`
	// CompleteAfterClose keeps downloading a file after its last client
	// left. Default false: the partial file stays and is resumed later.
	CompleteAfterClose bool `toml:"complete_after_close"`
	// MaxKept bounds the closed files whose state stays in memory (about
	// 2 KB each): their next open reads no sidecar, and their hits write
	// their access records at most once a minute. Default 0: the RAM
	// cache's size / 128 KiB, 4,096 to 1,048,576; negative: none.
	MaxKept int `toml:"max_kept"`
	// LocalRedirect is the path under which clients see the cache
	// directory's data/ tree (seed 000: worker nodes mount the cache
	// space). root:// opens of complete files are then redirected to
	// file://localhost/<local_redirect>/<path under data/>, so that the
	// client reads them itself. Default "": off.
	LocalRedirect string `toml:"local_redirect"`
}

// OriginConfig is the [origin] section: where data comes from.
type OriginConfig struct {
	// Default is the origin for requests that name none:
	// "root://host:port", "file:///dir". Empty: forwarding only.
	Default string `toml:"default"`
	// ForwardAllow turns on forwarding mode (XrdClProxyPlugin clients) for
	// these origins: "host", "host:port" or ".domain.suffix". Default empty
	// (forwarding off): hepcache is never an open proxy.
	ForwardAllow []string `toml:"forward_allow"`
	// Timeout bounds one origin open or read. Default 60s.
	Timeout Duration `toml:"timeout"`
	// MaxListings bounds the directory listings in progress at once
	// (xrdfs ls, PROPFIND, GET of a directory); more wait for one to end.
	// Each holds a page of an S3 listing (1000 entries) as it streams, or
	// a whole listing from other origins. Default 16.
	MaxListings int `toml:"max_listings"`
	// Connections is the number of TCP connections per root:// origin.
	// Default 16: on a high-latency link each connection is limited by its
	// TCP window (Linux grows it to about 6 MB: 40 MB/s at 150 ms), so many
	// clients' misses need many connections; 16 matched the direct reads
	// of 8 clients at 150 ms where 4 took 1.6 times as long (bench wan).
	Connections int `toml:"connections"`
	// Fallback lists origins tried in order when the default origin is
	// unreachable (federation: default = a regional cache, fallback = the
	// origin it caches). Cached files keep the default origin's name.
	// Default empty.
	Fallback []string `toml:"fallback"`
	// MaxHops is how many caches a request may have passed through
	// (hc.via) before this one refuses it as a loop. Default 4.
	MaxHops int `toml:"max_hops"`
	// NotFoundTTL is how long an origin's "not found" (stat or open) is
	// remembered, so repeated requests for a missing file do not reach the
	// origin. Default 30s; "0s" turns negative caching off.
	NotFoundTTL Duration `toml:"not_found_ttl"`
	// NotFoundTTLByOrigin overrides NotFoundTTL per origin URL
	// ("root://host:1094" = "5m"; "0s" turns it off for that origin).
	NotFoundTTLByOrigin map[string]Duration `toml:"not_found_ttl_by_origin"`
	// FailureLogInterval is the least time between two log lines about
	// one origin's failures (down, timing out, refusing the cache): the
	// first is logged at once, the next carries the count left out.
	// Default 1m.
	FailureLogInterval Duration `toml:"failure_log_interval"`
	// S3Endpoint is the object store that s3://bucket/prefix origins are
	// read from ("https://s3.example.org", "http://rgw.site:7480").
	// Default "": AWS, https://s3.<s3_region>.amazonaws.com.
	S3Endpoint string `toml:"s3_endpoint"`
	// S3Region is the region requests are signed for. Default "":
	// $AWS_REGION, else us-east-1 (what most other object stores accept).
	S3Region string `toml:"s3_region"`
	// S3Addressing is "path" (endpoint/bucket/key), "virtual"
	// (bucket.endpoint/key) or "" (default): virtual on AWS, path elsewhere.
	S3Addressing string `toml:"s3_addressing"`
	// S3AccessKeyFile and S3SecretKeyFile hold the cache's key pair, each
	// file the key alone; re-read when they change and on SIGHUP. Default
	// "": the AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY environment, else the
	// shared credentials file ($AWS_SHARED_CREDENTIALS_FILE or
	// ~/.aws/credentials).
	S3AccessKeyFile string `toml:"s3_access_key_file"`
	S3SecretKeyFile string `toml:"s3_secret_key_file"`
	// S3Profile is the profile of the shared credentials file. Default "":
	// $AWS_PROFILE, else "default".
	S3Profile string `toml:"s3_profile"`
	// S3Anonymous sends unsigned requests (public buckets). Default false.
	S3Anonymous bool `toml:"s3_anonymous"`
	// S3Connections bounds the connections to the S3 endpoint. Default 64:
	// an HTTP connection carries one request at a time and the cache asks
	// for 128 KiB pieces, so a far object store needs many requests in
	// flight (64 x 128 KiB per round trip: 56 MB/s at 150 ms), at the
	// expense of connections held at the store.
	S3Connections int `toml:"s3_connections"`
}

// S3Origins lists the s3:// origins the configuration names (default,
// fallback, [[map]] and [[namespace]] origins).
func (c *Config) S3Origins() []string {
	var out []string
	add := func(o string) {
		if strings.HasPrefix(strings.ToLower(o), "s3://") {
			out = append(out, o)
		}
	}
	add(c.Origin.Default)
	for _, f := range c.Origin.Fallback {
		add(f)
	}
	for _, m := range c.Map {
		add(m.Origin)
	}
	for _, n := range c.Namespace {
		add(n.Origin)
	}
	return out
}

// LogConfig is the [log] section.
type LogConfig struct {
	// Level is debug, info, warn or error. Default info.
	Level string `toml:"level"`
	// AccessLog is a file receiving one JSON line per closed file
	// (docs/access-log.md), "-" for stdout; empty (default) disables it.
	AccessLog string `toml:"access_log"`
	// File receives the server's own log (XCache's xrootd -l), reopened
	// on SIGHUP and `hepcache reload` (logrotate). Default "": standard
	// error (journald under systemd).
	File string `toml:"file"`
}

// Default returns the defaults of every key. Those of [cache] and [space]
// are the cache's own (cache.DefaultConfig): this package restates none.
func Default() *Config {
	cd := cache.DefaultConfig()
	return &Config{
		Server: ServerConfig{Listen: ":1094", ShutdownTimeout: Duration(30e9), HealthWindow: Duration(300e9)},
		Cache: CacheConfig{DataDirs: []string{}, BlockChecksums: !cd.NoBlockChecksums, DirectIO: !cd.NoDirectIO, HugePages: !cd.NoHugePages, BlockSize: Size(cd.BlockSize),
			PieceSize: Size(cd.PieceSize), Prefetch: cd.Prefetch, PrefetchMax: cd.PrefetchMax,
			SyncInterval: Duration(cd.SyncInterval)},
		Space: SpaceConfig{Watermarks: fmt.Sprintf("%.2f,%.2f", cd.LowWatermark, cd.HighWatermark),
			PurgeInterval: Duration(cd.PurgeInterval), VerifyChecksum: cd.VerifyChecksum,
			Pin: []string{}, PinShare: cd.PinShare, DirStatsDepth: cd.DirStatsDepth, DirStatsMax: cd.DirStatsMax},
		Origin: OriginConfig{Timeout: Duration(cd.OriginTimeout), MaxListings: cd.MaxListings, Connections: 16, MaxHops: 4, NotFoundTTL: Duration(30e9),
			NotFoundTTLByOrigin: map[string]Duration{}, S3Connections: 64, FailureLogInterval: Duration(60e9)},
		Log:      LogConfig{Level: "info"},
		Cluster:  defaultCluster(),
		Security: SecurityConfig{ClockSkew: Duration(60e9), CRL: "try", CRLRefresh: Duration(24 * time.Hour)},
		Prestage: PrestageConfig{Workers: 4, MaxQueued: 100000, MaxListMemory: Size(64 << 20)},
		Monitor:  defaultMonitor(),
		Cmsd:     defaultCmsd(),
		Pelican:  PelicanConfig{Namespaces: []string{}, Audiences: []string{}},
	}
}

// Load reads a TOML file over the defaults. Unknown keys are errors.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Parse reads TOML text over the defaults. Unknown keys are errors. It
// never panics on any input (it is fuzzed).
func Parse(b []byte) (*Config, error) {
	c := Default()
	md, err := toml.Decode(string(b), c)
	if err != nil {
		return nil, err
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return nil, fmt.Errorf("unknown keys: %s", strings.Join(keys, ", "))
	}
	return c, nil
}

// Flags binds command-line flags to c; flags parsed later override the file.
// The flag names are the documented ones (--listen, --origin, ...).
func (c *Config) Flags(fs *flag.FlagSet) {
	fs.StringVar(&c.Server.Listen, "listen", c.Server.Listen, "root:// listen address (server.listen)")
	fs.StringVar(&c.Server.HTTPListen, "http-listen", c.Server.HTTPListen, "http:// listen address, empty for none (server.http_listen)")
	fs.StringVar(&c.Server.MetricsListen, "metrics-listen", c.Server.MetricsListen, "address for /metrics and /health (server.metrics_listen)")
	fs.BoolVar(&c.Server.DebugPprof, "debug-pprof", c.Server.DebugPprof, "serve /debug/pprof/ on the metrics listener (server.debug_pprof)")
	fs.StringVar(&c.Cache.Dir, "cache-dir", c.Cache.Dir, "cache directory (cache.dir)")
	dataDirsSet := false
	fs.Func("data-dir", "a data disk's directory, repeatable; the first replaces the file's list (cache.data_dirs)", func(v string) error {
		if !dataDirsSet {
			c.Cache.DataDirs, dataDirsSet = nil, true
		}
		c.Cache.DataDirs = append(c.Cache.DataDirs, v)
		return nil
	})
	fs.Var(&c.Cache.BlockSize, "block-size", "cache block size (cache.block_size)")
	fs.IntVar(&c.Cache.Prefetch, "prefetch", c.Cache.Prefetch, "blocks read ahead, 0 = off (cache.prefetch)")
	fs.IntVar(&c.Cache.PrefetchMax, "prefetch-max", c.Cache.PrefetchMax, "widest read-ahead window in blocks, 0 = prefetch (cache.prefetch_max)")
	fs.Var(&c.Cache.FetchMemory, "fetch-memory", "bound on bytes in flight from origins, part of ram (cache.fetch_memory)")
	fs.Var(&c.Cache.RAM, "ram", "memory holding blocks in flight and hot blocks (cache.ram)")
	fs.BoolVar(&c.Cache.CompleteAfterClose, "complete-after-close", c.Cache.CompleteAfterClose, "finish downloads after the last client closes (cache.complete_after_close)")
	fs.StringVar(&c.Origin.Default, "origin", c.Origin.Default, "default origin, root://host:port or file:///dir (origin.default)")
	fs.Func("forward-allow", "comma-separated origins allowed in forwarding mode: host, host:port, .domain (origin.forward_allow)", func(v string) error {
		c.Origin.ForwardAllow = nil
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				c.Origin.ForwardAllow = append(c.Origin.ForwardAllow, s)
			}
		}
		return nil
	})
	fs.Var(&c.Space.Capacity, "capacity", "space the cache may fill, e.g. 500G; default: the whole file system (space.capacity)")
	fs.StringVar(&c.Space.Watermarks, "watermarks", c.Space.Watermarks, "low,high purge watermarks, fractions or sizes (space.watermarks)")
	fs.StringVar(&c.Log.AccessLog, "access-log", c.Log.AccessLog, "access log file, - for stdout (log.access_log)")
	fs.StringVar(&c.Log.File, "log-file", c.Log.File, "server log file, reopened on SIGHUP; default standard error (log.file)")
	fs.StringVar(&c.Log.Level, "log-level", c.Log.Level, "debug, info, warn, error (log.level)")
	c.Monitor.flags(fs)
	c.Cmsd.flags(fs)
}

// Validate reports every invalid value, each with its key, the value and
// what is allowed.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key string, val any, allowed string) {
		errs = append(errs, fmt.Errorf("%s = %v: %s", key, val, allowed))
	}
	addr := func(key, v string, optional bool) {
		if v == "" {
			if !optional {
				bad(key, `""`, "required, e.g. \":1094\" or \"127.0.0.1:1094\"")
			}
			return
		}
		if _, _, err := net.SplitHostPort(v); err != nil {
			bad(key, fmt.Sprintf("%q", v), "want host:port or :port")
		}
	}
	addr("server.listen", c.Server.Listen, false)
	addr("server.http_listen", c.Server.HTTPListen, true)
	addr("server.metrics_listen", c.Server.MetricsListen, true)
	if c.Server.DebugPprof && c.Server.MetricsListen == "" {
		bad("server.debug_pprof", true, "needs server.metrics_listen: profiles are not served on the clients' HTTP listener")
	}
	if c.Server.ShutdownTimeout < 0 {
		bad("server.shutdown_timeout", c.Server.ShutdownTimeout, "must not be negative")
	}
	if c.Server.HealthWindow <= 0 {
		bad("server.health_window", c.Server.HealthWindow, "a positive duration")
	}
	if c.Cache.Dir == "" {
		bad("cache.dir", `""`, "required: the directory holding cached files (--cache-dir)")
	}
	if c.Cache.Prefetch < 0 || c.Cache.Prefetch > 1024 {
		bad("cache.prefetch", c.Cache.Prefetch, "0 (off) to 1024 blocks")
	}
	if c.Cache.SyncInterval <= 0 {
		bad("cache.sync_interval", c.Cache.SyncInterval, "a positive duration")
	}
	if c.Origin.FailureLogInterval < 0 {
		bad("origin.failure_log_interval", c.Origin.FailureLogInterval, "a positive duration, or 0s for the default (1m)")
	}
	if c.Origin.NotFoundTTL < 0 {
		bad("origin.not_found_ttl", c.Origin.NotFoundTTL, "0s (off) or a positive duration")
	}
	for o, d := range c.Origin.NotFoundTTLByOrigin {
		if d < 0 {
			bad("origin.not_found_ttl_by_origin."+o, d, "0s (off) or a positive duration")
		}
	}
	c.validateSizes(bad)
	if _, _, err := c.Space.ParseWatermarks(); err != nil {
		bad("space.watermarks", fmt.Sprintf("%q", c.Space.Watermarks), err.Error())
	}
	if c.Space.PurgeInterval <= 0 {
		bad("space.purge_interval", c.Space.PurgeInterval, "a positive duration")
	}
	for i, q := range c.Quota {
		if q.Watermarks == "" {
			continue
		}
		if _, _, err := ParseWatermarks(q.Watermarks); err != nil {
			bad(fmt.Sprintf("quota[%d].watermarks", i), fmt.Sprintf("%q", q.Watermarks), err.Error())
		}
	}
	if c.Space.DirStatsDepth < -1 || c.Space.DirStatsDepth == 0 || c.Space.DirStatsDepth > 16 {
		bad("space.dir_stats_depth", c.Space.DirStatsDepth, "1 to 16 path components, or -1 (off)")
	}
	if c.Space.DirStatsMax <= 0 {
		bad("space.dir_stats_max", c.Space.DirStatsMax, "a positive count")
	}
	// The rest of [cache], [space] and [[quota]] is the cache's to judge
	// (cache.Config.Validate), each problem named by its key here.
	cc, err := c.CacheConfig()
	if err != nil {
		// Bad watermarks are reported above; judge the rest of the
		// cache's settings anyway, so that errors do not come in rounds.
		rest := *c
		rest.Space.Watermarks, rest.Quota = Default().Space.Watermarks, nil
		cc, err = rest.CacheConfig()
	}
	if err == nil {
		cc.Origins = origin.ResolverFunc(func(context.Context, string) (origin.Origin, error) { return nil, nil })
		cc.EnsureDefaults()
		var fe *cache.FieldError
		for _, err := range unjoin(cc.Validate()) {
			key := "cache"
			if errors.As(err, &fe) {
				if k, ok := cacheKeys[fe.Field]; ok {
					key = k
				} else if fe.Field == "Dir" {
					continue // reported above with the flag to use
				}
			}
			if v, ok := c.keyValue(key); ok {
				errs = append(errs, fmt.Errorf("%s = %v: %w", key, v, err))
			} else {
				errs = append(errs, fmt.Errorf("%s: %w", key, err))
			}
		}
	}
	for i, r := range c.Namespace {
		key := fmt.Sprintf("namespace[%d]", i+1)
		if (r.Prefix == "") == (r.Pattern == "") {
			bad(key, fmt.Sprintf("prefix=%q pattern=%q", r.Prefix, r.Pattern), "exactly one of prefix and pattern")
		}
		switch r.Action {
		case "", "cache", "passthrough", "deny":
		default:
			bad(key+".action", fmt.Sprintf("%q", r.Action), "cache, passthrough or deny")
		}
		if r.Origin != "" {
			if r.Prefix == "" {
				bad(key+".origin", fmt.Sprintf("%q", r.Origin), "an origin needs a prefix (not a pattern) to replace")
			}
			if _, err := upstream.Canonical(r.Origin); err != nil {
				bad(key+".origin", fmt.Sprintf("%q", r.Origin), err.Error())
			}
		}
	}
	switch c.Origin.S3Addressing {
	case "", "path", "virtual":
	default:
		bad("origin.s3_addressing", fmt.Sprintf("%q", c.Origin.S3Addressing), `"path", "virtual" or "" (virtual on AWS, path elsewhere)`)
	}
	if (c.Origin.S3AccessKeyFile == "") != (c.Origin.S3SecretKeyFile == "") {
		bad("origin.s3_access_key_file", fmt.Sprintf("%q (s3_secret_key_file %q)", c.Origin.S3AccessKeyFile, c.Origin.S3SecretKeyFile), "give both key files or neither")
	}
	if c.Origin.S3Connections < 1 || c.Origin.S3Connections > 1024 {
		bad("origin.s3_connections", c.Origin.S3Connections, "1 to 1024")
	}
	if c.Origin.S3Anonymous && c.Origin.S3AccessKeyFile != "" {
		bad("origin.s3_anonymous", true, "anonymous access and key files are exclusive")
	}
	if e := c.Origin.S3Endpoint; e != "" {
		if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" {
			bad("origin.s3_endpoint", fmt.Sprintf("%q", e), "http(s)://host[:port], no path")
		}
	}
	for i, m := range c.Map {
		if m.Match == "" || !strings.HasPrefix(m.Replace, "/") {
			bad(fmt.Sprintf("map[%d]", i+1), fmt.Sprintf("match=%q replace=%q", m.Match, m.Replace), "a regular expression and an absolute replacement path")
		}
	}
	if c.Origin.Default == "" && len(c.Origin.ForwardAllow) == 0 && !c.Pelican.Enabled() {
		bad("origin.default", `""`, "give a default origin (--origin) or a forwarding allow-list (--forward-allow), or both, or a [pelican] federation to read through")
	}
	if c.Origin.Timeout <= 0 {
		bad("origin.timeout", c.Origin.Timeout, "a positive duration")
	}
	if c.Origin.Connections < 1 || c.Origin.Connections > 64 {
		bad("origin.connections", c.Origin.Connections, "1 to 64")
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", fmt.Sprintf("%q", c.Log.Level), "debug, info, warn or error")
	}
	c.validateCluster(bad)
	c.Security.validate(bad)
	c.Limits.validate(bad)
	c.Monitor.validate(bad)
	c.Cmsd.validate(bad)
	c.validatePelican(bad)
	if c.Prestage.Workers < 1 {
		bad("prestage.workers", c.Prestage.Workers, "at least 1")
	}
	if c.Prestage.MaxQueued < 1 {
		bad("prestage.max_queued", c.Prestage.MaxQueued, "at least 1")
	}
	if c.Prestage.MaxListMemory < 1<<20 {
		bad("prestage.max_list_memory", c.Prestage.MaxListMemory, "at least 1M")
	}
	return errors.Join(errs...)
}

// ParseWatermarks returns the low and high watermarks: fractions of the
// capacity (<= 1) or byte counts.
func (s SpaceConfig) ParseWatermarks() (low, high float64, err error) {
	l, h, err := ParseWatermarks(s.Watermarks)
	if err != nil {
		return 0, 0, err
	}
	if h > 1 && s.Capacity > 0 && h > float64(s.Capacity) {
		return 0, 0, fmt.Errorf("high %v exceeds capacity %v", Size(h), s.Capacity)
	}
	return l, h, nil
}

// ParseWatermarks parses "low,high": fractions in (0,1] or sizes, both of
// one kind, low below high.
func ParseWatermarks(w string) (low, high float64, err error) {
	lo, hi, ok := strings.Cut(w, ",")
	if !ok {
		return 0, 0, errors.New(`want "low,high", e.g. "0.90,0.95" or "450G,475G"`)
	}
	parse := func(v string) (float64, bool, error) {
		v = strings.TrimSpace(v)
		if f, err := strconv.ParseFloat(v, 64); err == nil && f > 0 && f <= 1 {
			return f, true, nil
		}
		sz, err := ParseSize(v)
		if err != nil || sz <= 1 {
			return 0, false, fmt.Errorf("%q is neither a fraction in (0,1] nor a size", v)
		}
		return float64(sz), false, nil
	}
	l, lf, err := parse(lo)
	if err != nil {
		return 0, 0, err
	}
	h, hf, err := parse(hi)
	if err != nil {
		return 0, 0, err
	}
	if lf != hf {
		return 0, 0, errors.New("give both as fractions or both as sizes")
	}
	if l >= h {
		return 0, 0, errors.New("low must be below high")
	}
	return l, h, nil
}

// cacheKeys names the configuration key of each cache.Config field that
// Validate can fault.
var cacheKeys = map[string]string{
	"PieceSize": "cache.piece_size", "BlockSize": "cache.block_size", "Prefetch": "cache.prefetch",
	"PrefetchMax": "cache.prefetch_max", "FetchMemory": "cache.fetch_memory", "RAM": "cache.ram", "SyncInterval": "cache.sync_interval",
	"LocalRedirect": "cache.local_redirect", "DataDirs": "cache.data_dirs", "VerifyChecksum": "space.verify_checksum",
	"DiskReadDepth": "cache.disk_read_depth",
	"Capacity":      "space.capacity", "Watermarks": "space.watermarks", "MaxAge": "space.max_age",
	"MaxFiles": "space.max_files", "PurgeInterval": "space.purge_interval", "Quotas": "quota",
	"DirStatsMax": "space.dir_stats_max", "OriginTimeout": "origin.timeout", "PinShare": "space.pin_share",
	"MaxListings": "origin.max_listings",
}

// unjoin splits an errors.Join result into its errors.
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// CacheConfig maps [cache], [space], [[quota]] and origin.timeout onto
// the cache's Config (without Origins, Policy, Logger and callbacks, which
// the server adds). It fails only on watermarks that do not parse.
func (c *Config) CacheConfig() (*cache.Config, error) {
	sp, err := c.SpaceRules()
	if err != nil {
		return nil, err
	}
	return &cache.Config{
		Dir:                c.Cache.Dir,
		DataDirs:           c.Cache.DataDirs,
		NoBlockChecksums:   !c.Cache.BlockChecksums,
		NoDirectIO:         !c.Cache.DirectIO,
		RAM:                int64(c.Cache.RAM),
		NoHugePages:        !c.Cache.HugePages,
		DiskReadDepth:      c.Cache.DiskReadDepth,
		BlockSize:          int64(c.Cache.BlockSize),
		PieceSize:          int64(c.Cache.PieceSize),
		Prefetch:           c.Cache.Prefetch,
		PrefetchMax:        c.Cache.PrefetchMax,
		FetchMemory:        int64(c.Cache.FetchMemory),
		SyncInterval:       time.Duration(c.Cache.SyncInterval),
		CompleteAfterClose: c.Cache.CompleteAfterClose,
		MaxKept:            c.Cache.MaxKept,
		LocalRedirect:      c.Cache.LocalRedirect,
		OriginTimeout:      time.Duration(c.Origin.Timeout),
		MaxListings:        c.Origin.MaxListings,
		Capacity:           int64(c.Space.Capacity),
		LowWatermark:       sp.LowWatermark,
		HighWatermark:      sp.HighWatermark,
		PurgeInterval:      time.Duration(c.Space.PurgeInterval),
		MaxAge:             sp.MaxAge,
		MaxFiles:           sp.MaxFiles,
		Quotas:             sp.Quotas,
		Pin:                sp.Pin,
		PinShare:           sp.PinShare,
		DirStatsDepth:      c.Space.DirStatsDepth,
		DirStatsMax:        c.Space.DirStatsMax,
		VerifyChecksum:     c.Space.VerifyChecksum,
	}, nil
}

// SpaceRules maps the space settings a reload may change ([space]
// watermarks, max_age, max_files, pin and the [[quota]] tables).
func (c *Config) SpaceRules() (cache.Space, error) {
	low, high, err := c.Space.ParseWatermarks()
	if err != nil {
		return cache.Space{}, fmt.Errorf("space.watermarks: %w", err)
	}
	sp := cache.Space{HighWatermark: high, LowWatermark: low, MaxAge: time.Duration(c.Space.MaxAge),
		MaxFiles: c.Space.MaxFiles, Pin: c.Space.Pin, PinShare: c.Space.PinShare,
		Capacity: int64(c.Space.Capacity), VerifyChecksum: c.Space.VerifyChecksum, PurgeInterval: time.Duration(c.Space.PurgeInterval)}
	for i, q := range c.Quota {
		cq := cache.Quota{Prefix: q.Prefix, Size: int64(q.Size), Share: q.Share}
		if q.Watermarks != "" {
			if cq.LowWatermark, cq.HighWatermark, err = ParseWatermarks(q.Watermarks); err != nil {
				return cache.Space{}, fmt.Errorf("quota[%d].watermarks: %w", i, err)
			}
		}
		sp.Quotas = append(sp.Quotas, cq)
	}
	return sp, nil
}

// keyValue returns the value of a [cache] or [space] key as written in
// error messages.
func (c *Config) keyValue(key string) (any, bool) {
	v, ok := map[string]any{
		"cache.piece_size": c.Cache.PieceSize, "cache.block_size": c.Cache.BlockSize, "cache.prefetch": c.Cache.Prefetch,
		"cache.prefetch_max": c.Cache.PrefetchMax, "cache.fetch_memory": c.Cache.FetchMemory, "cache.ram": c.Cache.RAM,
		"cache.sync_interval": c.Cache.SyncInterval, "cache.local_redirect": fmt.Sprintf("%q", c.Cache.LocalRedirect),
		"cache.data_dirs": c.Cache.DataDirs, "space.verify_checksum": fmt.Sprintf("%q", c.Space.VerifyChecksum),
		"space.capacity": c.Space.Capacity, "space.watermarks": fmt.Sprintf("%q", c.Space.Watermarks),
		"space.max_age": c.Space.MaxAge, "space.max_files": c.Space.MaxFiles, "space.purge_interval": c.Space.PurgeInterval,
		"space.dir_stats_max": c.Space.DirStatsMax, "origin.timeout": c.Origin.Timeout, "space.pin_share": c.Space.PinShare,
		"origin.max_listings": c.Origin.MaxListings,
	}[key]
	return v, ok
}
