package httpfront

import (
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/prestage"
)

// prestagePath serves the prestage form (GET), takes file lists (POST:
// the form's "files" field or a text/plain body, one file per line) and
// reports a job (GET ?id=). Each file is authorized as a GET of it by the
// same client, so a prestage fetches nothing its sender could not read.
const prestagePath = "/prestage"

// maxPrestageBody bounds a posted list (some 100000 paths).
const maxPrestageBody = 16 << 20

func (s *Server) prestageHandler() http.Handler {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var err error
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			err = s.prestageGet(w, r)
		case http.MethodPost:
			err = s.prestagePost(w, r)
		default:
			w.Header().Set("Allow", "GET, HEAD, POST")
			err = &httpError{code: http.StatusMethodNotAllowed, msg: "method " + r.Method + " not allowed on " + prestagePath}
		}
		if err != nil {
			s.writeError(w, r, err)
		}
		s.observe(r, "prestage", err)
	})
	// A form that makes the cache download on a user's credentials must not
	// be submittable by another site's page (CSRF).
	return http.NewCrossOriginProtection().Handler(h)
}

const prestageForm = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>hepcache prestage</title></head>
<body><h1>Prestage files into the cache</h1>
<form method="post" action="prestage">
<p><label for="files">One file per line: a path (/store/...) or a URL (root://origin//store/...)</label></p>
<p><textarea id="files" name="files" rows="20" cols="100"></textarea></p>
<p><button type="submit">Prestage</button></p>
</form>
<p>Progress: GET prestage?id=JOB, or the dashboard's Prestage panel.</p>
</body></html>
`

func (s *Server) prestageGet(w http.ResponseWriter, r *http.Request) error {
	id := r.URL.Query().Get("id")
	if id == "" {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, prestageForm)
		return nil
	}
	owner, err := s.stageOwner(r)
	if err != nil {
		return err
	}
	j, err := s.cfg.Stager.StageStatus(owner, id)
	if errors.Is(err, backend.ErrUnknownJob) {
		return &httpError{code: http.StatusNotFound, msg: "unknown prestage job " + html.EscapeString(id)}
	}
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, j.Text())
	return nil
}

// stageOwner is who r's prestage jobs belong to: the identity of its
// verified credential, else its host.
func (s *Server) stageOwner(r *http.Request) (backend.Owner, error) {
	if id, ok := s.cfg.Authorizer.(Identifier); ok {
		name, err := id.Identify(r)
		if err != nil {
			return backend.Owner{}, err
		}
		if name != "" {
			return backend.UserOwner(name), nil
		}
	}
	return backend.HostOwner(r.RemoteAddr), nil
}

func (s *Server) prestagePost(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxPrestageBody)
	var list string
	if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
		list = r.FormValue("files")
	} else {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return &httpError{code: http.StatusRequestEntityTooLarge, msg: err.Error()}
		}
		// The form's urlencoded "files" field, or else the body itself (curl
		// --data-binary labels a plain list urlencoded too).
		list = string(b)
		if q, err := url.ParseQuery(list); err == nil && q.Has("files") {
			list = q.Get("files")
		}
	}
	reqs, err := prestage.ParseList(list)
	if err != nil {
		return &httpError{code: http.StatusBadRequest, msg: err.Error(), err: err}
	}
	for i := range reqs {
		req := &reqs[i]
		req.Client, req.Protocol = r.RemoteAddr, protocol(r)
		if err := s.authorize(r, req, "get"); err != nil {
			return fmt.Errorf("prestage of %s: %w", req, err)
		}
		if req.NoFetch {
			return fmt.Errorf("prestage of %s: this identity may read cached data but not start downloads: %w", req, backend.ErrForbidden)
		}
	}
	owner, err := s.stageOwner(r)
	if err != nil {
		return err
	}
	id, err := s.cfg.Stager.Stage(owner, reqs)
	if err != nil {
		if !errors.Is(err, backend.ErrBusy) {
			err = &httpError{code: http.StatusServiceUnavailable, msg: err.Error(), err: err}
		}
		return err
	}
	w.Header().Set("Location", "prestage?id="+url.QueryEscape(id))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusAccepted)
	fmt.Fprintln(w, id)
	return nil
}
