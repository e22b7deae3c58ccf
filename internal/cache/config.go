package cache

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/hepcache/hepcache/disk"
	"github.com/hepcache/hepcache/internal/catalog"
	"github.com/hepcache/hepcache/internal/nodemem"
	"github.com/hepcache/hepcache/internal/policy"
	"github.com/hepcache/hepcache/internal/units"
	"github.com/hepcache/hepcache/origin"
)

// Defaults. A zero Config field means "use the default".
const (
	// defaultBlockSize is XCache's historical default (pfc.blocksize 1M) and
	// the unit of the bitmap: 1 MiB keeps a 5 GB file's bitmap at 640 bytes.
	defaultBlockSize = 1 << 20
	// defaultPieceSize is the stream-through granularity: a reader waits for
	// at most this much data beyond what it asked for.
	defaultPieceSize = 128 << 10
	// defaultPrefetch matches XCache's pfc.prefetch 10.
	defaultPrefetch = 10
	// defaultPrefetchMax lets a file's read-ahead widen to 128 blocks
	// while its reader keeps catching up (a far origin).
	defaultPrefetchMax = 128
	// maxPrefetch bounds prefetch and prefetch max, in blocks.
	maxPrefetch = 1024
	// RAM's default is what the node gives the process (its cgroup's
	// memory limit, else the machine's memory) less a reserve, as ZFS's
	// ARC and ScyllaDB size themselves: the node's hot data is then held
	// as XCache's page cache would hold it. The reserve is a sixteenth of
	// the node's memory, at least reserveMin, for the kernel and other
	// daemons, plus reserveProcess for hepcache outside its arena
	// (30-60 MB measured, plus its connections). Memory the node needs
	// back is handed back under pressure (pressure.go). At least minRAM.
	minRAM         = 256 << 20
	reserveMin     = 1 << 30
	reserveProcess = 256 << 20
	// maxDefaultFetchMemory bounds the default FetchMemory (half of RAM):
	// 2 GiB fill a 100 Gbit/s link at 150 ms.
	maxDefaultFetchMemory = 2 << 30
	// initialWindow is where every origin's window starts (and its
	// floor): 32 MiB fill a 150 ms link at 1.7 Gbit/s in the first round
	// trip. From 8 MiB, doubling each round trip took two more to reach
	// what 8 cold clients on one 150 ms origin read (1.25x the direct read
	// instead of 1.1x); the global fetch_memory budget bounds the bytes in
	// flight in any case.
	initialWindow = 32 << 20
	// defaultSyncInterval is how often written blocks are made durable and
	// recorded in the sidecars.
	defaultSyncInterval = 2 * time.Second
	// defaultFetchRetries is how many times a reader retries a failed block
	// fetch before returning the error.
	defaultFetchRetries = 1
	// defaultOriginTimeout bounds one origin open or read.
	defaultOriginTimeout = 60 * time.Second
	// defaultMaxListings: 16 streamed S3 listings hold about 16 MB; a
	// PROPFIND of 100k objects held about 70 MB whole.
	defaultMaxListings = 16
	// Watermarks as in XCache (pfc.diskusage 0.90 0.95) and seed 002.
	defaultHighWatermark = 0.95
	defaultLowWatermark  = 0.90
	// defaultPinShare leaves half of the cache to what is not pinned.
	defaultPinShare = 0.5
	// defaultPurgeInterval is how often usage is re-checked besides the
	// checks triggered by writes (file-system mode, age purge).
	defaultPurgeInterval = 30 * time.Second
	// defaultDirStatsDepth groups per-directory statistics by the first
	// two path components (/store/mc, /store/data, /store/user): the
	// level at which CMS and ATLAS namespaces split by activity.
	defaultDirStatsDepth = 2
	// defaultDirStatsMax keeps the per-directory metrics at a cardinality
	// Prometheus handles without notice.
	defaultDirStatsMax = 1000
)

// Config configures a Cache. Use DefaultConfig and change what you need.
type Config struct {
	// Dir is the cache directory. Required.
	Dir string
	// Origins resolves Request.Origin ("" for the default origin) to an
	// Origin; it also enforces the forwarding allow-list. Required.
	Origins origin.Resolver
	// BlockSize is the unit of caching and of the presence bitmap, in bytes.
	// Default 1 MiB. Larger blocks mean smaller sidecars but more bytes
	// fetched for a small random read. Must be a multiple of PieceSize.
	BlockSize int64
	// PieceSize is the unit in which a block is fetched and streamed to
	// waiting readers, in bytes. Default 128 KiB; a multiple of 4 KiB.
	PieceSize int64
	// Prefetch is the number of blocks fetched ahead of the reader while a
	// file is open; 0 (or negative) turns read-ahead off, as prefetch = 0
	// does in the configuration file. DefaultConfig sets 10, XCache's
	// pfc.prefetch.
	Prefetch int
	// PrefetchMax is how far the read-ahead window of a file may widen when
	// its reader keeps catching up with blocks still in flight (a
	// high-latency origin needs more blocks in flight than a near one).
	// Default Prefetch: a fixed window of Prefetch blocks, as XCache.
	// FetchMemory bounds the bytes in flight in any case.
	PrefetchMax int
	// RAM is the memory that holds blocks, in bytes: the blocks being
	// fetched and a RAM cache of recently used blocks (XCache's pfc.ram,
	// which bounds only the former), in one arena of whole blocks mapped
	// at start-up (package blockstore). Default: the node's memory (the
	// cgroup's limit, else the machine's) less a reserve of a sixteenth of
	// it, at least 1 GiB, and 256 MiB for the process outside the arena;
	// at least 256 MiB and twice FetchMemory when that is set. At least 16
	// blocks; never more than the node's memory.
	RAM int64
	// RAMFrom says where RAM came from, for logs and `hepcache check`;
	// set by EnsureDefaults.
	RAMFrom string
	// Node is where the node's memory is read (nodemem). Zero: this node.
	Node nodemem.Node
	// DiskReadDepth is how many blocks a reader of a file on disk keeps in
	// flight from the disk (read ahead of it into RAM, each checked).
	// Default 0: sized to each data disk, 16 on solid state (NVMe, SSD,
	// tmpfs), 8 on rotational disks. Each disk also bounds its reads
	// ahead to four readers' worth.
	DiskReadDepth int
	// NoPressureWatch keeps RAM whatever the node's memory pressure.
	// Default false: memory is handed back when the node runs short
	// (pressure.go) and taken again when it is free.
	NoPressureWatch bool
	// NoHugePages does not ask for transparent huge pages for RAM
	// (blockstore.Config.NoHugePages). Default false.
	NoHugePages bool
	// FetchMemory is the part of RAM that blocks in flight from origins
	// may take, in bytes; a quarter of it is reserved for demand reads.
	// Default half of RAM, at most 2 GiB; at most three quarters of it. Raise it (and
	// RAM) for fast high-latency origins (bytes in flight = bandwidth x
	// RTT: 10 Gbit/s over 150 ms is about 190 MB); less means less
	// parallelism per file when many files are cold at once.
	FetchMemory int64
	// ShedAfter bounds, in bytes, the block fetches that clients wait for
	// and that are queued for want of fetch memory (an origin's window or
	// FetchMemory full): past it, an open of a file the cache does not
	// hold whole is refused as busy (backend.ErrOverloaded: HTTP 429 with
	// Retry-After, root:// kXR_wait) instead of queueing behind them, so
	// that the client goes to another cache (a Pelican client tries the
	// next the director listed) or comes back; files held whole are
	// served. Default FetchMemory (as much waiting as in flight);
	// negative: never refused.
	ShedAfter int64
	// NoDirectIO writes and reads data files through the page cache
	// instead of with O_DIRECT. Default false: direct I/O wherever the
	// file system allows it (one that refuses it falls back on its own).
	NoDirectIO bool
	// SyncInterval is how often written blocks are synced and recorded in
	// their sidecars. Default 2 s. Shorter loses less work in a crash at
	// the expense of more fsyncs.
	SyncInterval time.Duration
	// CompleteAfterClose keeps downloading a file after its last client
	// closed, until it is complete. Default false (the partial file stays
	// and the next open resumes it).
	CompleteAfterClose bool
	// CloseLinger is how long a file stays open in the cache after its
	// last client closed it, so that a new open meanwhile takes it as it
	// is (blocks still being written included) instead of waiting for its
	// final sync (linger.go). Default 5 s; negative: none.
	CloseLinger time.Duration
	// MaxLingering bounds the files lingering at once: each keeps a
	// descriptor of its data file, and the oldest lingering files end
	// their linger early beyond it. Default 1024 (the server derives it
	// from its descriptor budget).
	MaxLingering int
	// MaxKept bounds the closed files whose state stays in memory after
	// their last client and their final sync (kept.go): an open of one
	// of them reads no sidecar, and the access records of its hits are
	// written at most once a minute. About 2 KB each (a small file's).
	// Default RAM/128 KiB, between 4,096 and 2^20: at most 1.6 % of the
	// RAM cache; negative: none (each open reads its sidecar, each close
	// writes it).
	MaxKept int
	// FetchRetries is how often a reader retries a failed block fetch.
	// Default 1; negative means no retry.
	FetchRetries int
	// OriginTimeout bounds one origin open or piece read. Default 60 s.
	OriginTimeout time.Duration
	// MaxListings bounds the directory listings in progress at once
	// (root:// dirlist, PROPFIND, GET of a directory): each holds a page
	// of the origin's answer (S3: 1000 entries) while it streams, or all
	// of it from an origin that answers a listing whole. More wait for
	// one to end (bounded by their context). Default 16; at the expense
	// of waiting listings when many run at once.
	MaxListings int
	// Capacity is the space the cache may fill, in bytes. Zero (default):
	// the size of the file system holding Dir, with usage as that file
	// system reports it (so other data on it counts too).
	Capacity int64
	// HighWatermark and LowWatermark: when usage passes High, whole files
	// are evicted, least recently used first, until usage is under Low.
	// Values up to 1 are fractions of the capacity, larger values are
	// bytes. Defaults 0.95 and 0.90.
	HighWatermark, LowWatermark float64
	// PurgeInterval is how often usage is checked besides the checks that
	// writes trigger, and how often MaxAge is applied. Default 30 s.
	PurgeInterval time.Duration
	// MaxAge evicts files not accessed for this long. Zero (default): off.
	MaxAge time.Duration
	// MaxFiles bounds the number of cached files (inodes run out before
	// bytes with many small files). Zero (default): no limit.
	MaxFiles int
	// Quotas partition the space between path prefixes (a multi-VO site):
	// the files under a quota are purged, least recently used first,
	// within the quota's own watermarks before the global purge runs. A
	// file counts against the quota with the longest matching prefix.
	// Default none.
	Quotas []Quota
	// Pin lists path prefixes whose files are never evicted by purge (an
	// admin's Evict still removes them). Pinned bytes count towards the
	// usage; if they alone pass the high watermark, purge can not get
	// under it and says so. Default none.
	Pin []string
	// PinShare is the most of the capacity (or of the file systems) that
	// pinned files may hold; a file that would pin more is cached unpinned
	// (purge may evict it), with a warning and PinsRefused counted, so that
	// pins (prestaged by anyone who may read there) never crowd out the
	// rest of the cache. Default 0.5.
	PinShare float64
	// DirStatsDepth is how many leading path components name a directory
	// in the per-directory statistics (cached bytes and files, opens,
	// bytes served): 2 groups /store/mc/... under /store/mc. Default 2;
	// negative turns the statistics off.
	DirStatsDepth int
	// DirStatsMax bounds the directories tracked (metrics cardinality);
	// further ones are counted under "(other)". Default 1000.
	DirStatsMax int
	// Policy holds the namespace and name-mapping rules. Nil: cache every
	// path as it is, immutable.
	Policy *policy.Policy
	// VerifyChecksum is the algorithm ("adler32" or "crc32c") whose origin
	// value a completed file is compared with; a mismatch drops the cached
	// copy. Default "adler32"; "none" skips asking the origin (the
	// checksums are still computed and served).
	VerifyChecksum string
	// FS is the file system holding Dir. Default disk.OS{}.
	FS disk.FS
	// Logger receives operational messages. Default slog.Default().
	Logger *slog.Logger
	// NoBlockChecksums turns off the check of blocks read back from disk
	// against their recorded CRC32C (blockcheck.go). Default false: on.
	NoBlockChecksums bool
	// DataDirs are the directories holding the data files, one per disk
	// of a JBOD node; Dir keeps the sidecars. A new file goes to the disk
	// with the most free space; a disk that fails is taken out of service
	// (disks.go). Default: none, the data lives under Dir.
	DataDirs []string
	// LocalRedirect is the path under which clients see this cache's data
	// directory (Dir/data), e.g. "/mnt/cache-space/data" on worker nodes
	// that mount the cache space (seed 000). When set, an open of a file
	// that is complete and checksummed in the cache, by a client that can
	// follow a redirect to a local file (backend.Request.FollowsFileRedirect),
	// fails with a *backend.RedirectError to
	// "file://localhost" + LocalRedirect + "/" + the file's path under
	// Dir/data, so that the client reads the file itself and the proxy
	// serves none of its bytes. Default "": off. Clients without the mount
	// cannot open the target (docs/xrootd-frontend.md).
	LocalRedirect string
	// OnAccess, if set, is called once per closed file with its access
	// record (the access log). It must not block.
	OnAccess func(AccessRecord)

	// now is the clock; a test seam.
	now func() time.Time
	// statfs measures the file system; a test seam.
	statfs func(dir string) (total, used int64, err error)
	// loadPace, if set, is called between batches of the catalogue's
	// load; a test seam (load.go).
	loadPace loadPace
}

// Quota is the space allowed to the files under one path prefix.
type Quota = catalog.Quota

// DefaultConfig returns a Config with every default filled in, except the
// required Dir and Origins.
func DefaultConfig() *Config {
	c := &Config{Prefetch: defaultPrefetch, PrefetchMax: defaultPrefetchMax}
	c.EnsureDefaults()
	return c
}

// EnsureDefaults fills zero fields with their defaults.
func (c *Config) EnsureDefaults() {
	if c.BlockSize == 0 {
		c.BlockSize = defaultBlockSize
	}
	if c.PieceSize == 0 {
		c.PieceSize = defaultPieceSize
		if c.BlockSize < c.PieceSize {
			c.PieceSize = c.BlockSize
		}
	}
	if c.PrefetchMax == 0 {
		c.PrefetchMax = max(c.Prefetch, 0)
	}
	if c.RAM == 0 {
		c.RAM, c.RAMFrom = defaultRAM(c.Node)
		if 2*c.FetchMemory > c.RAM {
			c.RAM, c.RAMFrom = 2*c.FetchMemory, "twice fetch_memory"
		}
	} else if c.RAMFrom == "" {
		c.RAMFrom = "configured"
	}
	if c.FetchMemory == 0 {
		c.FetchMemory = min(c.RAM/2, maxDefaultFetchMemory)
	}
	if c.SyncInterval == 0 {
		c.SyncInterval = defaultSyncInterval
	}
	if c.CloseLinger == 0 {
		c.CloseLinger = defaultCloseLinger
	}
	if c.MaxLingering <= 0 {
		c.MaxLingering = defaultMaxLingering
	}
	if c.MaxKept == 0 {
		c.MaxKept = defaultMaxKept(c.RAM)
	}
	if c.FetchRetries == 0 {
		c.FetchRetries = defaultFetchRetries
	}
	if c.OriginTimeout == 0 {
		c.OriginTimeout = defaultOriginTimeout
	}
	if c.MaxListings == 0 {
		c.MaxListings = defaultMaxListings
	}
	if c.FS == nil {
		c.FS = disk.OS{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.VerifyChecksum == "" {
		c.VerifyChecksum = "adler32"
	}
	if c.HighWatermark == 0 {
		c.HighWatermark = defaultHighWatermark
	}
	if c.LowWatermark == 0 {
		c.LowWatermark = defaultLowWatermark
	}
	if c.PinShare == 0 {
		c.PinShare = defaultPinShare
	}
	if c.PurgeInterval == 0 {
		c.PurgeInterval = defaultPurgeInterval
	}
	for i := range c.Quotas {
		q := &c.Quotas[i]
		if q.HighWatermark == 0 {
			q.HighWatermark = defaultHighWatermark
			if c.HighWatermark <= 1 {
				q.HighWatermark = c.HighWatermark
			}
		}
		if q.LowWatermark == 0 {
			q.LowWatermark = defaultLowWatermark
			if c.LowWatermark <= 1 {
				q.LowWatermark = c.LowWatermark
			}
		}
	}
	if c.DirStatsDepth == 0 {
		c.DirStatsDepth = defaultDirStatsDepth
	}
	if c.DirStatsMax == 0 {
		c.DirStatsMax = defaultDirStatsMax
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.statfs == nil {
		c.statfs = statfs
	}
}

// FieldError is a problem with one field of a Config, so that the
// configuration file can name its key.
type FieldError struct {
	Field string // the Config field, e.g. "PieceSize"
	Err   error
}

func (e *FieldError) Error() string { return e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// Validate reports every problem with the configuration in one error; each
// is a *FieldError naming the field.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field string, err error) { errs = append(errs, &FieldError{Field: field, Err: err}) }
	if c.Dir == "" {
		bad("Dir", errors.New("cache dir: required"))
	}
	if c.Origins == nil {
		bad("Origins", errors.New("origins: required"))
	}
	if c.PieceSize <= 0 || c.PieceSize%4096 != 0 {
		bad("PieceSize", fmt.Errorf("piece size %d: must be a positive multiple of 4096", c.PieceSize))
	}
	if c.BlockSize <= 0 || c.PieceSize > 0 && c.BlockSize%c.PieceSize != 0 {
		bad("BlockSize", fmt.Errorf("block size %d: must be a positive multiple of the piece size %d", c.BlockSize, c.PieceSize))
	}
	if c.BlockSize > 1<<30 {
		bad("BlockSize", fmt.Errorf("block size %d: at most 1 GiB", c.BlockSize))
	}
	if c.Prefetch > maxPrefetch {
		bad("Prefetch", fmt.Errorf("prefetch %d: at most %d blocks", c.Prefetch, maxPrefetch))
	}
	if c.Prefetch > 0 && (c.PrefetchMax < c.Prefetch || c.PrefetchMax > maxPrefetch) {
		bad("PrefetchMax", fmt.Errorf("prefetch max %d: prefetch (%d) to %d blocks", c.PrefetchMax, c.Prefetch, maxPrefetch))
	}
	if c.BlockSize > 0 && c.RAM < 16*c.BlockSize {
		bad("RAM", fmt.Errorf("ram %d: at least 16 blocks (%d)", c.RAM, 16*c.BlockSize))
	}
	if l, err := c.Node.Limit(); err == nil && c.RAM > l.Bytes {
		bad("RAM", fmt.Errorf("ram %s is more than this node's memory, %s (%s): the arena could not be held; leave ram at 0 for %s",
			units.Format(c.RAM), units.Format(l.Bytes), l.From, func() string { r, _ := defaultRAM(c.Node); return units.Format(r) }()))
	}
	if c.DiskReadDepth < 0 || c.DiskReadDepth > 256 {
		bad("DiskReadDepth", fmt.Errorf("disk read depth %d: 0 (sized to the disk) to 256 blocks", c.DiskReadDepth))
	}
	if c.FetchMemory < 4*c.PieceSize {
		bad("FetchMemory", fmt.Errorf("fetch memory %d: at least 4 pieces (%d)", c.FetchMemory, 4*c.PieceSize))
	}
	if c.FetchMemory > c.RAM/4*3 {
		bad("FetchMemory", fmt.Errorf("fetch memory %d: at most three quarters of ram (%d): the rest holds the blocks being read", c.FetchMemory, c.RAM/4*3))
	}
	if c.SyncInterval < 0 {
		bad("SyncInterval", fmt.Errorf("sync interval %v: must not be negative", c.SyncInterval))
	}
	switch c.VerifyChecksum {
	case "adler32", "crc32c", "none":
	default:
		bad("VerifyChecksum", fmt.Errorf("verify checksum %q: want adler32, crc32c or none", c.VerifyChecksum))
	}
	if c.Capacity < 0 {
		bad("Capacity", fmt.Errorf("capacity %d: must not be negative", c.Capacity))
	}
	if c.LowWatermark <= 0 || c.HighWatermark <= 0 || c.LowWatermark >= c.HighWatermark {
		bad("Watermarks", fmt.Errorf("watermarks low %v, high %v: want 0 < low < high", c.LowWatermark, c.HighWatermark))
	}
	if c.PinShare < 0 || c.PinShare > 1 {
		bad("PinShare", fmt.Errorf("pin share %v: a fraction of the capacity, more than 0 and at most 1", c.PinShare))
	}
	if (c.LowWatermark <= 1) != (c.HighWatermark <= 1) {
		bad("Watermarks", fmt.Errorf("watermarks low %v, high %v: both fractions or both sizes", c.LowWatermark, c.HighWatermark))
	}
	if c.HighWatermark > 1 && c.Capacity > 0 && c.HighWatermark > float64(c.Capacity) {
		bad("Watermarks", fmt.Errorf("high watermark %v bytes exceeds the capacity %d", c.HighWatermark, c.Capacity))
	}
	if c.MaxAge < 0 {
		bad("MaxAge", fmt.Errorf("max age %v: must not be negative", c.MaxAge))
	}
	if c.MaxFiles < 0 {
		bad("MaxFiles", fmt.Errorf("max files %d: must not be negative", c.MaxFiles))
	}
	if c.PurgeInterval < 0 {
		bad("PurgeInterval", fmt.Errorf("purge interval %v: must not be negative", c.PurgeInterval))
	}
	for _, err := range validSpaceRules(c.Quotas, c.Pin) {
		bad("Quotas", err)
	}
	if c.DirStatsMax < 0 {
		bad("DirStatsMax", fmt.Errorf("dir stats max %d: must not be negative", c.DirStatsMax))
	}
	if c.OriginTimeout < 0 {
		bad("OriginTimeout", fmt.Errorf("origin timeout %v: must not be negative", c.OriginTimeout))
	}
	if c.MaxListings < 0 {
		bad("MaxListings", fmt.Errorf("max listings %d: must not be negative", c.MaxListings))
	}
	seen := map[string]bool{}
	for _, d := range c.DataDirs {
		cd := filepath.Clean(d)
		if d == "" || !filepath.IsAbs(d) || seen[cd] {
			bad("DataDirs", fmt.Errorf("data dir %q: want distinct absolute paths", d))
		}
		seen[cd] = true
	}
	if len(c.DataDirs) > 0 && c.LocalRedirect != "" {
		bad("LocalRedirect", errors.New("local redirect: not available with data dirs (clients mount one cache space)"))
	}
	if err := validLocalRedirect(c.LocalRedirect); err != nil {
		bad("LocalRedirect", err)
	}
	return errors.Join(errs...)
}

// defaultRAM is the node's memory less the reserve, and where that came
// from.
func defaultRAM(n nodemem.Node) (int64, string) {
	l, err := n.Limit()
	if err != nil {
		return minRAM, fmt.Sprintf("the node's memory cannot be read (%v)", err)
	}
	reserve := Reserve(l.Bytes)
	ram := max(minRAM, l.Bytes-reserve)
	return ram, fmt.Sprintf("the node's %s (%s) less a reserve of %s", units.Format(l.Bytes), l.From, units.Format(reserve))
}

// Reserve is the memory a node of mem bytes keeps outside the default RAM.
func Reserve(mem int64) int64 { return max(reserveMin, mem/16) + reserveProcess }
