package httpfront

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/origin"
)

// serveGet answers GET and HEAD. HEAD never opens the file (no open is
// counted, nothing is fetched): it answers from Stat. Everything before
// the first byte is bounded by the client's X-Pelican-Timeout
// (transfer.go).
func (s *Server) serveGet(w http.ResponseWriter, r *http.Request, head bool) error {
	ctx, started, stop := untilFirstByte(r, pelicanTimeout(r))
	defer stop()
	r = r.WithContext(context.WithValue(ctx, startedKey{}, started))
	req, prefix, err := s.request(r)
	if err == nil {
		err = s.authorize(r, &req, "read")
	}
	if err != nil {
		s.writeError(w, r, err)
		return err
	}
	ctx = r.Context()
	// A conditional request is answered from Stat when it can be, so a
	// client revalidating its copy does not open the file.
	if head || hasConditions(r) {
		fi, err := s.cfg.Backend.Stat(ctx, req)
		err = timedOut(ctx, err)
		if err != nil {
			s.writeError(w, r, err)
			return err
		}
		if fi.IsDir() {
			if head {
				w.Header().Set("Content-Type", "text/html; charset=utf-8")
				w.WriteHeader(http.StatusOK)
				return nil
			}
			return s.serveDir(w, r, req, prefix)
		}
		if done, err := s.checkConditions(w, r, fi); done {
			return err
		}
		if head {
			s.setFileHeaders(w, r, req, fi)
			return s.writeRanges(w, r, fi, nil, true)
		}
	}
	if strings.HasSuffix(r.URL.Path, "/") {
		return s.serveDir(w, r, req, prefix)
	}
	f, err := s.cfg.Backend.Open(ctx, req)
	err = timedOut(ctx, err)
	if errors.Is(err, origin.ErrIsDir) {
		return s.serveDir(w, r, req, prefix)
	}
	if errors.Is(err, origin.ErrNotFound) {
		// Some origins (XRootD) refuse to open a directory as not found.
		if fi, serr := s.cfg.Backend.Stat(ctx, req); serr == nil && fi.IsDir() {
			return s.serveDir(w, r, req, prefix)
		}
	}
	if err != nil {
		s.writeError(w, r, err)
		return err
	}
	defer f.Close()
	fi := f.Info()
	if done, err := s.checkConditions(w, r, fi); done {
		return err
	}
	s.setFileHeaders(w, r, req, fi)
	return s.writeRanges(w, r, fi, f, false)
}

// etag returns the strong entity tag of a file version: the origin's ETag
// (the cache serves exactly the origin's bytes) or, without one, nginx's
// form "mtime-size" in hex. Empty when the version has no identity.
func etag(fi origin.FileInfo) string {
	if t := fi.ETag; t != "" {
		t = strings.TrimPrefix(t, "W/")
		return `"` + strings.Trim(t, `"`) + `"`
	}
	if fi.ModTime.IsZero() {
		return ""
	}
	return fmt.Sprintf(`"%x-%x"`, fi.ModTime.Unix(), fi.Size)
}

func hasConditions(r *http.Request) bool {
	h := r.Header
	return h.Get("If-None-Match") != "" || h.Get("If-Modified-Since") != "" || h.Get("If-Match") != "" || h.Get("If-Unmodified-Since") != ""
}

// etagMatch reports whether list (an If-Match / If-None-Match value)
// contains tag; weak compares ignoring W/.
func etagMatch(list, tag string, weak bool) bool {
	if tag == "" {
		return false
	}
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		if item == "*" {
			return true
		}
		if strings.HasPrefix(item, "W/") {
			if !weak {
				continue
			}
			item = item[2:]
		}
		if item == tag {
			return true
		}
	}
	return false
}

// checkConditions evaluates the preconditions of RFC 9110 13.2.2 in order:
// If-Match, If-Unmodified-Since (412), If-None-Match, If-Modified-Since
// (304). It reports whether the response is done.
func (s *Server) checkConditions(w http.ResponseWriter, r *http.Request, fi origin.FileInfo) (bool, error) {
	h := r.Header
	tag := etag(fi)
	mod := fi.ModTime.Truncate(time.Second)
	failed := func() (bool, error) {
		err := &httpError{code: http.StatusPreconditionFailed, msg: "precondition failed: the file is at version " + tag}
		s.writeError(w, r, err)
		return true, err
	}
	if im := h.Get("If-Match"); im != "" {
		if !etagMatch(im, tag, false) {
			return failed()
		}
	} else if ius := h.Get("If-Unmodified-Since"); ius != "" && !fi.ModTime.IsZero() {
		if t, err := http.ParseTime(ius); err == nil && mod.After(t) {
			return failed()
		}
	}
	notModified := false
	if inm := h.Get("If-None-Match"); inm != "" {
		notModified = etagMatch(inm, tag, true)
	} else if ims := h.Get("If-Modified-Since"); ims != "" && !fi.ModTime.IsZero() {
		if t, err := http.ParseTime(ims); err == nil && !mod.After(t) {
			notModified = true
		}
	}
	if notModified {
		if tag != "" {
			w.Header().Set("ETag", tag)
		}
		if !fi.ModTime.IsZero() {
			w.Header().Set("Last-Modified", fi.ModTime.UTC().Format(http.TimeFormat))
		}
		w.WriteHeader(http.StatusNotModified)
		return true, nil
	}
	return false, nil
}

// setFileHeaders sets the headers every file response carries.
func (s *Server) setFileHeaders(w http.ResponseWriter, r *http.Request, req backend.Request, fi origin.FileInfo) {
	h := w.Header()
	h.Set("Accept-Ranges", "bytes")
	h.Set("Content-Type", "application/octet-stream")
	if tag := etag(fi); tag != "" {
		h.Set("ETag", tag)
	}
	if !fi.ModTime.IsZero() {
		h.Set("Last-Modified", fi.ModTime.UTC().Format(http.TimeFormat))
	}
	if !fi.Cached.IsZero() {
		h.Set("Age", strconv.FormatInt(age(fi.Cached, time.Now()), 10))
	}
	if want := r.Header.Get("Want-Digest"); want != "" {
		if d := s.digest(r.Context(), req, want); d != "" {
			h.Set("Digest", d)
		}
	}
}

// age is the Age (RFC 9111 5.1) of a copy the cache has held whole since
// cached: the seconds since, rounded up, so at least 1. A cache answering
// from a copy it holds says so with Age > 0: a Pelican director counts a
// cache as holding an object only then (director/stat.go in
// PelicanPlatform/pelican), and a copy completed this second is held.
func age(cached, now time.Time) int64 {
	d := now.Sub(cached)
	if d <= 0 {
		return 1
	}
	return int64((d + time.Second - 1) / time.Second)
}

// digestAlgos maps the RFC 3230 digest names hepcache answers to the
// backend's checksum names, and says how the value is written: adler32,
// crc32c and crc32 as 8 hex digits, md5, sha (SHA-1) and sha-256 in base64
// (the IANA registry's encodings, which the Pelican client and davix
// parse).
var digestAlgos = map[string]struct {
	backend string
	hex     bool
}{
	"adler32": {"adler32", true}, "crc32c": {"crc32c", true}, "crc32": {"crc32", true},
	"md5": {"md5", false}, "sha": {"sha1", false}, "sha-256": {"sha256", false},
}

// digest answers Want-Digest (RFC 3230): every algorithm asked for with a
// q above 0 that the backend can checksum, by preference (q, then the
// order given), comma-separated. A complete cached file has its adler32
// and crc32c at hand; other algorithms are asked of the origin.
func (s *Server) digest(ctx context.Context, req backend.Request, want string) string {
	type choice struct {
		algo string
		q    float64
	}
	var cs []choice
	seen := map[string]bool{}
	for item := range strings.SplitSeq(want, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(item), ";")
		q := 1.0
		if v, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				q = f
			}
		}
		name = strings.ToLower(strings.TrimSpace(name))
		if _, ok := digestAlgos[name]; ok && q > 0 && !seen[name] {
			seen[name] = true
			cs = append(cs, choice{name, q})
		}
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].q > cs[j].q })
	var out []string
	for _, c := range cs {
		a := digestAlgos[c.algo]
		v, err := s.cfg.Backend.Checksum(ctx, req, a.backend)
		if err != nil {
			if !errors.Is(err, origin.ErrUnsupported) {
				s.cfg.Logger.Debug("checksum for Want-Digest failed", "path", req.Path, "algo", a.backend, "err", err)
			}
			continue
		}
		if a.hex {
			out = append(out, c.algo+"="+v)
			continue
		}
		b, err := hex.DecodeString(v)
		if err != nil {
			continue
		}
		out = append(out, c.algo+"="+base64.StdEncoding.EncodeToString(b))
	}
	return strings.Join(out, ",")
}

// writeRanges sends the body (or, for HEAD, only the headers) of the whole
// file, one range, or several ranges as multipart/byteranges.
func (s *Server) writeRanges(w http.ResponseWriter, r *http.Request, fi origin.FileInfo, f backend.File, head bool) error {
	size := fi.Size
	ranges, err := s.ranges(r, fi)
	if err != nil {
		if errors.Is(err, errUnsatisfiable) {
			w.Header().Set("Content-Range", "bytes */"+strconv.FormatInt(size, 10))
		}
		he := &httpError{code: http.StatusRequestedRangeNotSatisfiable, msg: err.Error(), err: backend.ErrInvalidPath}
		code := he.code
		h := w.Header()
		h.Del("Content-Length")
		h.Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(code)
		if !head {
			fmt.Fprintf(w, "%d %s: %v\n", code, http.StatusText(code), err)
		}
		return he
	}
	h := w.Header()
	// The trailer, when asked for, closes every body sent from here.
	trailer := !head && wantsTransferStatus(r)
	done := func(err error) error {
		if trailer && !errors.Is(err, errHeadersNotSent) {
			setTransferStatus(w, err)
		}
		return err
	}
	switch len(ranges) {
	case 0:
		h.Set("Content-Length", strconv.FormatInt(size, 10))
		if head {
			w.WriteHeader(http.StatusOK)
			return nil
		}
		if trailer {
			declareTransferStatus(w, r)
		}
		return done(s.stream(w, r, f, 0, size, writeStatus(w, http.StatusOK), trailer))
	case 1:
		rg := ranges[0]
		h.Set("Content-Range", rg.contentRange(size))
		h.Set("Content-Length", strconv.FormatInt(rg.length, 10))
		if head {
			w.WriteHeader(http.StatusPartialContent)
			return nil
		}
		if trailer {
			declareTransferStatus(w, r)
		}
		return done(s.stream(w, r, f, rg.start, rg.length, writeStatus(w, http.StatusPartialContent), trailer))
	}
	boundary := newBoundary()
	partHeader := func(i int, rg byteRange) string {
		sep := "\r\n--"
		if i == 0 {
			sep = "--"
		}
		return sep + boundary + "\r\nContent-Type: application/octet-stream\r\nContent-Range: " + rg.contentRange(size) + "\r\n\r\n"
	}
	closing := "\r\n--" + boundary + "--\r\n"
	total := int64(len(closing))
	for i, rg := range ranges {
		total += int64(len(partHeader(i, rg))) + rg.length
	}
	h.Set("Content-Type", "multipart/byteranges; boundary="+boundary)
	h.Set("Content-Length", strconv.FormatInt(total, 10))
	if head {
		w.WriteHeader(http.StatusPartialContent)
		return nil
	}
	if trailer {
		declareTransferStatus(w, r)
	}
	for i, rg := range ranges {
		ph := []byte(partHeader(i, rg))
		var first func() error
		if i == 0 {
			// The status goes out with the first byte of the first part:
			// until then an error can still be reported properly.
			first = func() error {
				w.WriteHeader(http.StatusPartialContent)
				_, err := w.Write(ph)
				return err
			}
		} else if _, err := w.Write(ph); err != nil {
			return fmt.Errorf("write to client: %w: %w", err, context.Canceled)
		}
		if err := s.stream(w, r, f, rg.start, rg.length, first, trailer); err != nil {
			return done(err)
		}
	}
	if _, err := w.Write([]byte(closing)); err != nil {
		return fmt.Errorf("write to client: %w: %w", err, context.Canceled)
	}
	return done(nil)
}

// ranges returns the ranges to send: nil for the whole file.
func (s *Server) ranges(r *http.Request, fi origin.FileInfo) ([]byteRange, error) {
	rh := r.Header.Get("Range")
	if rh == "" {
		return nil, nil
	}
	if ir := r.Header.Get("If-Range"); ir != "" && !ifRangeMatch(ir, fi) {
		return nil, nil // the client's copy is stale: send it all
	}
	ranges, err := parseRange(rh, fi.Size)
	switch {
	case errors.Is(err, errMalformedRange):
		return nil, nil
	case err != nil:
		return nil, err
	case len(ranges) > s.cfg.MaxRanges:
		return nil, fmt.Errorf("%d ranges, at most %d allowed", len(ranges), s.cfg.MaxRanges)
	}
	var sum int64
	for _, rg := range ranges {
		sum += rg.length
	}
	if len(ranges) > 1 && sum > fi.Size {
		// Overlapping ranges asking for more than the file: send the file
		// once instead (as Go's ServeContent does).
		return nil, nil
	}
	return ranges, nil
}

// ifRangeMatch evaluates If-Range: a strong ETag match or the exact
// Last-Modified date.
func ifRangeMatch(ir string, fi origin.FileInfo) bool {
	ir = strings.TrimSpace(ir)
	if strings.HasPrefix(ir, `"`) || strings.HasPrefix(ir, "W/") {
		return !strings.HasPrefix(ir, "W/") && ir == etag(fi)
	}
	t, err := http.ParseTime(ir)
	return err == nil && !fi.ModTime.IsZero() && fi.ModTime.Truncate(time.Second).Equal(t)
}

func writeStatus(w http.ResponseWriter, code int) func() error {
	return func() error { w.WriteHeader(code); return nil }
}

// stream copies [off, off+n) from f to w as the cache delivers it. first,
// if not nil, writes the status line (and whatever precedes the data) just
// before the first byte, so that an error before any byte is still sent as
// an error status (and returned wrapping errHeadersNotSent); after the
// first byte an error can only cut the connection (the client sees a short
// body, never a wrong one), or, with trailer, end the body for the
// X-Transfer-Status trailer to say why (the caller sets it).
func (s *Server) stream(w http.ResponseWriter, r *http.Request, f backend.File, off, n int64, first func() error, trailer bool) error {
	rc := http.NewResponseController(w)
	bw := &bodyWriter{w: w, rc: rc, timeout: s.cfg.WriteChunkTimeout}
	ctx := backend.WithPacer(r.Context(), bw)
	if first != nil {
		// The first byte is on its way: no X-Pelican-Timeout from here.
		if started, _ := r.Context().Value(startedKey{}).(func()); started != nil {
			head := first
			first = func() error { started(); return head() }
		}
	}
	var writeErr error
	got, err := f.Stream(ctx, off, n, func(p []byte) error {
		if first != nil {
			if writeErr = first(); writeErr != nil {
				return writeErr
			}
			first = nil
		}
		if err := bw.take(p); err != nil {
			writeErr = err
			return err
		}
		return nil
	})
	if err := bw.finish(); err != nil && writeErr == nil {
		writeErr = err
	}
	if writeErr != nil {
		return fmt.Errorf("write to client %s: %w: %w", r.RemoteAddr, writeErr, context.Canceled)
	}
	if err == nil && got < n {
		err = fmt.Errorf("file ended at %d, %d bytes before the size it had at open: %w", off+got, n-got, origin.ErrUnavailable)
	}
	if err != nil {
		if first != nil {
			err = timedOut(r.Context(), err)
			s.writeError(w, r, err)
			return fmt.Errorf("%w: %w", errHeadersNotSent, err)
		}
		s.cfg.Logger.Warn("http body cut off", "path", r.URL.Path, "client", r.RemoteAddr, "at", off+got, "err", err)
		if trailer {
			// The client reads the trailer, which says the body failed.
			return fmt.Errorf("body cut off at %d: %w", off+got, err)
		}
		// The headers promised more bytes than will come: abort the
		// connection so the client cannot take a short body for the file.
		panic(http.ErrAbortHandler)
	}
	if first != nil {
		if err := first(); err != nil { // an empty body
			return fmt.Errorf("write to client %s: %w: %w", r.RemoteAddr, err, context.Canceled)
		}
	}
	rc.SetWriteDeadline(time.Time{})
	return nil
}

// errHeadersNotSent marks an error answered with its own status: nothing
// of the body (nor a trailer) went out.
var errHeadersNotSent = errors.New("answered before the body")

// startedKey carries, in a GET's context, what to call when its first
// byte is on its way (transfer.go untilFirstByte).
type startedKey struct{}

func newBoundary() string {
	var b [15]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// serveDir answers GET on a directory with a small HTML index.
func (s *Server) serveDir(w http.ResponseWriter, r *http.Request, req backend.Request, prefix string) error {
	if err := s.authorize(r, &req, "list"); err != nil {
		s.writeError(w, r, err)
		return err
	}
	list, err := s.cfg.Backend.List(r.Context(), req, true)
	if err != nil {
		s.writeError(w, r, err)
		return err
	}
	base := strings.TrimSuffix(prefix+req.Path, "/")
	var b strings.Builder
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>%s</title></head><body><h1>%s</h1><table>\n",
		html.EscapeString(req.Path), html.EscapeString(req.Path))
	for _, fi := range list {
		name := fi.Name
		href := escapePath(base + "/" + name)
		if fi.IsDir() {
			name += "/"
			href += "/"
		}
		fmt.Fprintf(&b, "<tr><td><a href=\"%s\">%s</a></td><td>%d</td><td>%s</td></tr>\n",
			html.EscapeString(href), html.EscapeString(name), fi.Size, fi.ModTime.UTC().Format(time.RFC3339))
	}
	b.WriteString("</table></body></html>\n")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write([]byte(b.String()))
	}
	return nil
}

// escapePath escapes each segment of p for use in a URL.
func escapePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}
