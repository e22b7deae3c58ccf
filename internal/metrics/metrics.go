// Package metrics exposes hepcache's counters in the Prometheus text format
// (/metrics) and its health (/health). It keeps no copy of the cache's
// counters: a scrape reads the cache's atomics and usage directly, so the
// registry costs a few hundred bytes per series and nothing per request
// beyond an atomic add.
package metrics

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults. A zero Config field means "use the default".
const (
	// defaultHealthWindow: an origin or disk error makes the cache
	// "degraded" for this long, long enough for a load balancer to see it.
	defaultHealthWindow = 5 * time.Minute
	// defaultProbeInterval: the cache directory is probed for writability
	// at most this often, however often /health is polled.
	defaultProbeInterval = 5 * time.Second
	// defaultOriginLogInterval: an origin's failures make a log line at
	// most this often.
	defaultOriginLogInterval = time.Minute
)

// CacheSource is what the registry reads from the cache at each scrape:
// the figures it defines here, so that metrics depends on no cache type
// (cachemetrics adapts the cache).
type CacheSource interface {
	CacheFigures() CacheFigures
}

// CacheFigures are the cache's counters (since start) and occupancy.
type CacheFigures struct {
	Hits, PartialHits, Misses, OpenErrors, LocalRedirects int64
	BytesHit, BytesMissed, BytesBypassed                  int64
	BytesFetched, PrefetchBytes                           int64
	BlocksFetched, FetchErrors, CoalescedWaits            int64
	WriteErrors, SyncErrors                               int64
	OpenFiles, Evictions, EvictedBytes, PurgeRuns         int64
	ChecksumFailures, Revalidations                       int64
	BlocksChecked, BlocksCorrupt, LinksRefused            int64
	PinsRefused                                           int64
	DisksFailed                                           int64
	// LastPurgeFiles and LastPurgeNanos describe the latest purge that
	// had something to do.
	LastPurgeFiles, LastPurgeNanos int64
	// OpensShed are opens refused as overloaded; DigestsComputed the
	// files whose md5, sha1, sha256 and crc32 were computed from the
	// cached bytes.
	OpensShed, DigestsComputed int64
	// KeptFiles are the closed files whose state the cache keeps in
	// memory (cache.Config.MaxKept).
	KeptFiles int64
	// FetchInFlight is the fetch memory in use (bytes requested from
	// origins and not yet on disk); FetchWaiting the bytes of fetches
	// clients wait for, queued for want of it.
	FetchInFlight, FetchWaiting int64
	// RAM is the block store: its size, occupancy and counters.
	RAM RAMFigures
	// FetchWindows are the per-origin fetch windows, by origin name.
	FetchWindows []FetchWindow
	// Occupancy (UsageErr set when it could not be measured).
	Used, Total, High, Low int64
	Files, Bytes           int64
	UsageErr               string
	// Index is the catalogue of cached files.
	Index IndexFigures
}

// IndexFigures describe the catalogue of cached files, which loads in the
// background after a start.
type IndexFigures struct {
	// Loading: not complete yet (the cache serves; purge waits). Loaded
	// of Total files so far; Counting: Total counts the files found so far
	// (a load from the sidecars), not all.
	Loading, Counting bool
	Loaded, Total     int64
	// Files catalogued, and the catalogue's memory in bytes.
	Files, Bytes int64
}

// RAMFigures describe the cache's RAM (cache.ram): the arena holding blocks
// in flight and the RAM block cache.
type RAMFigures struct {
	Size, Cached, Filling, Pinned, Touched int64 // bytes
	// Limit is the RAM the cache may use now (Size, less what memory
	// pressure made it hand back); HandedBack counts bytes handed back.
	Limit, HandedBack int64
	// Resident is the arena's part of the RSS (-1: unknown); Outside is
	// the RSS beyond it, read right after it (-1: unknown).
	Resident, Outside            int64
	Hits, Misses, Evictions      int64 // block lookups and evictions
	DiskReads, DiskReadBytes     int64 // blocks read back from disk (each checked)
	DirectWrites, BufferedWrites int64 // blocks written to disk
}

// FetchWindow is one origin's fetch window: what the cache learnt about
// the origin's bandwidth-delay product and what it keeps requested.
type FetchWindow struct {
	Origin           string
	Window, InFlight int64
	RateBps          float64 // delivery rate estimate
	MinRTT           float64 // seconds; 0 until a read completed
	Plateaued        bool    // the window stopped growing at ~2 BDP
}

// Config configures a Registry.
type Config struct {
	// Cache is the cache whose counters and usage are exported. Nil: only
	// request, client and origin metrics, until SetCache is called (the
	// cache is usually created after the registry, whose WrapResolver it
	// uses).
	Cache CacheSource
	// CacheDir is probed by /health: a cache directory where a file cannot
	// be created makes hepcache "down". Empty: no probe.
	CacheDir string
	// HealthWindow is how long an origin or disk error keeps the cache
	// "degraded". Default 5 min.
	HealthWindow time.Duration
	// ProbeInterval is the least time between two writability probes of
	// CacheDir. Default 5 s.
	ProbeInterval time.Duration
	// Logger receives operational messages. Default slog.Default().
	Logger *slog.Logger
	// OriginLogInterval is the least time between two log lines about one
	// origin's failures: the first failure is logged at once, the next
	// line comes with the count of failures not logged meanwhile. Default
	// 1 min (a dead origin fails every request of every client).
	OriginLogInterval time.Duration

	// Now is the clock (health windows, snapshots). Default time.Now.
	Now func() time.Time
}

// EnsureDefaults fills zero fields with their defaults.
func (c *Config) EnsureDefaults() {
	if c.HealthWindow == 0 {
		c.HealthWindow = defaultHealthWindow
	}
	if c.ProbeInterval == 0 {
		c.ProbeInterval = defaultProbeInterval
	}
	if c.OriginLogInterval == 0 {
		c.OriginLogInterval = defaultOriginLogInterval
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate reports every problem with the configuration in one error.
func (c *Config) Validate() error {
	var errs []error
	if c.HealthWindow < 0 {
		errs = append(errs, fmt.Errorf("health window %v: must not be negative", c.HealthWindow))
	}
	if c.ProbeInterval < 0 {
		errs = append(errs, fmt.Errorf("probe interval %v: must not be negative", c.ProbeInterval))
	}
	if c.OriginLogInterval < 0 {
		errs = append(errs, fmt.Errorf("origin log interval %v: must not be negative", c.OriginLogInterval))
	}
	return errors.Join(errs...)
}

// Registry holds hepcache's own metrics and reads the cache's at scrape
// time. Safe for concurrent use.
type Registry struct {
	cfg     Config
	started time.Time
	clients Clients
	cache   atomic.Pointer[CacheSource]
	space   atomic.Pointer[func() SpaceFigures]
	disks   atomic.Pointer[func() []DiskFigure]
	// prestage reports the prestager (prestage.go).
	prestage atomic.Pointer[func() PrestageFigures]
	// descriptors reports the descriptor budget (descriptors.go).
	descriptors atomic.Pointer[func() DescriptorFigures]
	// originLogEvery is Config.OriginLogInterval (nanoseconds), replaced
	// by SetOriginLogInterval.
	originLogEvery atomic.Int64

	// mu protects requests, origins and funcs (the maps, not the atomics
	// they point to).
	mu       sync.RWMutex
	requests map[requestKey]*atomic.Int64
	origins  map[string]*originStats
	funcs    []funcMetric

	// wrapped caches the decorators of WrapResolver, one per Origin.
	wrapped sync.Map

	// healthMu protects the fields below it.
	healthMu  sync.Mutex
	diskErrs  int64
	diskErrAt time.Time
	probeAt   time.Time
	probeErr  error
}

type requestKey struct{ protocol, operation, outcome string }

type funcMetric struct {
	name, help, typ string
	fn              func() int64
}

// New returns a Registry.
func New(cfg *Config) (*Registry, error) {
	c := *cfg
	c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("metrics config: %w", err)
	}
	r := &Registry{
		cfg:      c,
		started:  c.Now(),
		requests: map[requestKey]*atomic.Int64{},
		origins:  map[string]*originStats{},
	}
	r.clients.now = c.Now
	r.originLogEvery.Store(int64(c.OriginLogInterval))
	if c.Cache != nil {
		r.SetCache(c.Cache)
	}
	return r, nil
}

// SetOriginLogInterval replaces Config.OriginLogInterval (a reload);
// d <= 0 keeps the one in force.
func (r *Registry) SetOriginLogInterval(d time.Duration) {
	if d > 0 {
		r.originLogEvery.Store(int64(d))
	}
}

// SetCache sets (or replaces) the cache whose counters are exported.
func (r *Registry) SetCache(c CacheSource) { r.cache.Store(&c) }

// source returns the cache, or nil.
func (r *Registry) source() CacheSource {
	if p := r.cache.Load(); p != nil {
		return *p
	}
	return nil
}

// Clients returns the tracker the front ends register connections with.
func (r *Registry) Clients() *Clients { return &r.clients }

// ObserveRequest counts one request of a front end: protocol ("root",
// "http", ...), operation ("get", "open", "stat", ...) and its outcome,
// derived from err (see Outcome). Safe for concurrent use; does not block.
func (r *Registry) ObserveRequest(protocol, operation string, err error) {
	k := requestKey{protocol, operation, Outcome(err)}
	r.mu.RLock()
	c := r.requests[k]
	r.mu.RUnlock()
	if c == nil {
		r.mu.Lock()
		if c = r.requests[k]; c == nil {
			c = new(atomic.Int64)
			r.requests[k] = c
		}
		r.mu.Unlock()
	}
	c.Add(1)
}

// RequestCount is the number of requests of one protocol, operation and
// outcome (ObserveRequest).
type RequestCount struct {
	Protocol, Operation, Outcome string
	N                            int64
}

// Requests returns the request counts so far, in no order.
func (r *Registry) Requests() []RequestCount {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]RequestCount, 0, len(r.requests))
	for k, c := range r.requests {
		out = append(out, RequestCount{Protocol: k.protocol, Operation: k.operation, Outcome: k.outcome, N: c.Load()})
	}
	return out
}

// CounterFunc adds a counter whose value fn returns at scrape time (e.g.
// the access log's dropped records). name must follow the conventions
// (hepcache_ prefix, _total suffix). Register before serving.
func (r *Registry) CounterFunc(name, help string, fn func() int64) {
	r.addFunc(name, help, "counter", fn)
}

// GaugeFunc adds a gauge whose value fn returns at scrape time.
func (r *Registry) GaugeFunc(name, help string, fn func() int64) {
	r.addFunc(name, help, "gauge", fn)
}

func (r *Registry) addFunc(name, help, typ string, fn func() int64) {
	if fn == nil || !validName(name) {
		panic(fmt.Sprintf("metrics: bad metric %q", name))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.funcs {
		if f.name == name {
			panic(fmt.Sprintf("metrics: %s registered twice", name))
		}
	}
	r.funcs = append(r.funcs, funcMetric{name: name, help: help, typ: typ, fn: fn})
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if !(c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// Snapshot is the cache's figures at one instant, shared by /metrics, the
// dashboard and /health so that they always agree.
type Snapshot struct {
	Time time.Time `json:"time"`
	// Opens by outcome and failed opens.
	Hits        int64 `json:"hits"`
	PartialHits int64 `json:"partial_hits"`
	Misses      int64 `json:"misses"`
	OpenErrors  int64 `json:"open_errors"`
	// Bytes served to clients by source.
	BytesHit      int64 `json:"bytes_hit"`
	BytesMissed   int64 `json:"bytes_missed"`
	BytesBypassed int64 `json:"bytes_bypassed"`
	// Bytes read from origins, of which prefetched.
	BytesFetched  int64 `json:"bytes_fetched"`
	PrefetchBytes int64 `json:"prefetch_bytes"`
	// Occupancy in bytes; UsageErr is set when it could not be measured.
	Used      int64  `json:"used_bytes"`
	Total     int64  `json:"total_bytes"`
	High      int64  `json:"high_watermark_bytes"`
	Low       int64  `json:"low_watermark_bytes"`
	Files     int64  `json:"files"`
	Cached    int64  `json:"cached_bytes"`
	UsageErr  string `json:"usage_error,omitempty"`
	OpenFiles int64  `json:"open_files"`
	Evictions int64  `json:"evictions"`
	Evicted   int64  `json:"evicted_bytes"`
	// Clients connected now, over all protocols.
	Clients int64 `json:"clients"`
}

// BytesServed is the total of bytes sent to clients.
func (s Snapshot) BytesServed() int64 { return s.BytesHit + s.BytesMissed + s.BytesBypassed }

// Snapshot reads the current figures.
func (r *Registry) Snapshot() Snapshot {
	s := Snapshot{Time: r.cfg.Now(), Clients: int64(r.clients.Len())}
	src := r.source()
	if src == nil {
		return s
	}
	f := src.CacheFigures()
	s.Hits, s.PartialHits, s.Misses, s.OpenErrors = f.Hits, f.PartialHits, f.Misses, f.OpenErrors
	s.BytesHit, s.BytesMissed, s.BytesBypassed = f.BytesHit, f.BytesMissed, f.BytesBypassed
	s.BytesFetched, s.PrefetchBytes = f.BytesFetched, f.PrefetchBytes
	s.OpenFiles, s.Evictions, s.Evicted = f.OpenFiles, f.Evictions, f.EvictedBytes
	s.UsageErr = f.UsageErr
	s.Used, s.Total, s.High, s.Low = f.Used, f.Total, f.High, f.Low
	s.Files, s.Cached = f.Files, f.Bytes
	return s
}

// Handler serves /metrics in the Prometheus text exposition format 0.0.4.
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if req.Method == http.MethodHead {
			return
		}
		if _, err := r.WriteTo(w); err != nil {
			r.cfg.Logger.Debug("metrics scrape aborted", "err", err)
		}
	})
}

// WriteTo writes every metric in the text exposition format.
func (r *Registry) WriteTo(w io.Writer) (int64, error) {
	e := &expWriter{}
	s := r.Snapshot()
	if src := r.source(); src != nil {
		st := src.CacheFigures()
		e.family("hepcache_opens_total", "counter", "File opens by outcome: hit (complete in cache), partial (some blocks cached), miss (none).")
		e.sample("hepcache_opens_total", `result="hit"`, s.Hits)
		e.sample("hepcache_opens_total", `result="partial"`, s.PartialHits)
		e.sample("hepcache_opens_total", `result="miss"`, s.Misses)
		e.counter("hepcache_open_errors_total", "File opens that failed.", s.OpenErrors)
		e.counter("hepcache_local_redirects_total", "Opens of complete files answered with a redirect to the client's own copy in the cache space it mounts (cache.local_redirect); the client read the file without the cache.", st.LocalRedirects)
		e.family("hepcache_served_bytes_total", "counter", "Bytes sent to clients by source: hit (from the cache, RAM or disk), miss (fetched for the read), bypass (read straight from the origin after a disk error).")
		e.sample("hepcache_served_bytes_total", `source="hit"`, s.BytesHit)
		e.sample("hepcache_served_bytes_total", `source="miss"`, s.BytesMissed)
		e.sample("hepcache_served_bytes_total", `source="bypass"`, s.BytesBypassed)
		e.counter("hepcache_origin_fetched_bytes_total", "Bytes read from origins into the cache, prefetch included.", s.BytesFetched)
		e.counter("hepcache_prefetch_bytes_total", "Bytes read from origins ahead of any client (prefetch).", s.PrefetchBytes)
		e.counter("hepcache_blocks_fetched_total", "Blocks fetched from origins.", st.BlocksFetched)
		e.counter("hepcache_fetch_errors_total", "Block fetches from origins that failed.", st.FetchErrors)
		e.counter("hepcache_coalesced_waits_total", "Reads that waited on a fetch another read had started (one origin fetch served several clients).", st.CoalescedWaits)
		e.counter("hepcache_disk_write_errors_total", "Failed writes to the cache disk; each turns its readers into bypass reads.", st.WriteErrors)
		e.counter("hepcache_disk_sync_errors_total", "Failed syncs or sidecar writes.", st.SyncErrors)
		e.counter("hepcache_evictions_total", "Files removed from the cache by purge or evict.", s.Evictions)
		e.counter("hepcache_evicted_bytes_total", "Bytes of the files removed from the cache.", s.Evicted)
		e.counter("hepcache_purge_runs_total", "Purges that evicted something.", st.PurgeRuns)
		e.gauge("hepcache_purge_last_files", "Files the latest purge evicted.", st.LastPurgeFiles)
		e.family("hepcache_purge_last_seconds", "gauge", "How long the latest purge took.")
		e.sampleFloat("hepcache_purge_last_seconds", "", float64(st.LastPurgeNanos)/1e9)
		e.counter("hepcache_checksum_failures_total", "Complete files whose checksum differed from the origin's (the copy was dropped).", st.ChecksumFailures)
		e.counter("hepcache_revalidations_total", "Cached copies dropped because the origin's file changed.", st.Revalidations)
		e.counter("hepcache_blocks_checked_total", "Blocks read back from disk and found equal to their recorded CRC32C (every read from disk is checked).", st.BlocksChecked)
		e.counter("hepcache_blocks_corrupt_total", "Blocks read back from disk that failed their CRC32C check; dropped and fetched again.", st.BlocksCorrupt)
		e.counter("hepcache_links_refused_total", "Symbolic links found in the cache directory; never followed, removed.", st.LinksRefused)
		e.counter("hepcache_pins_refused_total", "Files in pinned namespaces left unpinned because pinned files held space.pin_share of the capacity.", st.PinsRefused)
		e.counter("hepcache_disks_failed_total", "Data disks taken out of service (I/O errors, read-only, unmounted).", st.DisksFailed)
		e.gauge("hepcache_open_files", "Files with at least one client.", s.OpenFiles)
		e.gauge("hepcache_kept_files", "Closed files whose state stays in memory: their next open reads no sidecar (cache.max_kept, docs/deployment.md).", st.KeptFiles)
		e.gauge("hepcache_fetch_inflight_bytes", "Bytes requested from origins and not yet on disk (fetch memory in use, by design).", st.FetchInFlight)
		e.gauge("hepcache_fetch_waiting_bytes", "Bytes of block fetches clients wait for, queued for want of fetch memory; past cache.fetch_memory new downloads are shed.", st.FetchWaiting)
		e.counter("hepcache_opens_shed_total", "Opens of files not held whole refused as overloaded (HTTP 429, root:// kXR_wait) while fetches were queued beyond the bound.", st.OpensShed)
		e.counter("hepcache_digests_computed_total", "Files whose md5, sha1, sha256 and crc32 were computed from the cached bytes (once each, kept with the file).", st.DigestsComputed)
		writeIndex(e, st.Index)
		writeFetchWindows(e, st.FetchWindows)
		writeRAM(e, st.RAM)
		if s.UsageErr == "" {
			e.gauge("hepcache_cache_capacity_bytes", "Space the cache may fill.", s.Total)
			e.gauge("hepcache_cache_used_bytes", "Space used (the cache's files, or the whole file system when no capacity is configured).", s.Used)
			e.gauge("hepcache_cache_high_watermark_bytes", "Usage above which files are evicted.", s.High)
			e.gauge("hepcache_cache_low_watermark_bytes", "Usage down to which files are evicted.", s.Low)
			e.gauge("hepcache_cache_files", "Files in the cache.", s.Files)
			e.gauge("hepcache_cache_file_bytes", "Bytes of the files in the cache.", s.Cached)
		}
	}
	r.writeSpace(e)
	r.writePrestage(e)
	r.writeDescriptors(e)
	r.writeRequests(e)
	e.family("hepcache_clients", "gauge", "Clients connected now, by protocol.")
	for _, pc := range r.clients.byProtocol() {
		e.sample("hepcache_clients", `protocol="`+escape(pc.protocol)+`"`, int64(pc.n))
	}
	r.writeOrigins(e)
	r.mu.RLock()
	funcs := append([]funcMetric(nil), r.funcs...)
	r.mu.RUnlock()
	for _, f := range funcs {
		e.family(f.name, f.typ, f.help)
		e.sample(f.name, "", f.fn())
	}
	writeProcess(e, r.started)
	n, err := io.WriteString(w, e.b.String())
	return int64(n), err
}

// writeIndex writes the catalogue's figures.
func writeIndex(e *expWriter, x IndexFigures) {
	loading := int64(0)
	if x.Loading {
		loading = 1
	}
	e.gauge("hepcache_index_loading", "1 while the index of cached files loads after a start (the cache serves meanwhile; purge waits for it), 0 once loaded.", loading)
	e.gauge("hepcache_index_loaded_files", "Files the index has loaded since the start (while hepcache_index_loading is 1).", x.Loaded)
	e.gauge("hepcache_index_files", "Files in the index of cached files.", x.Files)
	e.gauge("hepcache_index_bytes", "Memory the index of cached files takes (its own accounting: items, hash table, paths, directory statistics).", x.Bytes)
}

// writeRAM writes the block store's figures.
func writeRAM(e *expWriter, r RAMFigures) {
	e.gauge("hepcache_ram_bytes", "Memory for blocks (cache.ram): blocks in flight and the RAM block cache.", r.Size)
	e.gauge("hepcache_ram_cached_bytes", "Bytes of blocks held in RAM for reuse.", r.Cached)
	e.gauge("hepcache_ram_filling_bytes", "Bytes of RAM taken by blocks being fetched from origins.", r.Filling)
	e.gauge("hepcache_ram_pinned_bytes", "Bytes of RAM blocks in use by readers or fetches now.", r.Pinned)
	e.gauge("hepcache_ram_touched_bytes", "Bytes of the RAM arena ever handed out to a block (a high-water mark).", r.Touched)
	e.gauge("hepcache_ram_resident_bytes", "Bytes of the RAM arena in memory now: its part of the process's resident memory.", r.Resident)
	e.gauge("hepcache_resident_outside_ram_bytes", "The process's resident memory beyond its RAM arena, read with it: what it holds besides the blocks.", r.Outside)
	e.gauge("hepcache_ram_limit_bytes", "RAM the cache may use now: cache.ram, less what the node's memory pressure made it hand back.", r.Limit)
	e.counter("hepcache_ram_handed_back_bytes_total", "Bytes of RAM handed back to the node under memory pressure.", r.HandedBack)
	e.counter("hepcache_ram_hits_total", "Block reads answered from RAM.", r.Hits)
	e.counter("hepcache_ram_misses_total", "Block reads not in RAM (read back from disk, checked).", r.Misses)
	e.counter("hepcache_ram_evictions_total", "Blocks evicted from RAM to make room.", r.Evictions)
	e.counter("hepcache_disk_read_blocks_total", "Blocks read back from disk into RAM (each checked against its CRC32C).", r.DiskReads)
	e.counter("hepcache_disk_read_bytes_total", "Bytes read back from disk into RAM.", r.DiskReadBytes)
	e.family("hepcache_disk_written_blocks_total", "counter", "Blocks written to disk, with direct I/O or buffered (a file system refusing O_DIRECT).")
	e.sample("hepcache_disk_written_blocks_total", `io="direct"`, r.DirectWrites)
	e.sample("hepcache_disk_written_blocks_total", `io="buffered"`, r.BufferedWrites)
}

// writeFetchWindows writes each origin's fetch window, so that an admin
// sees what the cache learnt about a far origin (a window stuck small, a
// rate below the link's) without a profiler.
func writeFetchWindows(e *expWriter, ws []FetchWindow) {
	sort.Slice(ws, func(i, j int) bool { return ws[i].Origin < ws[j].Origin })
	fams := []struct {
		name, help string
		v          func(FetchWindow) float64
	}{
		{"hepcache_fetch_window_bytes", "The window learnt for the origin: bytes the cache may keep requested from it (less while busy origins share fetch_memory).", func(w FetchWindow) float64 { return float64(w.Window) }},
		{"hepcache_fetch_window_inflight_bytes", "Bytes requested from the origin and not yet on disk.", func(w FetchWindow) float64 { return float64(w.InFlight) }},
		{"hepcache_fetch_window_rate_bytes_per_second", "The origin's delivery rate, the best of the last periods.", func(w FetchWindow) float64 { return w.RateBps }},
		{"hepcache_fetch_window_min_rtt_seconds", "The shortest time from request to last byte of an origin read (0 until one completed).", func(w FetchWindow) float64 { return w.MinRTT }},
		{"hepcache_fetch_window_plateaued", "1 once the window stopped growing (about two bandwidth-delay products, probing now and then).", func(w FetchWindow) float64 {
			if w.Plateaued {
				return 1
			}
			return 0
		}},
	}
	for _, f := range fams {
		e.family(f.name, "gauge", f.help)
		for _, w := range ws {
			e.sampleFloat(f.name, `origin="`+escape(w.Origin)+`"`, f.v(w))
		}
	}
}

func (r *Registry) writeRequests(e *expWriter) {
	r.mu.RLock()
	keys := make([]requestKey, 0, len(r.requests))
	for k := range r.requests {
		keys = append(keys, k)
	}
	r.mu.RUnlock()
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.protocol != b.protocol {
			return a.protocol < b.protocol
		}
		if a.operation != b.operation {
			return a.operation < b.operation
		}
		return a.outcome < b.outcome
	})
	e.family("hepcache_requests_total", "counter", "Client requests by protocol, operation and outcome.")
	for _, k := range keys {
		r.mu.RLock()
		v := r.requests[k].Load()
		r.mu.RUnlock()
		e.sample("hepcache_requests_total", fmt.Sprintf(`protocol="%s",operation="%s",outcome="%s"`, escape(k.protocol), escape(k.operation), escape(k.outcome)), v)
	}
}

// expWriter builds the text exposition.
type expWriter struct{ b strings.Builder }

func (e *expWriter) family(name, typ, help string) {
	fmt.Fprintf(&e.b, "# HELP %s %s\n# TYPE %s %s\n", name, escapeHelp(help), name, typ)
}

func (e *expWriter) sample(name, labels string, v int64) {
	if labels != "" {
		fmt.Fprintf(&e.b, "%s{%s} %d\n", name, labels, v)
		return
	}
	fmt.Fprintf(&e.b, "%s %d\n", name, v)
}

func (e *expWriter) sampleFloat(name, labels string, v float64) {
	if labels != "" {
		fmt.Fprintf(&e.b, "%s{%s} %g\n", name, labels, v)
		return
	}
	fmt.Fprintf(&e.b, "%s %g\n", name, v)
}

func (e *expWriter) counter(name, help string, v int64) {
	e.family(name, "counter", help)
	e.sample(name, "", v)
}

func (e *expWriter) gauge(name, help string, v int64) {
	e.family(name, "gauge", help)
	e.sample(name, "", v)
}

// The replacers are built once: building one per help text made a scrape
// of every family cost as much as writing it.
var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

// escape escapes a label value: backslash, double quote and newline.
func escape(s string) string {
	if !strings.ContainsAny(s, "\\\"\n") {
		return s
	}
	return labelEscaper.Replace(s)
}

// escapeHelp escapes a help text: backslash and newline.
func escapeHelp(s string) string {
	if !strings.ContainsAny(s, "\\\n") {
		return s
	}
	return helpEscaper.Replace(s)
}

func formatFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
