package cache

import (
	"errors"
	"io/fs"
	"syscall"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
)

// An open that meets the process's descriptor limit (EMFILE, ENFILE) on
// a data file or a sidecar first takes descriptors back from the files
// lingering after their last close (linger.go: each holds its data file),
// the oldest half of them, and tries once more. If that fails too, the
// client is told to come back (fdShortError: kXR_wait, HTTP 503), and the
// cached copy is kept: running out of descriptors says nothing about it.
// The server sizes Config.MaxLingering from its descriptor budget
// (fdbudget), so that this is the exception.

// fdRetryAfter is the wait, in seconds, of a client told to come back for
// want of descriptors.
const fdRetryAfter = 1

// fdGiveBackWait bounds how long an open waits for the lingering files it
// ended to close their data files (a retire waits for the fetches readers
// joined).
const fdGiveBackWait = time.Second

// fdShortError is an open that met the descriptor limit even after the
// lingering files gave theirs back.
type fdShortError struct{ err error }

func (e *fdShortError) Error() string { return "out of file descriptors: " + e.err.Error() }

// Unwrap gives the open's error (errors.Is(err, syscall.EMFILE)) and the
// wait the client is told (backend.WaitError).
func (e *fdShortError) Unwrap() []error {
	return []error{e.err, &backend.WaitError{Seconds: fdRetryAfter, Err: backend.ErrBusy,
		Reason: "the cache is out of file descriptors"}}
}

// outOfFDs reports whether err is an open that found no descriptor.
func outOfFDs(err error) bool {
	var fe *fdShortError
	return errors.As(err, &fe)
}

func fdLimit(err error) bool { return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) }

// withFDs runs open and, if it met the descriptor limit, gives back the
// lingering files' descriptors and runs it once more; an open that still
// finds none fails with an fdShortError.
func withFDs[T any](c *Cache, open func() (T, error)) (T, error) {
	v, err := open()
	if err == nil || !fdLimit(err) {
		return v, err
	}
	c.stats.FDShortages.Add(1)
	if c.giveBackDescriptors() {
		if v, err = open(); err == nil || !fdLimit(err) {
			return v, err
		}
	}
	c.warn("out of file descriptors even after ending lingering files early: the client is told to come back; raise LimitNOFILE or lower limits.max_connections", "err", err)
	return v, &fdShortError{err}
}

// readMeta reads a sidecar whole (readAll), with withFDs' retry.
func (c *Cache) readMeta(name string) ([]byte, fs.FileMode, error) {
	type read struct {
		b    []byte
		mode fs.FileMode
	}
	r, err := withFDs(c, func() (read, error) {
		b, mode, err := readAll(c.cfg.FS, name)
		return read{b, mode}, err
	})
	return r.b, r.mode, err
}

// giveBackDescriptors ends the linger of the oldest half of the lingering
// files (at least one) and waits, at most fdGiveBackWait, until their data
// files are closed. It reports whether any linger ended.
func (c *Cache) giveBackDescriptors() bool {
	c.mu.Lock()
	victims := make([]*entry, 0, (c.lingerq.n+1)/2)
	for e := c.lingerq.head; e != nil && len(victims) < cap(victims); e = e.lingerNext {
		victims = append(victims, e)
	}
	c.mu.Unlock()
	var retiring []chan struct{}
	for _, e := range victims {
		c.lingerEnd(e)
		c.mu.Lock()
		if e.finishing != nil {
			retiring = append(retiring, e.finishing)
		}
		c.mu.Unlock()
	}
	t := time.NewTimer(fdGiveBackWait)
	defer t.Stop()
	for _, ch := range retiring {
		select {
		case <-ch:
		case <-t.C:
			return true
		}
	}
	return len(victims) > 0
}

// Lingering returns the number of files lingering after their last close,
// each holding its data file's descriptor.
func (c *Cache) Lingering() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lingerq.n
}
