package federation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hepcache/hepcache/origin"
)

// defaultRetryAfter is how long an upstream that failed is skipped.
const defaultRetryAfter = 30 * time.Second

// DialFunc creates the Origin for an upstream URL.
type DialFunc func(ctx context.Context, url string) (origin.Origin, error)

// FailoverConfig configures a Failover.
type FailoverConfig struct {
	// Name is the Failover's String(): the origin name the cache keys its
	// files by, whichever upstream serves them. Default: the first
	// upstream's URL.
	Name string
	// Upstreams are origin URLs in preference order ("root://regional:1094",
	// "root://origin:1094"). At least one.
	Upstreams []string
	// Dial creates an upstream's Origin, on first use. Required.
	Dial DialFunc
	// RetryAfter is how long an upstream that failed is skipped before it
	// is tried again. Default 30 s. Shorter returns to a preferred upstream
	// sooner at the expense of more requests to one that is still down.
	RetryAfter time.Duration
	// Logger receives failovers. Default slog.Default().
	Logger *slog.Logger

	now func() time.Time // test seam
}

// FailoverStats counts failovers.
type FailoverStats struct {
	// Failovers counts requests served by an upstream other than the
	// first; Reopens counts open files moved to another upstream mid-read.
	Failovers, Reopens atomic.Int64
}

// Failover is an Origin over several upstreams in preference order: each
// request goes to the first upstream that is not known to be down, and to
// the next when it fails (unavailable, timed out, loop refused). An
// upstream that failed is skipped for RetryAfter. An open file whose
// upstream fails mid-read is reopened at the next one (same size
// required), so the cache's download goes on.
type Failover struct {
	cfg   FailoverConfig
	stats FailoverStats

	// mu protects ups.
	mu  sync.Mutex
	ups []*upstream
}

type upstream struct {
	url       string
	o         origin.Origin // nil until dialled
	downUntil time.Time
}

var _ origin.Origin = (*Failover)(nil)

// NewFailover validates cfg and returns a Failover. Upstreams are dialled
// lazily, so a down upstream does not stop the cache from starting or
// from serving its hits.
func NewFailover(cfg *FailoverConfig) (*Failover, error) {
	c := *cfg
	if c.RetryAfter == 0 {
		c.RetryAfter = defaultRetryAfter
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.now == nil {
		c.now = time.Now
	}
	var errs []error
	if len(c.Upstreams) == 0 {
		errs = append(errs, errors.New("upstreams: at least one"))
	}
	if c.Dial == nil {
		errs = append(errs, errors.New("dial: required"))
	}
	if c.RetryAfter < 0 {
		errs = append(errs, fmt.Errorf("retry after %v: must not be negative", c.RetryAfter))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("failover origin: %w", err)
	}
	if c.Name == "" {
		c.Name = c.Upstreams[0]
	}
	f := &Failover{cfg: c}
	for _, u := range c.Upstreams {
		f.ups = append(f.ups, &upstream{url: u})
	}
	return f, nil
}

// Stats returns the live counters.
func (f *Failover) Stats() *FailoverStats { return &f.stats }

// order returns the upstream indexes to try: those not down in preference
// order, then those down (a request is never refused just because every
// upstream failed recently).
func (f *Failover) order(skip int) []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.cfg.now()
	var up, down []int
	for i, u := range f.ups {
		switch {
		case i == skip:
		case now.Before(u.downUntil):
			down = append(down, i)
		default:
			up = append(up, i)
		}
	}
	return append(up, down...)
}

func (f *Failover) origin(ctx context.Context, i int) (origin.Origin, error) {
	f.mu.Lock()
	u := f.ups[i]
	o := u.o
	f.mu.Unlock()
	if o != nil {
		return o, nil
	}
	o, err := f.cfg.Dial(ctx, u.url)
	if err != nil {
		return nil, fmt.Errorf("upstream %s: %w: %w", u.url, errDial, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if u.o != nil {
		o.Close()
		return u.o, nil
	}
	u.o = o
	return o, nil
}

func (f *Failover) setDown(i int, err error) {
	f.mu.Lock()
	u := f.ups[i]
	was := f.cfg.now().Before(u.downUntil)
	u.downUntil = f.cfg.now().Add(f.cfg.RetryAfter)
	f.mu.Unlock()
	if !was {
		f.cfg.Logger.Warn("upstream failed, using the next one", "upstream", u.url, "retry_after", f.cfg.RetryAfter, "err", err)
	}
}

func (f *Failover) setUp(i int) {
	f.mu.Lock()
	f.ups[i].downUntil = time.Time{}
	f.mu.Unlock()
}

// do runs op at the upstreams in order until one answers; it returns the
// index of the upstream that did.
func (f *Failover) do(ctx context.Context, skip int, op func(o origin.Origin) error) (int, error) {
	var errs []error
	for _, i := range f.order(skip) {
		o, err := f.origin(ctx, i)
		if err == nil {
			err = op(o)
		}
		if err == nil || !errSwitch(ctx, err) && !errors.Is(err, errDial) {
			if err == nil {
				f.setUp(i)
				if i > 0 {
					f.stats.Failovers.Add(1)
				}
			}
			return i, err
		}
		f.setDown(i, err)
		errs = append(errs, err)
	}
	return -1, fmt.Errorf("every upstream failed: %w", errors.Join(errs...))
}

// errDial marks dial errors (always a reason to try the next upstream).
var errDial = errors.New("dial")

// Stat implements origin.Origin.
func (f *Failover) Stat(ctx context.Context, p string) (fi origin.FileInfo, err error) {
	_, err = f.do(ctx, -1, func(o origin.Origin) (err error) {
		fi, err = o.Stat(ctx, p)
		return err
	})
	return fi, err
}

// List implements origin.Origin.
func (f *Failover) List(ctx context.Context, p string, withStat bool) (out []origin.FileInfo, err error) {
	_, err = f.do(ctx, -1, func(o origin.Origin) (err error) {
		out, err = o.List(ctx, p, withStat)
		return err
	})
	return out, err
}

// Checksum implements origin.Origin.
func (f *Failover) Checksum(ctx context.Context, p, algo string) (sum string, err error) {
	_, err = f.do(ctx, -1, func(o origin.Origin) (err error) {
		sum, err = o.Checksum(ctx, p, algo)
		return err
	})
	return sum, err
}

// Open implements origin.Origin.
func (f *Failover) Open(ctx context.Context, p string) (origin.File, error) {
	var of origin.File
	i, err := f.do(ctx, -1, func(o origin.Origin) (err error) {
		of, err = o.Open(ctx, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &failoverFile{f: f, path: p, cur: of, at: i, info: of.Info()}, nil
}

// String implements origin.Origin: the configured name.
func (f *Failover) String() string { return f.cfg.Name }

// Close implements origin.Origin.
func (f *Failover) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	for _, u := range f.ups {
		if u.o != nil {
			errs = append(errs, u.o.Close())
			u.o = nil
		}
	}
	return errors.Join(errs...)
}

// failoverFile is an open file that moves to the next upstream if its
// upstream fails.
type failoverFile struct {
	f    *Failover
	path string
	info origin.FileInfo

	// mu protects cur and at.
	mu  sync.Mutex
	cur origin.File
	at  int
}

func (ff *failoverFile) Info() origin.FileInfo { return ff.info }

func (ff *failoverFile) current() (origin.File, int) {
	ff.mu.Lock()
	defer ff.mu.Unlock()
	return ff.cur, ff.at
}

// reopen moves the file off upstream at after it failed with cause.
func (ff *failoverFile) reopen(ctx context.Context, at int, cause error) (origin.File, error) {
	ff.mu.Lock()
	if ff.at != at {
		cur := ff.cur
		ff.mu.Unlock()
		return cur, nil
	}
	ff.mu.Unlock()
	ff.f.setDown(at, cause)
	var nf origin.File
	i, err := ff.f.do(ctx, at, func(o origin.Origin) error {
		of, err := o.Open(ctx, ff.path)
		if err != nil {
			return err
		}
		if of.Info().Size != ff.info.Size {
			of.Close()
			return fmt.Errorf("%s has %d bytes there, %d at the failed upstream: %w", ff.path, of.Info().Size, ff.info.Size, origin.ErrUnavailable)
		}
		nf = of
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: upstream failed mid-read (%w), no other has it: %w", ff.path, cause, err)
	}
	ff.f.stats.Reopens.Add(1)
	ff.mu.Lock()
	defer ff.mu.Unlock()
	old := ff.cur
	ff.cur, ff.at = nf, i
	go old.Close()
	return nf, nil
}

// ReadAt implements origin.File.
func (ff *failoverFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	cur, at := ff.current()
	n, err := cur.ReadAt(ctx, p, off)
	if err == nil || err == io.EOF || !errSwitch(ctx, err) {
		return n, err
	}
	if cur, err = ff.reopen(ctx, at, err); err != nil {
		return 0, err
	}
	return cur.ReadAt(ctx, p, off)
}

var _ origin.ProgressReader = (*failoverFile)(nil)

// ReadAtProgress implements origin.ProgressReader with the same failover
// as ReadAt; the retried read reports its progress from the start again.
func (ff *failoverFile) ReadAtProgress(ctx context.Context, p []byte, off int64, progress func(int)) (int, error) {
	cur, at := ff.current()
	n, err := origin.ReadAtProgress(ctx, cur, p, off, progress)
	if err == nil || err == io.EOF || !errSwitch(ctx, err) {
		return n, err
	}
	if cur, err = ff.reopen(ctx, at, err); err != nil {
		return 0, err
	}
	return origin.ReadAtProgress(ctx, cur, p, off, progress)
}

// ReadV implements origin.File.
func (ff *failoverFile) ReadV(ctx context.Context, segs []origin.Segment) error {
	cur, at := ff.current()
	err := cur.ReadV(ctx, segs)
	if err == nil || !errSwitch(ctx, err) {
		return err
	}
	if cur, err = ff.reopen(ctx, at, err); err != nil {
		return err
	}
	return cur.ReadV(ctx, segs)
}

// Close implements origin.File.
func (ff *failoverFile) Close() error {
	ff.mu.Lock()
	defer ff.mu.Unlock()
	return ff.cur.Close()
}
