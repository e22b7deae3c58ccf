// Package httporigin reads files from an http:// or https:// origin (a web
// server, a WebDAV storage element, another hepcache) with ranged GETs.
// The origin's ETag and Last-Modified are the file's identity: every read
// carries If-Match (or If-Unmodified-Since), so bytes of two versions of a
// file never mix in the cache. Listing uses PROPFIND, checksums Want-Digest.
package httporigin

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hepcache/hepcache/internal/originhttp"
	"github.com/hepcache/hepcache/origin"
)

// Defaults. A zero Config field means "use the default".
const (
	// defaultMaxConns bounds the TCP connections to one origin host, like a
	// browser's per-host limit but larger: the cache reads pieces of several
	// blocks concurrently.
	defaultMaxConns = 16
	// defaultIdleConnTimeout keeps an idle connection for the next read.
	defaultIdleConnTimeout = 90 * time.Second
	// defaultDialTimeout bounds the TCP (and TLS) handshake.
	defaultDialTimeout = 10 * time.Second
	// defaultMaxReadVRanges bounds the ranges in one multi-range GET, so the
	// Range header stays well under the 8 KiB many servers accept.
	defaultMaxReadVRanges = 64
	// defaultRedirectTTL bounds how long an open file reads from the
	// target a redirect gave it: long enough for a job reading a file for
	// an hour to ask the redirector once, short enough that a federation
	// that moved the data is followed.
	defaultRedirectTTL = time.Hour
)

// Config configures an Origin.
type Config struct {
	// URL is the origin's base URL, "https://host:port" optionally with a
	// path prefix ("https://host/store"): an origin path /a/b is read from
	// URL + "/a/b". Required.
	URL string
	// MaxConns bounds concurrent connections to the host. Default 16. More
	// connections mean more parallel piece reads at the expense of load on
	// the origin.
	MaxConns int
	// IdleConnTimeout is how long an idle connection is kept for reuse.
	// Default 90 s.
	IdleConnTimeout time.Duration
	// DialTimeout bounds the TCP and TLS handshake. Default 10 s. Requests
	// themselves are bounded by their ctx.
	DialTimeout time.Duration
	// MaxReadVRanges bounds the ranges of one multi-range GET in ReadV.
	// Default 64; 1 turns multi-range requests off (one GET per segment).
	MaxReadVRanges int
	// TLSConfig is used for https:// (the cache's own client certificate,
	// extra CAs). Nil: the system roots, no client certificate.
	TLSConfig *tls.Config
	// Authorize, if set, is called on every outgoing request to add the
	// cache's own credential (e.g. an Authorization: Bearer header). It
	// must be safe for concurrent use.
	Authorize func(*http.Request) error
	// AuthorizeRedirects calls Authorize again on a redirect from the
	// origin URL's host to another host: for an origin URL that is a
	// redirector whose targets all take the cache's credential (a Pelican
	// director sending to the federation's origins, which accept its
	// federation token): the hosts the redirector names are the ones it
	// vouches for. Past them, a credential follows only to the same host.
	// Default false: the credential goes to the origin URL's host only.
	// Either way credentials (and ForwardClientToken's token) follow a
	// redirect over https only (redirect.go).
	AuthorizeRedirects bool
	// ForwardClientToken sends the token origin.WithClientToken put in a
	// request's context as the authz query parameter (a file opened with
	// one keeps it for its reads): the client's own read token, for
	// federations whose origins authorize each reader (a Pelican director
	// keeps authz on the redirect to the origin). It never appears in an
	// error or a log line. Default false: origins see the cache's own
	// credential only.
	ForwardClientToken bool
	// RedirectTTL is how long an open file keeps the target the origin
	// URL redirected it to (a Pelican director sending the cache to an
	// origin, a storage door to a data node): its reads go there directly
	// instead of through the redirector, which sees one request per open
	// instead of one per block. A target that fails, or that is older
	// than this or than the redirect's Cache-Control max-age, is dropped
	// and the origin URL asked again. Default 1h; negative: every read
	// goes through the origin URL (its redirects followed each time).
	RedirectTTL time.Duration
	// Logger receives operational messages. Default slog.Default().
	Logger *slog.Logger

	// transport replaces the tuned transport; a test seam.
	transport http.RoundTripper
	// now is the clock of RedirectTTL; a test seam.
	now func() time.Time
}

// EnsureDefaults fills zero fields with their defaults.
func (c *Config) EnsureDefaults() {
	if c.MaxConns == 0 {
		c.MaxConns = defaultMaxConns
	}
	if c.IdleConnTimeout == 0 {
		c.IdleConnTimeout = defaultIdleConnTimeout
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = defaultDialTimeout
	}
	if c.MaxReadVRanges == 0 {
		c.MaxReadVRanges = defaultMaxReadVRanges
	}
	if c.RedirectTTL == 0 {
		c.RedirectTTL = defaultRedirectTTL
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports every problem with the configuration in one error.
func (c *Config) Validate() error {
	var errs []error
	u, err := url.Parse(c.URL)
	switch {
	case c.URL == "":
		errs = append(errs, errors.New("url: required"))
	case err != nil:
		errs = append(errs, fmt.Errorf("url %q: %w", c.URL, err))
	case u.Scheme != "http" && u.Scheme != "https":
		errs = append(errs, fmt.Errorf("url %q: scheme must be http or https", c.URL))
	case u.Host == "":
		errs = append(errs, fmt.Errorf("url %q: no host", c.URL))
	case u.RawQuery != "" || u.Fragment != "":
		errs = append(errs, fmt.Errorf("url %q: no query or fragment allowed", c.URL))
	}
	if c.MaxConns < 0 || c.MaxReadVRanges < 0 || c.IdleConnTimeout < 0 || c.DialTimeout < 0 {
		errs = append(errs, fmt.Errorf("max conns %d, max readv ranges %d, idle timeout %v, dial timeout %v: must not be negative",
			c.MaxConns, c.MaxReadVRanges, c.IdleConnTimeout, c.DialTimeout))
	}
	return errors.Join(errs...)
}

// Origin is an http(s) origin. It implements origin.Origin and is safe for
// concurrent use.
type Origin struct {
	cfg    Config
	base   *url.URL
	name   string
	client *http.Client
	tr     *http.Transport // nil when a test replaced the transport
	// noReuse is set once a redirect target failed on its first reuse
	// (a door whose redirects are good for one request): from then on
	// targets are not kept.
	noReuse atomic.Bool
	// targets are the redirect targets kept by path (redirect.go).
	targets targets
}

var _ origin.Origin = (*Origin)(nil)

// New returns an Origin for cfg.URL. It does not contact the server.
func New(cfg *Config) (*Origin, error) {
	c := *cfg
	c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("http origin config: %w", err)
	}
	base, _ := url.Parse(c.URL)
	base.Path = strings.TrimRight(base.Path, "/")
	base.RawPath = ""
	o := &Origin{cfg: c, base: base, name: base.Scheme + "://" + base.Host + base.Path}
	rt := c.transport
	if rt == nil {
		o.tr = originhttp.Transport(c.DialTimeout, c.TLSConfig, c.MaxConns, c.IdleConnTimeout)
		rt = o.tr
	}
	o.client = &http.Client{Transport: rt, CheckRedirect: o.checkRedirect}
	return o, nil
}

// Dial returns a function creating an Origin for a canonical origin URL
// ("https://host:443"), with cfg's other settings; it has the shape of
// upstream.DialFunc.
func Dial(cfg Config) func(ctx context.Context, canonical string) (origin.Origin, error) {
	return func(ctx context.Context, canonical string) (origin.Origin, error) {
		c := cfg
		c.URL = canonical
		return New(&c)
	}
}

// errDirRedirect stops the client at a redirect that only adds a trailing
// slash: the path names a directory.
var errDirRedirect = errors.New("directory redirect")

// checkRedirect follows redirects (storage doors send clients to data
// nodes) except the one a web server sends for a directory named without
// its trailing slash, which tells Stat that the path is a directory. The
// cache's credential and the client's token go with the redirected
// request only where credentialed says (Go would forward Authorization to
// the same domain over plain http, and authz rides in the URL).
func (o *Origin) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	prev := via[len(via)-1].URL
	if req.URL.Host == prev.Host && req.URL.Path == prev.Path+"/" {
		return http.ErrUseLastResponse
	}
	chain := make([]*url.URL, 0, len(via)+1)
	for _, r := range via {
		chain = append(chain, r.URL)
	}
	req.Header.Del("Authorization")
	if !o.credentialed(append(chain, req.URL)) {
		dropAuthz(req.URL)
		return nil
	}
	if tok := origin.ClientToken(req.Context()); o.cfg.ForwardClientToken && tok != "" {
		setAuthz(req.URL, tok)
	}
	if o.cfg.Authorize != nil {
		if err := o.cfg.Authorize(req); err != nil {
			return fmt.Errorf("credential for %s: %w", stripQuery(req.URL.Redacted()), err)
		}
	}
	return nil
}

// String implements origin.Origin: the base URL, e.g. "https://host:443".
func (o *Origin) String() string { return o.name }

// Close implements origin.Origin.
func (o *Origin) Close() error {
	if o.tr != nil {
		o.tr.CloseIdleConnections()
	}
	return nil
}

// url returns the URL of origin path p.
func (o *Origin) url(p string) string { return o.pathURL(p).String() }

// pathURL is url as a *url.URL.
func (o *Origin) pathURL(p string) *url.URL {
	u := *o.base
	u.Path = o.base.Path + path.Clean("/"+p)
	if strings.HasSuffix(p, "/") && u.Path != "/" {
		u.Path += "/"
	}
	return &u
}

// do sends a request for origin path p with the cache's credential (and,
// with ForwardClientToken, the client's from ctx).
func (o *Origin) do(ctx context.Context, method, p string, hdr http.Header, body io.Reader) (*http.Response, error) {
	return o.send(ctx, method, o.pathURL(p), true, hdr, body)
}

// send sends a request to u, with the credentials when cred (the origin
// URL, or a redirect target that was credentialed when learnt).
func (o *Origin) send(ctx context.Context, method string, target *url.URL, cred bool, hdr http.Header, body io.Reader) (*http.Response, error) {
	tu := *target
	if tok := origin.ClientToken(ctx); cred && o.cfg.ForwardClientToken && tok != "" {
		setAuthz(&tu, tok)
	}
	u := stripQuery(tu.String())
	req, err := http.NewRequestWithContext(ctx, method, tu.String(), body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w: %w", method, u, err, origin.ErrInvalid)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("User-Agent", "hepcache")
	if o.cfg.Authorize != nil && cred {
		if err := o.cfg.Authorize(req); err != nil {
			return nil, fmt.Errorf("%s %s: credential: %w", method, u, err)
		}
	}
	resp, err := o.client.Do(req)
	if err != nil {
		// The URLs of a client error may carry authz: no query in errors.
		var ue *url.Error
		if errors.As(err, &ue) {
			ue.URL = stripQuery(ue.URL)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s %s: %w: %w", method, u, ctx.Err(), origin.ErrUnavailable)
		}
		var ua x509.UnknownAuthorityError
		if errors.As(err, &ua) {
			return nil, fmt.Errorf("%s %s: %w (a CA this cache does not trust: add its CA file to security.origin_ca_paths): %w", method, u, err, origin.ErrUnavailable)
		}
		return nil, fmt.Errorf("%s %s: %w: %w", method, u, err, origin.ErrUnavailable)
	}
	return resp, nil
}

// stripQuery drops the query of a URL (tokens travel there).
func stripQuery(raw string) string {
	if i := strings.IndexByte(raw, '?'); i >= 0 {
		return raw[:i]
	}
	return raw
}

// statusError maps an unexpected HTTP status to an origin sentinel. It
// drains and closes the body.
func statusError(method, u string, resp *http.Response) error {
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	resp.Body.Close()
	detail := strings.TrimSpace(string(msg))
	if len(detail) > 200 || strings.Contains(detail, "<") {
		detail = "" // an HTML error page says nothing the status does not
	}
	var sentinel error
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		sentinel = origin.ErrNotFound
	case resp.StatusCode == http.StatusUnauthorized:
		sentinel = origin.ErrUnauthenticated
	case resp.StatusCode == http.StatusForbidden:
		sentinel = origin.ErrNotAuthorized
	case resp.StatusCode == http.StatusMethodNotAllowed || resp.StatusCode == http.StatusNotImplemented:
		sentinel = origin.ErrUnsupported
	case resp.StatusCode == http.StatusPreconditionFailed:
		// The file changed since it was opened: the version the cache
		// holds blocks of no longer exists.
		sentinel = errChanged
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout:
		sentinel = origin.ErrUnavailable
	default:
		sentinel = origin.ErrInvalid
	}
	if detail != "" {
		return fmt.Errorf("%s %s: %s: %s: %w", method, u, resp.Status, detail, sentinel)
	}
	return fmt.Errorf("%s %s: %s: %w", method, u, resp.Status, sentinel)
}

// errChanged reports that the origin's file is not the version opened. It
// wraps origin.ErrChanged and origin.ErrNotFound: that version is gone.
var errChanged = fmt.Errorf("%w: %w", origin.ErrChanged, origin.ErrNotFound)

// Stat implements origin.Origin with a HEAD request. A path the server
// redirects to path + "/" is a directory.
func (o *Origin) Stat(ctx context.Context, p string) (origin.FileInfo, error) {
	fi, _, err := o.stat(ctx, p)
	return fi, err
}

// stat is Stat; it also returns the target the HEAD was redirected to,
// nil when it was not (or targets are not kept).
func (o *Origin) stat(ctx context.Context, p string) (origin.FileInfo, *target, error) {
	var pin atomic.Pointer[target]
	resp, err := o.pathRequest(ctx, http.MethodHead, p, nil, &pin)
	if err != nil {
		return origin.FileInfo{}, nil, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK:
		fi := infoFrom(p, resp.Header)
		if strings.HasSuffix(resp.Request.URL.Path, "/") {
			fi.Mode, fi.Size, fi.ETag = fs.ModeDir|0o755, 0, ""
			return fi, nil, nil
		}
		return fi, pin.Load(), nil
	case isRedirect(resp.StatusCode):
		// checkRedirect stopped at a trailing-slash redirect.
		return origin.FileInfo{Name: p, Mode: fs.ModeDir | 0o755, ModTime: lastModified(resp.Header)}, nil, nil
	}
	return origin.FileInfo{}, nil, statusError(http.MethodHead, o.url(p), resp)
}

func isRedirect(code int) bool {
	return code == http.StatusMovedPermanently || code == http.StatusFound ||
		code == http.StatusTemporaryRedirect || code == http.StatusPermanentRedirect
}

// infoFrom builds a file's metadata from response headers.
func infoFrom(p string, h http.Header) origin.FileInfo {
	fi := origin.FileInfo{Name: p, Mode: 0o644, ModTime: lastModified(h), ETag: h.Get("ETag"), Size: -1}
	if n, err := strconv.ParseInt(h.Get("Content-Length"), 10, 64); err == nil {
		fi.Size = n
	}
	return fi
}

func lastModified(h http.Header) time.Time {
	t, err := http.ParseTime(h.Get("Last-Modified"))
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

// Open implements origin.Origin: it learns the file's size and identity
// with a HEAD request; the reads that follow require that identity. When
// the origin URL redirected the HEAD, the reads go to where it led
// (redirect.go).
func (o *Origin) Open(ctx context.Context, p string) (origin.File, error) {
	fi, t, err := o.stat(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("open %s: %w", o.url(p), origin.ErrIsDir)
	}
	if fi.Size < 0 {
		return nil, fmt.Errorf("open %s: no Content-Length in the HEAD response: %w", o.url(p), origin.ErrUnsupported)
	}
	fi.VersionPinned = fi.ETag != "" && !strings.HasPrefix(fi.ETag, "W/") || !fi.ModTime.IsZero()
	f := &file{o: o, path: p, info: fi}
	f.target.Store(t)
	if o.cfg.ForwardClientToken {
		f.tok = origin.ClientToken(ctx)
	}
	return f, nil
}

// file is an open origin file. It implements origin.File.
type file struct {
	o    *Origin
	path string
	info origin.FileInfo
	// tok is the client token of the open (ForwardClientToken), sent with
	// every read: reads run on the cache's behalf, without the client's
	// context.
	tok string
	// target is where the origin URL last redirected the file's requests
	// (nil: none kept); reads go there while it lasts.
	target atomic.Pointer[target]
}

var _ origin.File = (*file)(nil)

// Info implements origin.File.
func (f *file) Info() origin.FileInfo { return f.info }

// Close implements origin.File; an HTTP file holds no server resource.
func (f *file) Close() error { return nil }

// identity returns the precondition headers that pin reads to the version
// opened: If-Match with a strong ETag, else If-Unmodified-Since.
func (f *file) identity() http.Header {
	h := http.Header{}
	switch {
	case f.info.ETag != "" && !strings.HasPrefix(f.info.ETag, "W/"):
		h.Set("If-Match", f.info.ETag)
	case !f.info.ModTime.IsZero():
		h.Set("If-Unmodified-Since", f.info.ModTime.UTC().Format(http.TimeFormat))
	}
	return h
}

// ReadAt implements origin.File with one ranged GET.
func (f *file) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	return f.readAt(ctx, p, off, nil)
}

var _ origin.ProgressReader = (*file)(nil)

// ReadAtProgress implements origin.ProgressReader: the body is read into
// p as it arrives.
func (f *file) ReadAtProgress(ctx context.Context, p []byte, off int64, progress func(int)) (int, error) {
	return f.readAt(ctx, p, off, progress)
}

func (f *file) readAt(ctx context.Context, p []byte, off int64, progress func(int)) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("read %s at %d: negative offset: %w", f.o.url(f.path), off, origin.ErrInvalid)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if off >= f.info.Size {
		return 0, io.EOF
	}
	want := min(int64(len(p)), f.info.Size-off)
	hdr := f.identity()
	hdr.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+want-1))
	resp, err := f.get(origin.WithClientToken(ctx, f.tok), hdr)
	if err != nil {
		return 0, fmt.Errorf("read %d@%d: %w", len(p), off, err)
	}
	defer resp.Body.Close()
	u := f.o.url(f.path)
	switch resp.StatusCode {
	case http.StatusPartialContent:
		start, _, _, err := originhttp.ParseContentRange(resp.Header.Get("Content-Range"))
		if err != nil || start != off {
			resp.Body.Close()
			return 0, fmt.Errorf("GET %s range %d-%d: answered Content-Range %q: %w", u, off, off+want-1, resp.Header.Get("Content-Range"), origin.ErrInvalid)
		}
	case http.StatusOK:
		// The server ignored Range: skip to off. Correct, if wasteful;
		// only servers without range support do this.
		if _, err := io.CopyN(io.Discard, resp.Body, off); err != nil {
			return 0, fmt.Errorf("GET %s: skipping to %d of a full response: %w: %w", u, off, err, origin.ErrUnavailable)
		}
	case http.StatusRequestedRangeNotSatisfiable:
		return 0, io.EOF // the file shrank; the identity check missed it
	default:
		return 0, fmt.Errorf("read %d@%d: %w", len(p), off, statusError(http.MethodGet, u, resp))
	}
	n, err := origin.ReadFullProgress(resp.Body, p[:want], progress)
	if err != nil {
		return n, fmt.Errorf("GET %s range %d-%d: body after %d bytes: %w: %w", u, off, off+want-1, n, err, origin.ErrUnavailable)
	}
	if want < int64(len(p)) {
		return n, io.EOF
	}
	return n, nil
}
