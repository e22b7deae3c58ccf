package httpfront

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/metrics"
	"github.com/hepcache/hepcache/origin"
)

// allowed is the Allow header of the file namespace.
const allowed = "OPTIONS, GET, HEAD, PROPFIND"

// ServeHTTP implements http.Handler: extra routes first, then the files.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Server", s.cfg.ServerName)
	if h := s.route(r.URL.Path); h != nil {
		// Answered also over a connection bound: /health and /metrics are
		// what an operator reads when the server is busy.
		h.ServeHTTP(w, r)
		return
	}
	op := strings.ToLower(r.Method)
	switch r.Method {
	case http.MethodGet, http.MethodHead, "PROPFIND", http.MethodOptions:
	default:
		op = "other"
	}
	if overBound(w, r) {
		s.observe(r, op, backend.ErrBusy)
		return
	}
	cl, _ := r.Context().Value(clientKey{}).(*metrics.Client)
	cl.SetActivity(r.Method + " " + r.URL.Path)
	var err error
	defer func() {
		cl.SetActivity("")
		if p := recover(); p != nil {
			// A body cut off after its first byte (http.ErrAbortHandler).
			s.observe(r, op, errAborted)
			panic(p)
		}
		s.observe(r, op, err)
	}()
	switch r.Method {
	case http.MethodGet:
		err = s.serveGet(w, r, false)
	case http.MethodHead:
		err = s.serveGet(w, r, true)
	case "PROPFIND":
		err = s.servePropfind(w, r)
	case http.MethodOptions:
		w.Header().Set("Allow", allowed)
		w.Header().Set("DAV", "1")
		w.Header().Set("Accept-Ranges", "bytes")
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusOK)
	default:
		w.Header().Set("Allow", allowed)
		err = &httpError{code: http.StatusMethodNotAllowed, msg: "method " + r.Method + " not allowed: hepcache is read-only"}
		s.writeError(w, r, err)
	}
}

// errAborted marks a response cut off mid-body.
var errAborted = errors.New("response aborted mid-body")

func (s *Server) observe(r *http.Request, op string, err error) {
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.ObserveRequest(protocol(r), op, err)
	}
}

func (s *Server) route(p string) http.Handler {
	if s.cfg.Routes == nil {
		return nil
	}
	if h := s.cfg.Routes[p]; h != nil {
		return h
	}
	for prefix, h := range s.cfg.Routes {
		if strings.HasSuffix(prefix, "/") && strings.HasPrefix(p, prefix) {
			return h
		}
	}
	return nil
}

func protocol(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// httpError is an error with its own HTTP status (bad ranges, methods).
type httpError struct {
	code int
	msg  string
	err  error
}

func (e *httpError) Error() string { return e.msg }
func (e *httpError) Unwrap() error { return e.err }

// forwardSchemes are the origin URL schemes a path may start with in
// forwarding mode: GET /https://site:443/path reads /path from that site.
var forwardSchemes = []string{"root://", "roots://", "xroot://", "xroots://", "http://", "https://"}

// request builds the backend request from the URL. A path that starts with
// an origin URL ("/root://site:1094//store/f") names the origin, as the
// XrdClProxyPlugin convention does over root://; the backend's forwarding
// allow-list decides whether it is served. prefix is the part of the URL
// path before the logical path ("" or "/root://site:1094").
func (s *Server) request(r *http.Request) (req backend.Request, prefix string, err error) {
	p := r.URL.Path
	if strings.IndexByte(p, 0) >= 0 || len(p) > 8192 {
		return req, "", &httpError{code: http.StatusBadRequest, msg: "bad path", err: backend.ErrInvalidPath}
	}
	rest := strings.TrimPrefix(p, "/")
	for _, sch := range forwardSchemes {
		if strings.HasPrefix(rest, sch) {
			hostAndPath := rest[len(sch):]
			host, lp, _ := strings.Cut(hostAndPath, "/")
			if host == "" {
				return req, "", &httpError{code: http.StatusBadRequest, msg: "forwarding URL without a host", err: backend.ErrInvalidPath}
			}
			req.Origin = sch + host
			prefix = "/" + sch + host
			p = "/" + lp
			break
		}
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return req, "", &httpError{code: http.StatusBadRequest, msg: "'..' not allowed in paths", err: backend.ErrInvalidPath}
		}
	}
	req.Path = path.Clean("/" + p)
	req.Opaque = r.URL.RawQuery
	req.Client = r.RemoteAddr
	req.Protocol = protocol(r)
	return req, prefix, nil
}

// authorize consults the Authorizer.
func (s *Server) authorize(r *http.Request, req *backend.Request, op string) error {
	if op == "list" && s.cfg.DenyListing {
		return fmt.Errorf("%w: directory listing is disabled on this server", backend.ErrForbidden)
	}
	if s.cfg.Authorizer == nil {
		return nil
	}
	if err := s.cfg.Authorizer.Authorize(r, req, op); err != nil {
		if !errors.Is(err, backend.ErrForbidden) {
			err = fmt.Errorf("%w: %w", backend.ErrForbidden, err)
		}
		return err
	}
	return nil
}

// status maps a backend or origin error to an HTTP status.
func status(err error) int {
	var he *httpError
	var re *backend.RedirectError
	var we *backend.WaitError
	switch {
	case errors.As(err, &he):
		return he.code
	case errors.As(err, &re):
		return http.StatusTemporaryRedirect
	case errors.Is(err, backend.ErrOverloaded):
		return http.StatusTooManyRequests
	case errors.As(err, &we), errors.Is(err, backend.ErrBusy):
		return http.StatusServiceUnavailable
	case errors.Is(err, origin.ErrUnauthenticated):
		return http.StatusUnauthorized
	case errors.Is(err, origin.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, backend.ErrForbidden), errors.Is(err, origin.ErrNotAuthorized):
		return http.StatusForbidden
	case errors.Is(err, backend.ErrInvalidPath):
		return http.StatusBadRequest
	case errors.Is(err, origin.ErrUnsupported):
		return http.StatusNotImplemented
	case errors.Is(err, origin.ErrUnavailable), errors.Is(err, origin.ErrInvalid):
		return http.StatusBadGateway
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

// writeError sends err as a plain-text error response with its status, and
// Location or Retry-After when the backend asked for a redirect or a wait.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && !errors.Is(context.Cause(r.Context()), errPelicanTimeout) {
		return // the client is gone
	}
	err = timedOut(r.Context(), err)
	code := status(err)
	h := w.Header()
	for _, k := range []string{"Content-Length", "Content-Range", "ETag", "Last-Modified", "Accept-Ranges", "Digest", "Content-Type", "Age", "Trailer"} {
		h.Del(k)
	}
	if errors.Is(err, origin.ErrUnauthenticated) {
		// The origin wants a credential this request did not bring (or a
		// token that fits): 401, as it answered.
		h.Set("WWW-Authenticate", "Bearer")
	}
	var re *backend.RedirectError
	if errors.As(err, &re) {
		h.Set("Location", re.URL)
	}
	var we *backend.WaitError
	switch {
	case errors.As(err, &we):
		writeBusy(w, r, code, we.Seconds, err.Error())
		return
	case errors.Is(err, backend.ErrBusy):
		writeBusy(w, r, code, 1, err.Error())
		return
	}
	// Origin failures are logged once per origin and interval where the
	// origin is called (metrics), for both front ends alike.
	if code >= 500 && !errors.Is(err, origin.ErrUnavailable) {
		s.cfg.Logger.Warn("http request failed", "method", r.Method, "path", r.URL.Path, "client", r.RemoteAddr, "status", code, "err", err)
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	if r.Method != http.MethodHead {
		fmt.Fprintf(w, "%d %s: %v\n", code, http.StatusText(code), err)
	}
}
