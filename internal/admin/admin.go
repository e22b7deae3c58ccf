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
	"strings"
	"sync/atomic"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/prestage"
)

// ErrLocked means a server holds the cache directory.
var ErrLocked = errors.New("admin: cache directory is in use by a running server")

// SocketPath is the admin socket of the server using cache directory dir.
func SocketPath(dir string) string { return filepath.Join(dir, "admin.sock") }

// LockWait is Lock, waiting up to wait for a process that holds the lock
// (a server handing over to its successor) to let go of it.
func LockWait(dir string, wait time.Duration) (unlock func(), err error) {
	deadline := time.Now().Add(wait)
	for {
		unlock, err = Lock(dir)
		if !errors.Is(err, ErrLocked) || !time.Now().Before(deadline) {
			return unlock, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Server answers admin requests for one cache.
type Server struct {
	c   *cache.Cache
	st  *prestage.Stager
	srv *http.Server
	ln  net.Listener
	// reload is what SIGHUP does (SetReload); nil until set.
	reload atomic.Pointer[func() error]
	// upgrade is what SIGUSR2 does (SetUpgrade); nil until set.
	upgrade atomic.Pointer[func() (string, error)]
}

// SetUpgrade sets what an upgrade request runs (`hepcache upgrade`): the
// hand-over to a new binary that SIGUSR2 starts; it returns what it did.
func (s *Server) SetUpgrade(fn func() (string, error)) { s.upgrade.Store(&fn) }

func (s *Server) doUpgrade(w http.ResponseWriter, r *http.Request) {
	fn := s.upgrade.Load()
	if fn == nil {
		http.Error(w, "this server does not upgrade in place", http.StatusNotImplemented)
		return
	}
	msg, err := (*fn)()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	fmt.Fprintln(w, msg)
}

// Upgrade asks the server running on dir to hand its sockets over to the
// binary now installed at its path and to stop once that one took over.
func Upgrade(dir string) (string, error) {
	c := client(dir)
	c.Timeout = 5 * time.Minute // the new binary checks its configuration first
	resp, err := c.Post("http://admin/upgrade", "text/plain", nil)
	if err != nil {
		return "", fmt.Errorf("admin socket: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("upgrade: %s", strings.TrimSpace(string(b)))
	}
	return strings.TrimSpace(string(b)), nil
}

// SetReload sets what a reload request runs: the server's SIGHUP reload,
// so that `hepcache reload` (logrotate's postrotate) works with or
// without systemd and reports the outcome.
func (s *Server) SetReload(fn func() error) { s.reload.Store(&fn) }

func (s *Server) doReload(w http.ResponseWriter, r *http.Request) {
	fn := s.reload.Load()
	if fn == nil {
		http.Error(w, "this server reloads on SIGHUP only", http.StatusNotImplemented)
		return
	}
	if err := (*fn)(); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	fmt.Fprintln(w, "reloaded")
}

// Reload asks the server running on dir to reload as on SIGHUP (reopen
// its logs, re-read its configuration and certificates).
func Reload(dir string) error {
	resp, err := client(dir).Post("http://admin/reload", "text/plain", nil)
	if err != nil {
		return fmt.Errorf("admin socket: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("reload: %s", strings.TrimSpace(string(b)))
	}
	return nil
}

// Listen starts the admin socket of c in its cache directory; st (nil:
// none) stages the lists `hepcache prestage` sends; wrap (nil: none)
// wraps its listener (the server's, which backs off from failed accepts).
func Listen(c *cache.Cache, st *prestage.Stager, wrap func(net.Listener) net.Listener) (*Server, error) {
	p := SocketPath(c.Config().Dir)
	os.Remove(p) // a stale socket of a crashed server; we hold the lock
	ln, err := net.Listen("unix", p)
	if err != nil {
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	os.Chmod(p, 0o600)
	s := &Server{c: c, st: st, ln: ln}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /evict", s.evict)
	mux.HandleFunc("POST /reload", s.doReload)
	mux.HandleFunc("POST /upgrade", s.doUpgrade)
	mux.HandleFunc("GET /usage", s.usage)
	mux.HandleFunc("GET /space", s.space)
	mux.HandleFunc("POST /prestage", s.prestage)
	mux.HandleFunc("GET /prestage", s.prestageStatus)
	mux.HandleFunc("POST /prestage/cancel", s.prestageCancel)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	if wrap != nil {
		ln = wrap(ln)
	}
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
	if err := getJSON(dir, "/space", &sp); err != nil {
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

// maxList bounds a prestage list sent over the socket (a million paths).
const maxList = 256 << 20

func (s *Server) prestage(w http.ResponseWriter, r *http.Request) {
	if s.st == nil {
		http.Error(w, "prestaging is not enabled", http.StatusNotImplemented)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxList))
	if err != nil {
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	reqs, err := prestage.ParseList(string(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	for i := range reqs {
		reqs[i].User, reqs[i].Protocol = "admin", "admin"
	}
	id, err := s.st.Stage(backend.AdminOwner, reqs)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, id)
}

func (s *Server) prestageStatus(w http.ResponseWriter, r *http.Request) {
	if s.st == nil {
		http.Error(w, "prestaging is not enabled", http.StatusNotImplemented)
		return
	}
	id := r.FormValue("id")
	if id == "" {
		json.NewEncoder(w).Encode(s.st.Jobs(0))
		return
	}
	j, err := s.st.StageStatus(backend.AdminOwner, id)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	json.NewEncoder(w).Encode(j)
}

func (s *Server) prestageCancel(w http.ResponseWriter, r *http.Request) {
	if s.st == nil || s.st.CancelStage(backend.AdminOwner, r.FormValue("id")) != nil {
		http.Error(w, "unknown prestage job "+r.FormValue("id"), http.StatusNotFound)
		return
	}
}

// Prestage sends a file list (ParseList's format) to the server running
// on dir and returns the job's id.
func Prestage(dir, list string) (string, error) {
	resp, err := client(dir).Post("http://admin/prestage", "text/plain", strings.NewReader(list))
	if err != nil {
		return "", fmt.Errorf("admin socket: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("prestage: %s", strings.TrimSpace(string(b)))
	}
	return strings.TrimSpace(string(b)), nil
}

// PrestageStatus reports job id of the server running on dir.
func PrestageStatus(dir, id string) (backend.StageJob, error) {
	var j backend.StageJob
	return j, getJSON(dir, "/prestage?id="+url.QueryEscape(id), &j)
}

// PrestageJobs lists the prestage jobs the server running on dir knows.
func PrestageJobs(dir string) ([]backend.StageJob, error) {
	var js []backend.StageJob
	return js, getJSON(dir, "/prestage", &js)
}

// PrestageCancel cancels job id on the server running on dir.
func PrestageCancel(dir, id string) error {
	resp, err := client(dir).PostForm("http://admin/prestage/cancel", url.Values{"id": {id}})
	if err != nil {
		return fmt.Errorf("admin socket: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("cancel: %s", strings.TrimSpace(string(b)))
	}
	return nil
}

func getJSON(dir, path string, v any) error {
	resp, err := client(dir).Get("http://admin" + path)
	if err != nil {
		return fmt.Errorf("admin socket: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s", strings.TrimSpace(string(b)))
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
