// Package prestage warms the cache with whole files on request, in the
// background, with a bounded number of workers: the files named by
// kXR_prepare (stage), `hepcache prestage` and the HTTP prestage form.
//
// A file is staged by opening it through the backend the front ends use
// and streaming it to the end; the cache fetches what is missing and its
// read-ahead runs as for any sequential reader. A file the cache already
// holds complete is not read at all.
package prestage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
)

// Config tunes a Stager. The zero value gets the defaults.
type Config struct {
	// Workers is how many files are staged at once (default 4): enough to
	// keep a WAN link busy next to the cache's read-ahead, few enough not
	// to crowd out the clients' own misses.
	Workers int
	// MaxQueued bounds the files waiting over all jobs (default 100000);
	// a request that would exceed it is refused with ErrBusy.
	MaxQueued int
	// KeepJobs is how many jobs are remembered for status queries (default
	// 1000); the oldest finished ones are forgotten first.
	KeepJobs int
	Logger   *slog.Logger
}

// EnsureDefaults fills unset fields.
func (c *Config) EnsureDefaults() {
	if c.Workers <= 0 {
		c.Workers = 4
	}
	if c.MaxQueued <= 0 {
		c.MaxQueued = 100000
	}
	if c.KeepJobs <= 0 {
		c.KeepJobs = 1000
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Stats are the stager's counters since start.
type Stats struct {
	Queued  atomic.Int64 // files waiting now
	Running atomic.Int64 // files being staged now
	Done    atomic.Int64 // files staged
	Failed  atomic.Int64 // files that could not be staged
	Bytes   atomic.Int64 // bytes read through the cache by staging
}

// Stager stages files. It implements backend.Stager.
type Stager struct {
	be    backend.Backend
	cfg   Config
	stats Stats

	ctx    context.Context
	cancel context.CancelFunc
	queue  chan *task
	wg     sync.WaitGroup

	mu    sync.Mutex
	jobs  map[string]*job
	order []string // job ids, oldest first
	seq   uint64
	close sync.Once
}

type job struct {
	id        string
	submitted time.Time
	ctx       context.Context
	cancel    context.CancelFunc
	files     []*task
}

type task struct {
	j     *job
	req   backend.Request
	state atomic.Value // string
	bytes atomic.Int64
	size  atomic.Int64
	err   atomic.Value // string
}

// New starts a stager reading through be.
func New(be backend.Backend, cfg Config) *Stager {
	cfg.EnsureDefaults()
	s := &Stager{be: be, cfg: cfg, jobs: make(map[string]*job), queue: make(chan *task, cfg.MaxQueued)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	for range cfg.Workers {
		s.wg.Add(1)
		go s.worker()
	}
	return s
}

// Stats returns the stager's counters.
func (s *Stager) Stats() *Stats { return &s.stats }

// ErrClosed is returned by Stage after Close.
var ErrClosed = errors.New("prestage: stager is closed")

// Stage implements backend.Stager.
func (s *Stager) Stage(reqs []backend.Request) (string, error) {
	if len(reqs) == 0 {
		return "", errors.New("prestage: no files given")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return "", ErrClosed
	}
	if free := cap(s.queue) - len(s.queue); len(reqs) > free {
		return "", fmt.Errorf("prestage: %d files asked, room for %d in the queue (prestage.max_queued = %d): %w",
			len(reqs), free, s.cfg.MaxQueued, backend.ErrBusy)
	}
	s.seq++
	j := &job{id: fmt.Sprintf("hepcache-%d-%d", time.Now().Unix(), s.seq), submitted: time.Now()}
	j.ctx, j.cancel = context.WithCancel(s.ctx)
	for _, r := range reqs {
		t := &task{j: j, req: r}
		t.state.Store(backend.StageQueued)
		t.err.Store("")
		j.files = append(j.files, t)
	}
	s.jobs[j.id] = j
	s.order = append(s.order, j.id)
	s.forgetLocked()
	// Room was checked under s.mu, the only sender's lock: never blocks.
	for _, t := range j.files {
		s.stats.Queued.Add(1)
		s.queue <- t
	}
	s.cfg.Logger.Info("prestage job queued", "id", j.id, "files", len(reqs))
	return j.id, nil
}

// forgetLocked drops the oldest finished jobs beyond KeepJobs.
func (s *Stager) forgetLocked() {
	for i := 0; len(s.order) > s.cfg.KeepJobs && i < len(s.order); {
		id := s.order[i]
		if !s.jobs[id].status().Finished() {
			i++
			continue
		}
		delete(s.jobs, id)
		s.order = append(s.order[:i], s.order[i+1:]...)
	}
}

// StageStatus implements backend.Stager.
func (s *Stager) StageStatus(id string) (backend.StageJob, bool) {
	s.mu.Lock()
	j := s.jobs[id]
	s.mu.Unlock()
	if j == nil {
		return backend.StageJob{}, false
	}
	return j.status(), true
}

// CancelStage implements backend.Stager.
func (s *Stager) CancelStage(id string) bool {
	s.mu.Lock()
	j := s.jobs[id]
	s.mu.Unlock()
	if j == nil {
		return false
	}
	j.cancel()
	s.cfg.Logger.Info("prestage job cancelled", "id", id)
	return true
}

// Jobs returns the newest n remembered jobs (all if n <= 0), newest first.
func (s *Stager) Jobs(n int) []backend.StageJob {
	s.mu.Lock()
	js := make([]*job, 0, len(s.order))
	for i := len(s.order) - 1; i >= 0 && (n <= 0 || len(js) < n); i-- {
		js = append(js, s.jobs[s.order[i]])
	}
	s.mu.Unlock()
	out := make([]backend.StageJob, len(js))
	for i, j := range js {
		out[i] = j.status()
	}
	return out
}

// Close cancels every job and waits for the workers.
func (s *Stager) Close() error {
	s.close.Do(func() {
		s.mu.Lock()
		s.cancel()
		close(s.queue)
		s.mu.Unlock()
		s.wg.Wait()
	})
	return nil
}

func (j *job) status() backend.StageJob {
	st := backend.StageJob{ID: j.id, Submitted: j.submitted, Files: make([]backend.StageFile, len(j.files))}
	for i, t := range j.files {
		st.Files[i] = backend.StageFile{Path: t.req.String(), State: t.state.Load().(string),
			Bytes: t.bytes.Load(), Size: t.size.Load(), Err: t.err.Load().(string)}
	}
	return st
}

func (s *Stager) worker() {
	defer s.wg.Done()
	for t := range s.queue {
		s.stats.Queued.Add(-1)
		if t.j.ctx.Err() != nil {
			t.state.Store(backend.StageCancelled)
			continue
		}
		s.stats.Running.Add(1)
		t.state.Store(backend.StageRunning)
		err := s.stage(t)
		s.stats.Running.Add(-1)
		switch {
		case err == nil:
			t.state.Store(backend.StageDone)
			s.stats.Done.Add(1)
		case t.j.ctx.Err() != nil:
			t.state.Store(backend.StageCancelled)
		default:
			t.err.Store(err.Error())
			t.state.Store(backend.StageFailed)
			s.stats.Failed.Add(1)
			s.cfg.Logger.Warn("prestage of a file failed", "id", t.j.id, "path", t.req.String(), "err", err)
		}
	}
}

// completer is implemented by cache file handles: a complete file needs no
// staging.
type completer interface{ Complete() bool }

// stage reads t's file through the backend to its end.
func (s *Stager) stage(t *task) error {
	ctx := t.j.ctx
	f, err := s.be.Open(ctx, t.req)
	if err != nil {
		return err
	}
	defer f.Close()
	size := f.Info().Size
	t.size.Store(size)
	if c, ok := f.(completer); ok && c.Complete() {
		t.bytes.Store(size)
		return nil
	}
	n, err := f.Stream(ctx, 0, size, func(p []byte) error {
		t.bytes.Add(int64(len(p)))
		s.stats.Bytes.Add(int64(len(p)))
		return nil
	})
	if err == nil && n < size {
		err = fmt.Errorf("file ended after %d of %d bytes", n, size)
	}
	return err
}
