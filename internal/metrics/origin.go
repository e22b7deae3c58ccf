package metrics

import (
	"context"
	"errors"
	"io"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/origin"
)

// Outcome classifies a request's error for the outcome label: ok,
// not_found, forbidden, invalid, redirect, busy, origin_unavailable,
// unsupported, is_dir, canceled or error.
func Outcome(err error) string {
	var re *backend.RedirectError
	var we *backend.WaitError
	switch {
	case err == nil || err == io.EOF:
		return "ok"
	case errors.As(err, &re):
		return "redirect"
	case errors.As(err, &we), errors.Is(err, backend.ErrBusy):
		return "busy"
	case errors.Is(err, origin.ErrNotFound):
		return "not_found"
	case errors.Is(err, backend.ErrForbidden), errors.Is(err, origin.ErrNotAuthorized):
		return "forbidden"
	case errors.Is(err, backend.ErrInvalidPath), errors.Is(err, origin.ErrInvalid):
		return "invalid"
	case errors.Is(err, origin.ErrIsDir):
		return "is_dir"
	case errors.Is(err, origin.ErrUnsupported):
		return "unsupported"
	case errors.Is(err, origin.ErrUnavailable):
		return "origin_unavailable"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "error"
}

// originFailure reports whether err means the origin misbehaved (down, slow,
// broken), as opposed to an answer about the file (not found, a directory,
// unsupported) or the client giving up.
func originFailure(err error) bool {
	switch {
	case err == nil, err == io.EOF,
		errors.Is(err, origin.ErrNotFound), errors.Is(err, origin.ErrIsDir),
		errors.Is(err, origin.ErrUnsupported), errors.Is(err, origin.ErrInvalid),
		errors.Is(err, context.Canceled):
		return false
	}
	return true
}

// Origin operations, the operation label of the origin metrics.
const (
	opOpen = iota
	opRead
	opReadV
	opStat
	opList
	opChecksum
	numOps
)

var opNames = [numOps]string{"open", "read", "readv", "stat", "list", "checksum"}

// latencyBuckets are the upper bounds of the origin latency histograms, in
// seconds: from a LAN round trip to a slow tape-backed open.
var latencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// histogram is a Prometheus histogram of typed atomics.
type histogram struct {
	counts [16]atomic.Int64 // len(latencyBuckets)+1, the last is +Inf
	sum    atomic.Uint64    // float64 bits
	count  atomic.Int64
}

func (h *histogram) observe(v float64) {
	i := sort.SearchFloat64s(latencyBuckets, v)
	h.counts[i].Add(1)
	h.count.Add(1)
	for {
		old := h.sum.Load()
		if h.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// originStats are the metrics of one origin.
type originStats struct {
	name    string
	latency [numOps]histogram
	errors  [numOps]atomic.Int64
	// lastErr is the latest failure, for /health.
	lastErr atomic.Pointer[originErr]
	// failing is set from a logged failure to the next success.
	failing atomic.Bool
	// logMu protects logged (when a failure was last logged) and
	// unlogged (failures since, not logged).
	logMu    sync.Mutex
	logged   time.Time
	unlogged int64
}

type originErr struct {
	at  time.Time
	msg string
}

func (r *Registry) originStats(name string) *originStats {
	r.mu.RLock()
	s := r.origins[name]
	r.mu.RUnlock()
	if s != nil {
		return s
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if s = r.origins[name]; s == nil {
		s = &originStats{name: name}
		r.origins[name] = s
	}
	return s
}

func (r *Registry) observeOrigin(s *originStats, op int, start time.Time, err error) {
	s.latency[op].observe(r.cfg.Now().Sub(start).Seconds())
	if originFailure(err) {
		s.errors[op].Add(1)
		s.lastErr.Store(&originErr{at: r.cfg.Now(), msg: err.Error()})
		r.logFailure(s, op, err)
	} else if err == nil && s.failing.Load() {
		r.logRecovered(s)
	}
}

// logFailure logs a failure of s's origin unless one was logged less than
// OriginLogInterval ago; the next line carries the count left out. Both
// front ends rely on it: a failed client request is not logged there.
func (r *Registry) logFailure(s *originStats, op int, err error) {
	now, every := r.cfg.Now(), time.Duration(r.originLogEvery.Load())
	s.logMu.Lock()
	if !s.logged.IsZero() && now.Sub(s.logged) < every {
		s.unlogged++
		s.logMu.Unlock()
		return
	}
	n := s.unlogged
	s.logged, s.unlogged = now, 0
	s.failing.Store(true)
	s.logMu.Unlock()
	r.cfg.Logger.Warn("origin failing", "origin", s.name, "op", opNames[op], "err", err,
		"failures_not_logged", n, "next_line_after", every.String())
}

// logRecovered logs the first success of s's origin after a failure was
// logged, once per failing spell (a flapping origin makes at most two
// lines per interval).
func (r *Registry) logRecovered(s *originStats) {
	s.logMu.Lock()
	if !s.failing.Load() {
		s.logMu.Unlock()
		return
	}
	s.failing.Store(false)
	n := s.unlogged
	s.unlogged = 0
	s.logMu.Unlock()
	r.cfg.Logger.Info("origin answers again", "origin", s.name, "failures_not_logged", n)
}

// WrapOrigin returns o instrumented: the latency of Open, ReadAt, ReadV,
// Stat, List and Checksum goes into hepcache_origin_request_duration_seconds
// and failures into hepcache_origin_errors_total, labelled by o.String().
// The wrapper has the same String, so cache keys do not change.
func (r *Registry) WrapOrigin(o origin.Origin) origin.Origin {
	if w, ok := o.(*instrumented); ok && w.r == r {
		return o
	}
	return &instrumented{Origin: o, r: r, s: r.originStats(o.String())}
}

// WrapResolver returns res with every Origin it resolves instrumented (one
// wrapper per Origin, reused).
func (r *Registry) WrapResolver(res origin.Resolver) origin.Resolver {
	return origin.ResolverFunc(func(ctx context.Context, url string) (origin.Origin, error) {
		o, err := res.Resolve(ctx, url)
		if err != nil {
			return nil, err
		}
		if w, ok := r.wrapped.Load(o); ok {
			return w.(origin.Origin), nil
		}
		w, _ := r.wrapped.LoadOrStore(o, r.WrapOrigin(o))
		return w.(origin.Origin), nil
	})
}

// instrumented is an Origin that observes its calls.
type instrumented struct {
	origin.Origin
	r *Registry
	s *originStats
}

var _ origin.Origin = (*instrumented)(nil)

// Stat implements origin.Origin.
func (o *instrumented) Stat(ctx context.Context, p string) (origin.FileInfo, error) {
	start := o.r.cfg.Now()
	fi, err := o.Origin.Stat(ctx, p)
	o.r.observeOrigin(o.s, opStat, start, err)
	return fi, err
}

// Open implements origin.Origin.
func (o *instrumented) Open(ctx context.Context, p string) (origin.File, error) {
	start := o.r.cfg.Now()
	f, err := o.Origin.Open(ctx, p)
	o.r.observeOrigin(o.s, opOpen, start, err)
	if err != nil {
		return nil, err
	}
	return &instrumentedFile{File: f, o: o}, nil
}

// List implements origin.Origin.
func (o *instrumented) List(ctx context.Context, p string, withStat bool) ([]origin.FileInfo, error) {
	start := o.r.cfg.Now()
	l, err := o.Origin.List(ctx, p, withStat)
	o.r.observeOrigin(o.s, opList, start, err)
	return l, err
}

// ListEach implements origin.ListEacher, passing the origin's own through.
func (o *instrumented) ListEach(ctx context.Context, p string, withStat bool, fn func(origin.FileInfo) error) error {
	start := o.r.cfg.Now()
	err := origin.ListEach(ctx, o.Origin, p, withStat, fn)
	o.r.observeOrigin(o.s, opList, start, err)
	return err
}

// Checksum implements origin.Origin.
func (o *instrumented) Checksum(ctx context.Context, p, algo string) (string, error) {
	start := o.r.cfg.Now()
	v, err := o.Origin.Checksum(ctx, p, algo)
	o.r.observeOrigin(o.s, opChecksum, start, err)
	return v, err
}

type instrumentedFile struct {
	origin.File
	o *instrumented
}

// ReadAt implements origin.File.
func (f *instrumentedFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	start := f.o.r.cfg.Now()
	n, err := f.File.ReadAt(ctx, p, off)
	f.o.r.observeOrigin(f.o.s, opRead, start, err)
	return n, err
}

var _ origin.ProgressReader = (*instrumentedFile)(nil)

// ReadAtProgress implements origin.ProgressReader, forwarding to the
// wrapped file.
func (f *instrumentedFile) ReadAtProgress(ctx context.Context, p []byte, off int64, progress func(int)) (int, error) {
	start := f.o.r.cfg.Now()
	n, err := origin.ReadAtProgress(ctx, f.File, p, off, progress)
	f.o.r.observeOrigin(f.o.s, opRead, start, err)
	return n, err
}

// ReadV implements origin.File.
func (f *instrumentedFile) ReadV(ctx context.Context, segs []origin.Segment) error {
	start := f.o.r.cfg.Now()
	err := f.File.ReadV(ctx, segs)
	f.o.r.observeOrigin(f.o.s, opReadV, start, err)
	return err
}

func (r *Registry) originList() []*originStats {
	r.mu.RLock()
	list := make([]*originStats, 0, len(r.origins))
	for _, s := range r.origins {
		list = append(list, s)
	}
	r.mu.RUnlock()
	sort.Slice(list, func(i, j int) bool { return list[i].name < list[j].name })
	return list
}

func (r *Registry) writeOrigins(e *expWriter) {
	list := r.originList()
	const dur = "hepcache_origin_request_duration_seconds"
	e.family(dur, "histogram", "Latency of origin requests by origin and operation (open, read, readv, stat, list, checksum).")
	for _, s := range list {
		for op := range numOps {
			h := &s.latency[op]
			n := h.count.Load()
			if n == 0 {
				continue
			}
			lbl := `origin="` + escape(s.name) + `",operation="` + opNames[op] + `"`
			var cum int64
			for i, ub := range latencyBuckets {
				cum += h.counts[i].Load()
				e.sample(dur+"_bucket", lbl+`,le="`+formatFloat(ub)+`"`, cum)
			}
			e.sample(dur+"_bucket", lbl+`,le="+Inf"`, n)
			e.sampleFloat(dur+"_sum", lbl, math.Float64frombits(h.sum.Load()))
			e.sample(dur+"_count", lbl, n)
		}
	}
	const errs = "hepcache_origin_errors_total"
	e.family(errs, "counter", "Origin requests that failed (unreachable, timed out, refused), by origin and operation; not-found answers are not errors.")
	for _, s := range list {
		for op := range numOps {
			if v := s.errors[op].Load(); v > 0 {
				e.sample(errs, `origin="`+escape(s.name)+`",operation="`+opNames[op]+`"`, v)
			}
		}
	}
}
