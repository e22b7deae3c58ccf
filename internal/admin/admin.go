// Package admin lets command-line tools act on a running server: the server
// holds an exclusive lock on its cache directory and answers on a Unix socket
// inside it (evict a file, report usage). Tools that find the lock free work
// on the directory directly.
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hepcache/hepcache/internal/cache"
)

// ErrLocked means a server holds the cache directory.
var ErrLocked = errors.New("admin: cache directory is in use by a running server")

// SocketPath is the admin socket of the server using cache directory dir.
func SocketPath(dir string) string { return filepath.Join(dir, "admin.sock") }

// Lock takes the exclusive lock on dir. The lock is released by the
// returned function or when the process dies (kill -9 included).
func Lock(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock cache dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w", dir, ErrLocked)
		}
		return nil, fmt.Errorf("lock cache dir: %w", err)
	}
	return func() { f.Close() }, nil
}

// Server answers admin requests for one cache.
type Server struct {
	c   *cache.Cache
	srv *http.Server
	ln  net.Listener
}

// Listen starts the admin socket of c in its cache directory.
func Listen(c *cache.Cache) (*Server, error) {
	p := SocketPath(c.Config().Dir)
	os.Remove(p) // a stale socket of a crashed server; we hold the lock
	ln, err := net.Listen("unix", p)
	if err != nil {
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	os.Chmod(p, 0o600)
	s := &Server{c: c, ln: ln}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /evict", s.evict)
	mux.HandleFunc("GET /usage", s.usage)
	mux.HandleFunc("GET /space", s.space)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go s.srv.Serve(ln)
	return s, nil
}

// Close stops the admin socket.
func (s *Server) Close() error {
	err := s.srv.Close()
	os.Remove(s.ln.Addr().String())
	return err
}

func (s *Server) evict(w http.ResponseWriter, r *http.Request) {
	o, p := r.FormValue("origin"), r.FormValue("path")
	n, err := s.c.Evict(o, p)
	switch {
	case errors.Is(err, cache.ErrBusy):
		http.Error(w, err.Error(), http.StatusConflict)
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadRequest)
	default:
		fmt.Fprintf(w, "%d\n", n)
	}
}

func (s *Server) usage(w http.ResponseWriter, r *http.Request) {
	u, err := s.c.Usage()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	json.NewEncoder(w).Encode(u)
}

// Space is a running cache's occupancy, quotas and directory statistics.
type Space struct {
	Usage  cache.Usage
	Quotas []cache.QuotaUsage
	Dirs   []cache.DirStat
}

func (s *Server) space(w http.ResponseWriter, r *http.Request) {
	u, err := s.c.Usage()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	json.NewEncoder(w).Encode(Space{Usage: u, Quotas: s.c.Quotas(), Dirs: s.c.DirStats()})
}

// GetSpace asks the server running on dir for its occupancy, quotas and
// directory statistics.
func GetSpace(dir string) (Space, error) {
	var sp Space
	resp, err := client(dir).Get("http://admin/space")
	if err != nil {
		return sp, fmt.Errorf("admin socket: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return sp, fmt.Errorf("space: %s", b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&sp); err != nil {
		return sp, fmt.Errorf("space: %w", err)
	}
	return sp, nil
}

func client(dir string) *http.Client {
	sock := SocketPath(dir)
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}}
}

// Evict asks the server running on dir to evict a file.
func Evict(dir, originURL, path string) (int64, error) {
	resp, err := client(dir).PostForm("http://admin/evict", url.Values{"origin": {originURL}, "path": {path}})
	if err != nil {
		return 0, fmt.Errorf("admin socket: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("evict %s%s: %s", originURL, path, string(b))
	}
	var n int64
	fmt.Sscan(string(b), &n)
	return n, nil
}
