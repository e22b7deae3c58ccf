package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hepcache/hepcache/internal/xrdproc"
)

// watch ends a benchmark run as soon as a server it started (the origin, a
// cache, the S3 server) exits without being stopped: the run's context is
// cancelled with the server's name and the end of its log, and the run
// returns that instead of its own error. Without it a dead origin left
// bench throughput's xrdcp waiting out XrdCl's connection window and
// failing 8 minutes later with "[FATAL] Connection error".
type watch struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// errServerDied marks a run ended by a server's exit.
var errServerDied = errors.New("bench: a server exited while the benchmark ran")

func newWatch(parent context.Context) *watch {
	ctx, cancel := context.WithCancelCause(parent)
	return &watch{ctx: ctx, cancel: cancel}
}

// server watches one server: died is closed when it exits unasked, log
// gives what it wrote.
func (w *watch) server(name string, died <-chan struct{}, log func() string) {
	if died == nil {
		return
	}
	go func() {
		select {
		case <-died:
			w.cancel(fmt.Errorf("%s: %w; the end of its log:\n%s", name, errServerDied, logTail(log(), 15)))
		case <-w.ctx.Done():
		}
	}()
}

// xrootd watches a C++ xrootd (an origin).
func (w *watch) xrootd(name string, s *xrdproc.Server) {
	w.server(name+" (xrootd at "+s.Addr+")", s.Died(), s.Log)
}

// cache watches a cache process (a nil watch watches nothing); it
// returns c for chaining.
func (w *watch) cache(c *cacheProc) *cacheProc {
	if w != nil && c != nil {
		w.server(c.kind+" at "+c.addr, c.died, c.log)
	}
	return c
}

// result is what the run returns: why a server died, if one did and the
// run failed, else err.
func (w *watch) result(err error) error {
	if cause := context.Cause(w.ctx); err != nil && errors.Is(cause, errServerDied) {
		return cause
	}
	return err
}

// close ends the watching (the run is over: its servers are stopped).
func (w *watch) close() { w.cancel(context.Canceled) }

// logTail is the last n lines of s, indented.
func logTail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// smoke is a --smoke run: a benchmark starts its servers as it would,
// reads one small file through each with the real xrdcp, and stops;
// nothing is measured. It checks a set-up in seconds where the benchmark
// takes minutes or hours.
type smoke struct {
	ctx      context.Context
	progress func(string, ...any)
	// file is the path, under the origin's export, of the file read.
	file string
}

// read reads the file through the server at url ("root://host:port").
func (s smoke) read(what, url string) error {
	cmd := xrdcp(s.ctx, url+"/"+s.file, "/dev/null")
	// A refused connection fails at once instead of after XrdCl's
	// connection window: nothing else would answer.
	cmd.Env = append(cmd.Env, "XRD_CONNECTIONRETRY=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("--smoke: %s: xrdcp %s/%s: %w: %s", what, url, s.file, err, bytes.TrimSpace(out))
	}
	s.progress("smoke: %s at %s started and served %s", what, url, s.file)
	return nil
}

// smokeBehindLink reads through the origin, the link in front of it (at
// linkAddr) and each cache started behind the link.
func smokeBehindLink(sm smoke, w *watch, origin *xrdproc.Server, linkAddr string, kinds []string, start func(kind string) (*cacheProc, error)) error {
	if err := sm.read("the origin through the emulated link", "root://"+linkAddr); err != nil {
		return err
	}
	return sm.originThenCaches(w, origin, kinds, start)
}

// originThenCaches reads through the origin, then through each cache of
// kinds that start starts.
func (s smoke) originThenCaches(w *watch, origin *xrdproc.Server, kinds []string, start func(kind string) (*cacheProc, error)) error {
	if err := s.read("origin", origin.URL); err != nil {
		return err
	}
	return s.caches(w, kinds, start)
}

// withXCache is hepcache, and XCache unless no.
func withXCache(no bool) []string {
	if no {
		return []string{"hepcache"}
	}
	return []string{"hepcache", "xcache"}
}

// caches starts each kind with start, reads through it and stops it.
func (s smoke) caches(w *watch, kinds []string, start func(kind string) (*cacheProc, error)) error {
	for _, kind := range kinds {
		c, err := start(kind)
		if err != nil {
			return fmt.Errorf("--smoke: start %s: %w", kind, err)
		}
		w.cache(c)
		err = s.read(kind, c.url())
		c.stop()
		if err != nil {
			return err
		}
	}
	return nil
}
