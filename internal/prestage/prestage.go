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
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
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
	// MaxListBytes bounds the memory held by the file lists of unfinished
	// jobs (each file costs its names plus fileOverhead bytes); a request
	// that would exceed it is refused with ErrBusy. Default 64 MiB.
	MaxListBytes int64
	// KeepJobs is how many jobs are remembered for status queries (default
	// 1000); the oldest finished ones are forgotten first. A finished job
	// keeps its counts and first error only: at most about
	// finishedJobBytes each.
	KeepJobs int
	Logger   *slog.Logger
}

const (
	// fileOverhead is the memory of one queued file besides its names:
	// the task, its request and their atomics (measured with
	// TestListMemoryBounded: about 330 bytes on amd64).
	fileOverhead = 400
	// maxFirstError bounds the error kept of a failed file and the one
	// a finished job keeps.
	maxFirstError = 512
	// finishedJobBytes is what a finished job costs at most: its struct,
	// id, owner (capped at maxOwner), counts and first error.
	finishedJobBytes = 2 << 10
	maxOwner         = 512
)

// EnsureDefaults fills unset fields.
func (c *Config) EnsureDefaults() {
	if c.Workers <= 0 {
		c.Workers = 4
	}
	if c.MaxQueued <= 0 {
		c.MaxQueued = 100000
	}
	if c.MaxListBytes <= 0 {
		c.MaxListBytes = 64 << 20
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
	Queued    atomic.Int64 // files waiting now
	Running   atomic.Int64 // files being staged now
	Done      atomic.Int64 // files staged
	Failed    atomic.Int64 // files that could not be staged
	Bytes     atomic.Int64 // bytes read through the cache by staging
	ListBytes atomic.Int64 // memory held by the lists of unfinished jobs
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

	// mu protects jobs and order, and serialises senders on queue.
	mu    sync.Mutex
	jobs  map[string]*job
	order []string // job ids, oldest first
	close sync.Once
}

var _ backend.Stager = (*Stager)(nil)

type job struct {
	id        string
	owner     string
	submitted time.Time
	ctx       context.Context
	cancel    context.CancelFunc
	// cost is the memory of the list, counted in Stats.ListBytes until
	// the job finishes; the errors of its failed files add to it.
	cost atomic.Int64
	// pending counts the files not finished yet; the worker that takes
	// it to 0 compacts the job.
	pending  atomic.Int64
	firstErr atomic.Pointer[string]

	// mu protects files and done.
	mu sync.Mutex
	// files are the tasks while the job runs; nil once it finished.
	files []*task
	// done is the job's final summary once it finished (no Files).
	done *backend.StageJob
}

type task struct {
	j     *job
	req   backend.Request
	state atomic.Pointer[string] // one of the backend.Stage* constants
	bytes atomic.Int64
	size  atomic.Int64
	err   atomic.Pointer[string] // nil: no error
}

// The states as pointers: storing one allocates nothing.
var (
	stQueued    = ptr(backend.StageQueued)
	stRunning   = ptr(backend.StageRunning)
	stDone      = ptr(backend.StageDone)
	stFailed    = ptr(backend.StageFailed)
	stCancelled = ptr(backend.StageCancelled)
)

func ptr(s string) *string { return &s }

// errOf is t's error text, "" if none.
func (t *task) errOf() string {
	if e := t.err.Load(); e != nil {
		return *e
	}
	return ""
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

// listCost is the memory that the list of reqs holds while queued.
func listCost(reqs []backend.Request) int64 {
	n := int64(0)
	for _, r := range reqs {
		n += fileOverhead + int64(len(r.Origin)+len(r.Path)+len(r.Opaque)+len(r.Client)+len(r.User)+
			len(r.Protocol)+len(r.ClientLogin)+len(r.Auth))
	}
	return n
}

// newJobID is 128 random bits: an id cannot be guessed from another.
func newJobID() string {
	var b [16]byte
	rand.Read(b[:])
	return "hepcache-" + hex.EncodeToString(b[:])
}

// Stage implements backend.Stager.
func (s *Stager) Stage(owner backend.Owner, reqs []backend.Request) (string, error) {
	if len(reqs) == 0 {
		return "", errors.New("prestage: no files given")
	}
	cost := listCost(reqs)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return "", ErrClosed
	}
	if free := cap(s.queue) - len(s.queue); len(reqs) > free {
		return "", fmt.Errorf("prestage: %d files asked, room for %d in the queue (prestage.max_queued = %d): %w",
			len(reqs), free, s.cfg.MaxQueued, backend.ErrBusy)
	}
	if used := s.stats.ListBytes.Load(); used+cost > s.cfg.MaxListBytes {
		return "", fmt.Errorf("prestage: a list of %d files (%d bytes in memory) does not fit in the %d bytes left for the lists of unfinished jobs (prestage.max_list_memory = %d): %w",
			len(reqs), cost, max(s.cfg.MaxListBytes-used, 0), s.cfg.MaxListBytes, backend.ErrBusy)
	}
	name := owner.Name
	if len(name) > maxOwner {
		name = name[:maxOwner]
	}
	j := &job{id: newJobID(), owner: name, submitted: time.Now()}
	j.cost.Store(cost)
	j.ctx, j.cancel = context.WithCancel(s.ctx)
	j.pending.Store(int64(len(reqs)))
	j.files = make([]*task, 0, len(reqs))
	for _, r := range reqs {
		t := &task{j: j, req: r}
		t.state.Store(stQueued)
		j.files = append(j.files, t)
	}
	s.stats.ListBytes.Add(cost)
	s.jobs[j.id] = j
	s.order = append(s.order, j.id)
	s.forgetLocked()
	// Room was checked under s.mu, the only sender's lock: never blocks.
	for _, t := range j.files {
		s.stats.Queued.Add(1)
		s.queue <- t
	}
	s.cfg.Logger.Info("prestage job queued", "id", j.id, "owner", j.owner, "files", len(reqs))
	return j.id, nil
}

// forgetLocked drops the oldest finished jobs beyond KeepJobs.
// MUST be called with s.mu held.
func (s *Stager) forgetLocked() {
	for i := 0; len(s.order) > s.cfg.KeepJobs && i < len(s.order); {
		id := s.order[i]
		if s.jobs[id].pending.Load() > 0 {
			i++
			continue
		}
		delete(s.jobs, id)
		s.order = append(s.order[:i], s.order[i+1:]...)
	}
}

// lookup returns job id if owner may see it.
func (s *Stager) lookup(owner backend.Owner, id string) (*job, error) {
	s.mu.Lock()
	j := s.jobs[id]
	s.mu.Unlock()
	if j == nil {
		return nil, fmt.Errorf("prestage job %q: %w", id, backend.ErrUnknownJob)
	}
	if !owner.Admin && owner.Name != j.owner {
		return nil, fmt.Errorf("prestage job %q was submitted by another identity: %w", id, backend.ErrForbidden)
	}
	return j, nil
}

// StageStatus implements backend.Stager.
func (s *Stager) StageStatus(owner backend.Owner, id string) (backend.StageJob, error) {
	j, err := s.lookup(owner, id)
	if err != nil {
		return backend.StageJob{}, err
	}
	return j.status(true), nil
}

// CancelStage implements backend.Stager.
func (s *Stager) CancelStage(owner backend.Owner, id string) error {
	j, err := s.lookup(owner, id)
	if err != nil {
		return err
	}
	j.cancel()
	s.cfg.Logger.Info("prestage job cancelled", "id", id, "by", owner.Name)
	return nil
}

// Jobs returns the newest n remembered jobs (all if n <= 0), newest first,
// whoever submitted them, as counts without their files: for the admin
// socket's list and the dashboard.
func (s *Stager) Jobs(n int) []backend.StageJob {
	s.mu.Lock()
	js := make([]*job, 0, len(s.order))
	for i := len(s.order) - 1; i >= 0 && (n <= 0 || len(js) < n); i-- {
		js = append(js, s.jobs[s.order[i]])
	}
	s.mu.Unlock()
	out := make([]backend.StageJob, len(js))
	for i, j := range js {
		out[i] = j.status(false)
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

// status is j's progress: its counts, and its files while it runs if
// files is set.
func (j *job) status(files bool) backend.StageJob {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.done != nil {
		st := *j.done
		st.Counts = maps.Clone(j.done.Counts)
		return st
	}
	st := backend.StageJob{ID: j.id, Submitted: j.submitted, Owner: j.owner, Total: len(j.files), Counts: make(map[string]int, 5)}
	if files {
		st.Files = make([]backend.StageFile, 0, len(j.files))
	}
	for _, t := range j.files {
		f := backend.StageFile{State: *t.state.Load(), Bytes: t.bytes.Load(), Size: t.size.Load()}
		if files {
			f.Path, f.Err = t.req.String(), t.errOf()
			st.Files = append(st.Files, f)
		}
		st.Counts[f.State]++
		st.Bytes += f.Bytes
		st.Size += f.Size
	}
	if e := j.firstErr.Load(); e != nil {
		st.FirstError = *e
	}
	return st
}

// fileDone records the end of one of j's files; the last one compacts j to
// its counts and releases the memory of its list.
func (s *Stager) fileDone(t *task) {
	j := t.j
	if e := t.errOf(); e != "" && j.firstErr.Load() == nil {
		msg := t.req.String() + ": " + e
		if len(msg) > maxFirstError {
			msg = msg[:maxFirstError] + "..."
		}
		j.firstErr.CompareAndSwap(nil, &msg)
	}
	if j.pending.Add(-1) != 0 {
		return
	}
	st := j.status(false)
	j.mu.Lock()
	j.done, j.files = &st, nil
	j.mu.Unlock()
	s.stats.ListBytes.Add(-j.cost.Load())
}

func (s *Stager) worker() {
	defer s.wg.Done()
	for t := range s.queue {
		s.stats.Queued.Add(-1)
		s.run(t)
		s.fileDone(t)
	}
}

// run stages t and records its final state.
func (s *Stager) run(t *task) {
	if t.j.ctx.Err() != nil {
		t.state.Store(stCancelled)
		return
	}
	s.stats.Running.Add(1)
	t.state.Store(stRunning)
	err := s.stage(t)
	s.stats.Running.Add(-1)
	switch {
	case err == nil:
		t.state.Store(stDone)
		s.stats.Done.Add(1)
	case t.j.ctx.Err() != nil:
		t.state.Store(stCancelled)
	default:
		// Kept until the job finishes, so counted with its list (an
		// origin's message can be long).
		msg := err.Error()
		if len(msg) > maxFirstError {
			msg = msg[:maxFirstError] + "..."
		}
		t.j.cost.Add(int64(len(msg)))
		s.stats.ListBytes.Add(int64(len(msg)))
		t.err.Store(&msg)
		t.state.Store(stFailed)
		s.stats.Failed.Add(1)
		s.cfg.Logger.Warn("prestage of a file failed", "id", t.j.id, "path", t.req.String(), "err", err)
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
