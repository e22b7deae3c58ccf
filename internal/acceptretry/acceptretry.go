// Package acceptretry keeps a listener accepting through errors that pass:
// out of descriptors (EMFILE, ENFILE), out of kernel memory, a connection
// aborted before it was taken. Accept backs off (5 ms doubling to 1 s, as
// net/http) and tries again, with a log line per episode and a counter,
// instead of handing the error to a server loop that ends on it: nginx
// (ngx_event_accept.c) likewise stops accepting for a while on EMFILE and
// goes on. Only Close ends it.
package acceptretry

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Back-off between failed accepts: as net/http's Server.Serve.
const (
	minBackoff = 5 * time.Millisecond
	maxBackoff = time.Second
	// relogAfter is how often a failure that goes on is logged again.
	relogAfter = time.Minute
)

// Stats counts a Listener's failed accepts. Safe for concurrent use.
type Stats struct {
	// Errors counts accept errors retried after a back-off.
	Errors atomic.Int64
}

// Listener is a net.Listener whose Accept returns only a connection or,
// once Close was called, an error. Safe for concurrent use.
type Listener struct {
	net.Listener
	name  string
	log   *slog.Logger
	stats *Stats
	// sleep waits d or until done is closed; a test seam.
	sleep func(d time.Duration, done <-chan struct{})

	once sync.Once
	done chan struct{} // closed by Close
}

// Wrap returns ln retrying failed accepts. name says which listener it
// is in the log ("root", "http"); st (nil: none) counts the failures.
func Wrap(ln net.Listener, name string, log *slog.Logger, st *Stats) *Listener {
	if log == nil {
		log = slog.Default()
	}
	if st == nil {
		st = &Stats{}
	}
	return &Listener{Listener: ln, name: name, log: log, stats: st, sleep: sleep, done: make(chan struct{})}
}

func sleep(d time.Duration, done <-chan struct{}) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-done:
	}
}

// Accept waits for the next connection; it fails only after Close (or
// when the listener was closed under it: net.ErrClosed).
func (l *Listener) Accept() (net.Conn, error) {
	var backoff time.Duration
	var failed int64
	var first, logged time.Time
	for {
		c, err := l.Listener.Accept()
		if err == nil {
			if failed > 0 {
				l.log.Info("accepting connections again", "listener", l.name, "failed_accepts", failed,
					"for", time.Since(first).Round(time.Millisecond).String())
			}
			return c, nil
		}
		select {
		case <-l.done:
			return nil, err
		default:
		}
		var ne net.Error
		if errors.Is(err, net.ErrClosed) || errors.As(err, &ne) && ne.Timeout() {
			return nil, err // closed, or the caller's deadline (SetDeadline)
		}
		l.stats.Errors.Add(1)
		failed++
		backoff = min(max(2*backoff, minBackoff), maxBackoff)
		now := time.Now()
		if failed == 1 {
			first = now
		}
		if failed == 1 || now.Sub(logged) >= relogAfter {
			logged = now
			args := []any{"listener", l.name, "err", err, "backoff", backoff.String(), "failed_accepts", failed}
			if OutOfDescriptors(err) {
				args = append(args, "hint", "out of file descriptors: lower limits.max_connections or raise the service's LimitNOFILE")
			}
			l.log.Warn("accept failed; backing off and accepting again", args...)
		}
		l.sleep(backoff, l.done)
	}
}

// SetDeadline bounds Accept in time, where the listener allows it (a
// caller that polls, as hostallow's): its timeout is returned, not
// retried.
func (l *Listener) SetDeadline(t time.Time) error {
	if d, ok := l.Listener.(interface{ SetDeadline(time.Time) error }); ok {
		return d.SetDeadline(t)
	}
	return errors.ErrUnsupported
}

// Close closes the listener and ends an Accept waiting to try again.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// OutOfDescriptors reports whether err is the process's or the system's
// descriptor limit (EMFILE, ENFILE).
func OutOfDescriptors(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}
