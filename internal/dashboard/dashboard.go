// Package dashboard serves hepcache's status page: hit rate and traffic over
// time, occupancy against the watermarks, top files and connected clients.
// A sampler keeps a ring of metrics.Snapshot every Interval; the page (one
// embedded HTML file, no external assets) draws it as inline SVG from
// /api/stats, so it shows the very figures /metrics exports.
package dashboard

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/metrics"
)

// Defaults. A zero Config field means "use the default".
const (
	// defaultInterval: one sample every 5 s, a Prometheus-like resolution.
	defaultInterval = 5 * time.Second
	// defaultSamples: one hour at the default interval (~100 KiB).
	defaultSamples = 720
	// defaultRecent: access records kept for the top-files table.
	defaultRecent = 2000
	// defaultTopFiles: rows of the top-files table.
	defaultTopFiles = 10
)

// Config configures a Dashboard.
type Config struct {
	// Metrics is where the figures come from. Required.
	Metrics *metrics.Registry
	// Interval is the time between two samples. Default 5 s.
	Interval time.Duration
	// Samples is the number of samples kept (the charts' width in time is
	// Samples x Interval). Default 720 (one hour), about 100 KiB.
	Samples int
	// Recent is the number of access records kept for the top files.
	// Default 2000.
	Recent int
	// TopFiles is the number of rows of the top-files table. Default 10.
	TopFiles int
	// Logger receives operational messages. Default slog.Default().
	Logger *slog.Logger
}

// EnsureDefaults fills zero fields with their defaults.
func (c *Config) EnsureDefaults() {
	if c.Interval == 0 {
		c.Interval = defaultInterval
	}
	if c.Samples == 0 {
		c.Samples = defaultSamples
	}
	if c.Recent == 0 {
		c.Recent = defaultRecent
	}
	if c.TopFiles == 0 {
		c.TopFiles = defaultTopFiles
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports every problem with the configuration in one error.
func (c *Config) Validate() error {
	var errs []error
	if c.Metrics == nil {
		errs = append(errs, errors.New("metrics: required"))
	}
	if c.Interval < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("interval %v: at least 100ms", c.Interval))
	}
	if c.Samples < 2 || c.Recent < 1 || c.TopFiles < 1 {
		errs = append(errs, fmt.Errorf("samples %d, recent %d, top files %d: want at least 2, 1, 1", c.Samples, c.Recent, c.TopFiles))
	}
	return errors.Join(errs...)
}

// Dashboard samples the metrics and serves the page. Safe for concurrent
// use.
type Dashboard struct {
	cfg Config

	// mu protects samples, next, recent and recentNext.
	mu         sync.Mutex
	samples    []metrics.Snapshot // ring
	next       int                // index of the next write in samples
	recent     []access           // ring
	recentNext int

	shutdownCh chan struct{}
	wg         sync.WaitGroup
	closeOnce  sync.Once
}

type access struct {
	path, origin, client, protocol string
	read, hit                      int64
	at                             time.Time
}

// New starts a Dashboard; its sampler runs until Close.
func New(cfg *Config) (*Dashboard, error) {
	c := *cfg
	c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("dashboard config: %w", err)
	}
	d := &Dashboard{cfg: c, shutdownCh: make(chan struct{})}
	d.sample()
	d.wg.Add(1)
	go d.loop()
	return d, nil
}

// Close stops the sampler. It is idempotent.
func (d *Dashboard) Close() error {
	d.closeOnce.Do(func() {
		close(d.shutdownCh)
		d.wg.Wait()
	})
	return nil
}

func (d *Dashboard) loop() {
	defer d.wg.Done()
	t := time.NewTicker(d.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-d.shutdownCh:
			return
		case <-t.C:
			d.sample()
		}
	}
}

// sample records the current snapshot.
func (d *Dashboard) sample() {
	s := d.cfg.Metrics.Snapshot() // reads atomics and statfs: not under mu
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.samples) < d.cfg.Samples {
		d.samples = append(d.samples, s)
		return
	}
	d.samples[d.next] = s
	d.next = (d.next + 1) % d.cfg.Samples
}

// Record adds an access record for the top-files table. It never blocks
// for long (a short critical section); chain it into cache.Config.OnAccess.
func (d *Dashboard) Record(r cache.AccessRecord) {
	a := access{path: r.Path, origin: r.Origin, client: r.Client, protocol: r.Protocol, read: r.BytesRead, hit: r.BytesHit, at: r.Time}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.recent) < d.cfg.Recent {
		d.recent = append(d.recent, a)
		return
	}
	d.recent[d.recentNext] = a
	d.recentNext = (d.recentNext + 1) % d.cfg.Recent
}

// TopFile is a row of the top-files table: a file's accesses among the
// recent ones.
type TopFile struct {
	Path     string    `json:"path"`
	Origin   string    `json:"origin"`
	Accesses int       `json:"accesses"`
	Read     int64     `json:"bytes_read"`
	Hit      int64     `json:"bytes_hit"`
	Last     time.Time `json:"last"`
}

// Stats is the body of /api/stats.
type Stats struct {
	IntervalS float64 `json:"interval_s"`
	// MaxSamples is the ring's size: the page keeps as many.
	MaxSamples int                  `json:"max_samples"`
	Now        metrics.Snapshot     `json:"now"`
	Samples    []metrics.Snapshot   `json:"samples"`
	TopFiles   []TopFile            `json:"top_files"`
	Clients    []metrics.ClientInfo `json:"clients"`
	Health     metrics.HealthReport `json:"health"`
	// Space holds quotas and per-directory statistics (nil: none).
	Space *metrics.SpaceFigures `json:"space,omitempty"`
	// Prestage is the prestager's progress (nil: none).
	Prestage *metrics.PrestageFigures `json:"prestage,omitempty"`
}

// Stats returns the figures, with the samples taken after since (all when
// since is zero). Times compare at millisecond resolution, the resolution of
// the ?since parameter, so a client passing back the newest sample's time
// gets nothing it already has.
func (d *Dashboard) Stats(since time.Time) Stats {
	st := Stats{IntervalS: d.cfg.Interval.Seconds(), MaxSamples: d.cfg.Samples, Now: d.cfg.Metrics.Snapshot(),
		Clients: d.cfg.Metrics.Clients().List(), Health: d.cfg.Metrics.Health()}
	if sp, ok := d.cfg.Metrics.Space(); ok {
		st.Space = &sp
	}
	if ps, ok := d.cfg.Metrics.Prestage(); ok {
		st.Prestage = &ps
	}
	d.mu.Lock()
	n := len(d.samples)
	st.Samples = make([]metrics.Snapshot, 0, n)
	for i := 0; i < n; i++ {
		s := d.samples[(d.next+i)%n]
		if since.IsZero() || s.Time.UnixMilli() > since.UnixMilli() {
			st.Samples = append(st.Samples, s)
		}
	}
	byPath := map[string]*TopFile{}
	for _, a := range d.recent {
		k := a.origin + "\x00" + a.path
		tf := byPath[k]
		if tf == nil {
			tf = &TopFile{Path: a.path, Origin: a.origin}
			byPath[k] = tf
		}
		tf.Accesses++
		tf.Read += a.read
		tf.Hit += a.hit
		if a.at.After(tf.Last) {
			tf.Last = a.at
		}
	}
	d.mu.Unlock()
	for _, tf := range byPath {
		st.TopFiles = append(st.TopFiles, *tf)
	}
	sort.Slice(st.TopFiles, func(i, j int) bool {
		a, b := st.TopFiles[i], st.TopFiles[j]
		if a.Read != b.Read {
			return a.Read > b.Read
		}
		if a.Accesses != b.Accesses {
			return a.Accesses > b.Accesses
		}
		return a.Path < b.Path
	})
	if len(st.TopFiles) > d.cfg.TopFiles {
		st.TopFiles = st.TopFiles[:d.cfg.TopFiles]
	}
	if st.TopFiles == nil {
		st.TopFiles = []TopFile{}
	}
	return st
}

//go:embed index.html
var indexHTML string

var page = template.Must(template.New("dashboard").Parse(indexHTML))

// Routes returns the dashboard's handlers by path, to mount on the HTTP
// front end (Config.Routes) or on the metrics listener: "/dashboard" (the
// page) and "/api/stats" (its JSON; ?since=<unix ms> returns only newer
// samples).
func (d *Dashboard) Routes() map[string]http.Handler {
	return map[string]http.Handler{
		"/dashboard": http.HandlerFunc(d.servePage),
		"/api/stats": http.HandlerFunc(d.serveStats),
	}
}

func (d *Dashboard) servePage(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	// The first figures are inlined, so the page shows them without
	// waiting for its first /api/stats request.
	initial, err := json.Marshal(d.Stats(time.Time{}))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	// Everything the page needs is in it: no script, style or font may
	// come from elsewhere.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:")
	if r.Method == http.MethodHead {
		return
	}
	if err := page.Execute(w, map[string]any{"Initial": template.JS(initial)}); err != nil {
		d.cfg.Logger.Debug("dashboard page", "err", err)
	}
}

func (d *Dashboard) serveStats(w http.ResponseWriter, r *http.Request) {
	var since time.Time
	if v := r.URL.Query().Get("since"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			http.Error(w, "since: want unix milliseconds", http.StatusBadRequest)
			return
		}
		since = time.UnixMilli(ms)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(d.Stats(since))
}
