package pelican

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/hepcache/hepcache/internal/auth/token"
	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/nsauth"
)

// The cache's web API as the director and the Pelican client call it.
const (
	// DirectorTestPath receives the director's test reports
	// (director/monitor.go reportStatusToServer).
	DirectorTestPath = "/api/v1.0/cache/directorTest"
	// EvictTestFilePath receives the director's request to drop its test
	// object (director/cache_monitor.go evictCacheTestFile).
	EvictTestFilePath = "/api/v1.0/cache/evictTestFile"
	// PrestagePath and EvictPath are the Pelican client's
	// (client/prestage_api.go, client/evict.go).
	PrestagePath = "/pelican/api/v1.0/prestage"
	EvictPath    = "/pelican/api/v1.0/evict"
	// MetricsPath is where the director's Prometheus scrapes the load
	// (web_ui/prometheus.go configDirectorPromScraper).
	MetricsPath = "/metrics"
)

// Scopes of the federation's own tokens (token_scopes/token_scopes.go).
const (
	scopeDirectorTest = "pelican.director_test_report"
	scopeScrape       = "monitoring.scrape"
)

// directorTestFile is the shape of the director's test objects
// (cache/cache_api.go directorTestFilePattern): only those may be evicted
// by the director.
var directorTestFile = regexp.MustCompile(`^/pelican/monitoring/directorTest/[^/[:cntrl:]]+/\d{4}-\d{2}-\d{2}/director-test-[^/[:cntrl:]]+$`)

// Routes are the handlers of the director's and the Pelican client's calls
// on the cache, by exact path, for the https front end (its Config.Routes).
// The metrics route is apart (MetricsHandler): the server serves it only
// where /metrics is not served already.
func (m *Member) Routes() map[string]http.Handler {
	r := map[string]http.Handler{
		DirectorTestPath:  http.HandlerFunc(m.serveDirectorTest),
		EvictTestFilePath: http.HandlerFunc(m.serveEvictTestFile),
		PrestagePath:      http.HandlerFunc(m.servePrestage),
		EvictPath:         http.HandlerFunc(m.serveEvict),
	}
	return r
}

// apiResponse is Pelican's SimpleApiResp.
type apiResponse struct {
	Status string `json:"status"`
	Msg    string `json:"msg,omitempty"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, apiResponse{Status: "error", Msg: msg})
}

// federationToken verifies that r carries a token the federation signed
// with scope; the error is the reason, never the token.
func (m *Member) federationToken(r *http.Request, scope string) (*token.Claims, error) {
	v := m.fedVerifier.Load()
	if v == nil {
		return nil, errors.New("the federation's keys are not known yet (no discovery)")
	}
	h := r.Header.Get("Authorization")
	if len(h) < 8 || !strings.EqualFold(h[:7], "bearer ") {
		return nil, errors.New("no bearer token")
	}
	c, err := v.Verify(r.Context(), strings.TrimSpace(h[7:]))
	if err != nil {
		return nil, fmt.Errorf("token refused: %s", strings.TrimSuffix(err.Error(), ": "+token.ErrInvalid.Error()))
	}
	if !c.HasScope(scope) {
		return nil, fmt.Errorf("the token of %s lacks scope %s", c.Name(), scope)
	}
	return c, nil
}

// serveDirectorTest takes a director test report (server_utils/monitor.go
// HandleDirectorTestResponse answers the same).
func (m *Member) serveDirectorTest(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		fail(w, http.StatusMethodNotAllowed, "POST a director test report")
		return
	}
	if _, err := m.federationToken(r, scopeDirectorTest); err != nil {
		m.log.Warn("pelican: director test report refused", "client", r.RemoteAddr, "reason", err)
		fail(w, http.StatusForbidden, "Failed to verify the token: "+err.Error())
		return
	}
	var dt struct {
		Status    string `json:"status"`
		Message   string `json:"message"`
		Timestamp int64  `json:"timestamp"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&dt); err != nil {
		fail(w, http.StatusBadRequest, "Invalid director test response: "+err.Error())
		return
	}
	switch dt.Status {
	case "ok", "error":
	default:
		fail(w, http.StatusBadRequest, "Invalid director test response status: "+dt.Status)
		return
	}
	at := time.Unix(dt.Timestamp, 0)
	m.stats.DirectorTests.Add(1)
	result := "ok"
	if dt.Status == "ok" {
		m.stats.DirectorTestOK.Add(1)
		m.log.Debug("pelican: director test ok", "at", at.UTC().Format(time.RFC3339))
	} else {
		result = "error: " + boundText(dt.Message, 300)
		m.log.Warn("pelican: the director's test of the cache failed", "message", boundText(dt.Message, 300))
	}
	m.mu.Lock()
	m.st.DirectorTest, m.st.DirectorTestAt = result, at
	m.mu.Unlock()
	writeJSON(w, http.StatusOK, apiResponse{Status: "success", Msg: "Success"})
}

func boundText(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// serveEvictTestFile drops the director's test object of an earlier
// cycle (cache/cache_api.go HandleDirectorEvictRequest).
func (m *Member) serveEvictTestFile(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		fail(w, http.StatusMethodNotAllowed, "POST the test file's path")
		return
	}
	if _, err := m.federationToken(r, scopeDirectorTest); err != nil {
		fail(w, http.StatusForbidden, "Failed to verify the token: "+err.Error())
		return
	}
	var req struct {
		Path string `json:"path"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&req); err != nil || req.Path == "" {
		fail(w, http.StatusBadRequest, "Missing or invalid 'path' in request body")
		return
	}
	if !directorTestFile.MatchString(req.Path) || path.Clean(req.Path) != req.Path {
		fail(w, http.StatusBadRequest, "Path does not match the expected director test file shape; refusing to evict")
		return
	}
	if m.cfg.Evict != nil {
		if _, err := m.cfg.Evict(req.Path); err != nil {
			m.log.Warn("pelican: could not evict a director test file", "path", req.Path, "err", err)
			fail(w, http.StatusInternalServerError, "Failed to evict: "+err.Error())
			return
		}
	}
	writeJSON(w, http.StatusOK, apiResponse{Status: "success", Msg: "Evicted " + req.Path})
}

// bearerOf is a request's bearer token: the Authorization header, else
// the authz query parameter.
func bearerOf(r *http.Request) string {
	if h := r.Header.Get("Authorization"); len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return token.Bearer(h)
	}
	return token.Bearer(r.URL.Query().Get("authz"))
}

// apiPath is the clean absolute path of the "path" parameter.
func apiPath(r *http.Request) (string, error) {
	p := r.URL.Query().Get("path")
	if p == "" {
		return "", errors.New("requires the `path` query parameter")
	}
	if !strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) || strings.Contains("/"+p+"/", "/../") {
		return "", errors.New("must be an absolute path without '..'")
	}
	return path.Clean(p), nil
}

// servePrestage is the Pelican client's prestage API: the object at path
// is fetched into the cache while the answer streams its progress, one
// line every second ("status: queued", "status: active,offset=N"), then
// "success: ok" or "failure: CODE(TEXT): reason", as the client reads it
// (client/prestage_api.go invokePrestageAPI). Reads are authorized as a
// GET of the object by the same client.
func (m *Member) servePrestage(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		http.Error(w, "GET with ?path=", http.StatusMethodNotAllowed)
		return
	}
	p, err := apiPath(r)
	if err != nil {
		// A 400 without path is how a client learns the API exists.
		http.Error(w, "Prestage command request "+err.Error(), http.StatusBadRequest)
		return
	}
	if m.cfg.Stager == nil {
		http.Error(w, "this cache does not prestage", http.StatusNotImplemented)
		return
	}
	tok := bearerOf(r)
	d, err := m.auth.Decide(r.Context(), p, nsauth.OpRead, tok)
	if errors.Is(err, nsauth.ErrNoNamespace) {
		err = fmt.Errorf("%s is in no namespace of the federation: %w", p, backend.ErrForbidden)
	}
	if err != nil {
		http.Error(w, "Permission denied to prestage path: "+err.Error(), http.StatusForbidden)
		return
	}
	req := backend.Request{Path: p, Client: r.RemoteAddr, Protocol: "https"}
	d.Apply(&req, tok) // a private object: its origin authorizes the reader
	owner := backend.HostOwner(r.RemoteAddr)
	if d.User != "" {
		owner = backend.UserOwner(d.User)
	}
	id, err := m.cfg.Stager.Stage(owner, []backend.Request{req})
	if errors.Is(err, backend.ErrBusy) {
		w.Header().Set("Retry-After", "10")
		http.Error(w, "Too many prestage requests at server", http.StatusTooManyRequests)
		return
	}
	if err != nil {
		http.Error(w, "failure: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		job, err := m.cfg.Stager.StageStatus(owner, id)
		if err != nil {
			fmt.Fprintf(w, "failure: 500(%s): %v\n", http.StatusText(500), err)
			return
		}
		if job.Finished() {
			if job.Counts[backend.StageDone] == job.Total {
				fmt.Fprint(w, "success: ok\n")
			} else {
				fmt.Fprintf(w, "failure: 500(%s): %s\n", http.StatusText(500), boundText(job.FirstError, 500))
			}
			rc.Flush()
			return
		}
		if job.Counts[backend.StageRunning] > 0 {
			fmt.Fprintf(w, "status: active,offset=%d\n", job.Bytes)
		} else {
			fmt.Fprint(w, "status: queued\n")
		}
		if rc.Flush() != nil {
			m.cfg.Stager.CancelStage(owner, id)
			return
		}
		select {
		case <-tick.C:
		case <-r.Context().Done():
			// The client left; the file goes on being staged.
			return
		}
	}
}

// serveEvict is the Pelican client's evict API: the cached copy at path is
// removed, for a token granting storage.modify on it (client/evict.go;
// local_cache/prestage_evict_api.go evictHandler asks the same). GET is
// what the client sends; POST and DELETE are taken too.
func (m *Member) serveEvict(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodPost, http.MethodDelete:
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "GET, POST or DELETE with ?path=", http.StatusMethodNotAllowed)
		return
	}
	p, err := apiPath(r)
	if err != nil {
		http.Error(w, "Eviction request "+err.Error(), http.StatusBadRequest)
		return
	}
	if m.cfg.Evict == nil {
		http.Error(w, "this cache does not evict on request", http.StatusNotImplemented)
		return
	}
	if _, err := m.auth.Decide(r.Context(), p, nsauth.OpModify, bearerOf(r)); err != nil {
		if errors.Is(err, nsauth.ErrNoNamespace) {
			err = fmt.Errorf("%s is in no namespace of the federation", p)
		}
		http.Error(w, "Permission denied to evict path: "+err.Error(), http.StatusForbidden)
		return
	}
	n, err := m.cfg.Evict(p)
	if err != nil {
		m.log.Warn("pelican: evict failed", "path", p, "err", err)
		http.Error(w, "Eviction operation failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	m.log.Info("pelican: evicted on request", "path", p, "files", n, "client", r.RemoteAddr)
	fmt.Fprintf(w, "Evicted %d objects under %s", n, p)
}

// MetricsHandler serves the load the director's Prometheus scrapes from
// WebURL: xrootd_server_io_total (storage operations so far; the director
// ranks caches by its rate, director/director_api.go
// LaunchServerIOQuery) and xrootd_server_io_active, to a scraper holding
// a federation token with scope monitoring.scrape. Other requests go to
// next (the cache's own /metrics where it is served on the same
// listener), or are refused when next is nil.
func (m *Member) MetricsHandler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := m.federationToken(r, scopeScrape); err != nil {
			if next != nil {
				next.ServeHTTP(w, r)
				return
			}
			http.Error(w, "metrics are for the federation's scraper: "+err.Error(), http.StatusForbidden)
			return
		}
		var total, active int64
		if m.cfg.Load != nil {
			total, active = m.cfg.Load()
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		fmt.Fprintf(w, "# HELP xrootd_server_io_total Total storage operations in origin/cache server\n# TYPE xrootd_server_io_total counter\nxrootd_server_io_total %d\n", total)
		fmt.Fprintf(w, "# HELP xrootd_server_io_active Number of ongoing storage operations in origin/cache server\n# TYPE xrootd_server_io_active gauge\nxrootd_server_io_active %d\n", active)
	})
}
