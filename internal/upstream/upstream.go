// Package upstream decides which origin serves a request: the configured
// default origin, or in forwarding mode the site named in the request, but
// only when that site is on the allow-list, so that hepcache is never an open
// proxy. It canonicalises origin URLs (the cache key depends on them) and keeps
// one Origin per site.
package upstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/hepcache/hepcache/origin"
	s3origin "github.com/hepcache/hepcache/origin/s3"
)

// DialFunc creates the Origin for a canonical URL of one scheme.
type DialFunc func(ctx context.Context, canonical string) (origin.Origin, error)

// Config configures a Set.
type Config struct {
	// Default is the origin for requests that name none, e.g.
	// "root://origin.example:1094" or "file:///data". Empty: every request
	// must name its origin (pure forwarding proxy).
	Default string
	// ForwardAllow lists the origins clients may name (forwarding mode):
	// "host" (any port), "host:port", or a domain suffix ".example.org" /
	// "*.example.org". Empty disables forwarding.
	ForwardAllow []string
	// Trusted lists origins the site's own configuration names (name
	// mapping rules); they are allowed like the default origin.
	Trusted []string
	// Dial maps a scheme ("root", "file", "https", ...) to the function that
	// creates its origins. Required for every scheme in use.
	Dial map[string]DialFunc
}

// Set resolves origin URLs. It implements origin.Resolver.
type Set struct {
	def     string
	trusted map[string]bool
	allow   []rule
	dial    map[string]DialFunc

	// mu protects origins and closed.
	mu      sync.Mutex
	origins map[string]origin.Origin
	// closed refuses new dials after Close: a shutdown that cut a stuck
	// origin must not dial it again for the work it is ending.
	closed bool
}

var _ origin.Resolver = (*Set)(nil)

type rule struct {
	host   string // lower case; suffix rules start with "."
	port   int    // 0 = any
	suffix bool
}

// New validates cfg and returns a Set.
func New(cfg Config) (*Set, error) {
	s := &Set{dial: cfg.Dial, origins: map[string]origin.Origin{}, trusted: map[string]bool{}}
	var errs []error
	for _, t := range cfg.Trusted {
		c, err := Canonical(t)
		if err != nil {
			errs = append(errs, fmt.Errorf("origin %q: %w", t, err))
			continue
		}
		s.trusted[c] = true
	}
	if cfg.Default != "" {
		c, err := Canonical(cfg.Default)
		if err != nil {
			errs = append(errs, fmt.Errorf("default origin: %w", err))
		} else if _, ok := cfg.Dial[scheme(c)]; !ok {
			errs = append(errs, fmt.Errorf("default origin %q: scheme not supported", cfg.Default))
		}
		s.def = c
	}
	for _, a := range cfg.ForwardAllow {
		r, err := parseRule(a)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s.allow = append(s.allow, r)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

func parseRule(a string) (rule, error) {
	a = strings.ToLower(strings.TrimSpace(a))
	bad := func(why string) (rule, error) {
		return rule{}, fmt.Errorf("forward-allow entry %q: %s (want host, host:port or .domain.suffix)", a, why)
	}
	if a == "" || a == "*" || a == "." || a == "*." {
		return bad("would allow every host")
	}
	if strings.Contains(a, "/") {
		return bad("no scheme or path")
	}
	if strings.HasPrefix(a, "*.") {
		a = a[1:]
	}
	if strings.HasPrefix(a, ".") {
		if strings.Contains(a, ":") {
			return bad("a domain suffix takes no port")
		}
		return rule{host: a, suffix: true}, nil
	}
	host, port := a, 0
	if h, p, err := net.SplitHostPort(a); err == nil {
		n, perr := strconv.Atoi(p)
		if perr != nil || n <= 0 || n > 65535 {
			return bad("bad port")
		}
		host, port = h, n
	}
	return rule{host: host, port: port}, nil
}

// Allowed reports whether forwarding to the canonical origin c is permitted.
func (s *Set) Allowed(c string) bool {
	if c == s.def || s.trusted[c] {
		return true
	}
	if scheme(c) == "s3" {
		// A bucket is reached with the site's own credentials: only the
		// buckets the configuration names, never one a client names.
		return false
	}
	u, err := url.Parse(c)
	if err != nil {
		return false
	}
	host := strings.ToLower(u.Hostname())
	port, _ := strconv.Atoi(u.Port())
	for _, r := range s.allow {
		if r.suffix {
			if strings.HasSuffix(host, r.host) {
				return true
			}
			continue
		}
		if host == r.host && (r.port == 0 || r.port == port) {
			return true
		}
	}
	return false
}

// Resolve implements origin.Resolver: "" is the default origin, anything
// else must be allowed by ForwardAllow.
func (s *Set) Resolve(ctx context.Context, raw string) (origin.Origin, error) {
	c := s.def
	if raw != "" {
		var err error
		if c, err = Canonical(raw); err != nil {
			return nil, fmt.Errorf("origin %q: %w: %w", raw, err, origin.ErrBadName)
		}
		if !s.Allowed(c) {
			if len(s.allow) == 0 {
				return nil, fmt.Errorf("forwarding to %s is not allowed: forwarding is off (no forward-allow list): %w", c, origin.ErrNotAllowed)
			}
			return nil, fmt.Errorf("forwarding to %s is not allowed: not on the forward-allow list: %w", c, origin.ErrNotAllowed)
		}
	} else if c == "" {
		return nil, fmt.Errorf("no default origin configured and the request names none: %w", origin.ErrNotAllowed)
	}
	s.mu.Lock()
	o, closed := s.origins[c], s.closed
	s.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("origin %s: %w", c, errClosed)
	}
	if o != nil {
		return o, nil
	}
	dial, ok := s.dial[scheme(c)]
	if !ok {
		return nil, fmt.Errorf("origin %s: scheme not supported: %w", c, origin.ErrUnsupported)
	}
	o, err := dial(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("origin %s: %w", c, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		o.Close()
		return nil, fmt.Errorf("origin %s: %w", c, errClosed)
	}
	if prev := s.origins[c]; prev != nil {
		// Lost a race with another dial: keep the first.
		o.Close()
		return prev, nil
	}
	s.origins[c] = o
	return o, nil
}

// errClosed answers resolutions after Close.
var errClosed = fmt.Errorf("upstream: origins closed (shutting down): %w", origin.ErrUnavailable)

// Close closes every origin, ending the calls still waiting for one, and
// refuses later resolutions. It is idempotent.
func (s *Set) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	var errs []error
	for k, o := range s.origins {
		if err := o.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", k, err))
		}
		delete(s.origins, k)
	}
	return errors.Join(errs...)
}

func scheme(c string) string {
	if i := strings.Index(c, "://"); i > 0 {
		return c[:i]
	}
	return ""
}

// Canonical returns the canonical form of an origin URL: scheme in
// {root, roots, http, https, file, s3}, lower-case host, explicit port (1094 for
// root://, 443/80 for https/http), the path of file://, s3://
// (s3://bucket/key-prefix) and http(s):// origins (a web server's base
// directory, a federation director's redirect endpoint), cleaned and
// without a trailing slash; no path for root:// origins, which are read at
// the paths clients ask. xroot:// is root://. What it drops is listed by
// Ignored, so that a configuration check can say so.
func Canonical(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("parse origin URL: %w", err)
	}
	sch := strings.ToLower(u.Scheme)
	switch sch {
	case "xroot":
		sch = "root"
	case "xroots":
		sch = "roots"
	case "root", "roots", "http", "https", "file":
	case "s3":
		bucket, prefix, err := s3origin.ParseURL(raw)
		if err != nil {
			return "", err
		}
		return "s3://" + bucket + strings.TrimSuffix("/"+prefix, "/"), nil
	case "":
		return "", errors.New("origin URL needs a scheme (root://, https://, file://, s3://)")
	default:
		return "", fmt.Errorf("unsupported scheme %q", u.Scheme)
	}
	if sch == "file" {
		if u.Host != "" && u.Host != "localhost" {
			return "", errors.New("file:// origin must be local (file:///dir)")
		}
		p := strings.TrimRight(u.Path, "/")
		if p == "" || !strings.HasPrefix(p, "/") {
			return "", errors.New("file:// origin needs an absolute directory")
		}
		return "file://" + p, nil
	}
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return "", errors.New("origin URL has no host")
	}
	if strings.ContainsAny(host, " \x00") {
		return "", errors.New("bad host")
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"root": "1094", "roots": "1094", "http": "80", "https": "443"}[sch]
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return "", fmt.Errorf("bad port %q", port)
	}
	c := sch + "://" + net.JoinHostPort(host, port)
	if sch == "http" || sch == "https" {
		if p := webPath(u); p != "" {
			if strings.Contains(p, "/../") || strings.HasSuffix(p, "/..") {
				return "", errors.New("origin URL path climbs with ..")
			}
			c += p
		}
	}
	return c, nil
}

// webPath is the base path of an http(s) origin URL as it is sent: escaped,
// repeated slashes and "." segments removed, without a trailing slash; ""
// for the server's root.
func webPath(u *url.URL) string {
	segs := strings.Split(u.EscapedPath(), "/")
	out := segs[:0]
	for _, s := range segs {
		if s != "" && s != "." {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return ""
	}
	return "/" + strings.Join(out, "/")
}

// Ignored lists the parts of an origin URL that Canonical drops, each as
// a phrase naming the part and why ("the path \"//store\": root://
// origins are read at the paths clients ask; ..."), for a configuration
// check to warn about. Credentials in the URL are named, never shown.
// Nil for a URL that is kept whole, or that Canonical refuses.
func Ignored(raw string) []string {
	if _, err := Canonical(raw); err != nil {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	sch := strings.ToLower(u.Scheme)
	if sch == "s3" {
		return nil // s3origin.ParseURL refuses what it would not use
	}
	var out []string
	if u.User != nil {
		out = append(out, "the user information before the host (credentials are not taken from origin URLs: use [security] origin_token_file or origin_cert, or the s3 key files)")
	}
	switch sch {
	case "root", "roots", "xroot", "xroots":
		if p := strings.Trim(u.Path, "/"); p != "" {
			out = append(out, fmt.Sprintf("the path %q (root:// origins are read at the paths clients ask: to read a client's /f from %s/f, use a [[namespace]] prefix with this origin, or a [[map]] rule)", u.Path, u.Path))
		}
	}
	if u.RawQuery != "" || u.ForceQuery {
		out = append(out, fmt.Sprintf("the query %q (origin URLs carry no opaque data; a cache's own credential is in [security])", "?"+u.RawQuery))
	}
	if u.Fragment != "" {
		out = append(out, fmt.Sprintf("the fragment %q", "#"+u.Fragment))
	}
	return out
}
