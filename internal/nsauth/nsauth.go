// Package nsauth authorizes requests by a namespace list that someone
// else publishes (a data federation's director): each namespace says
// whether anyone may read it and, if not, which token issuers grant access
// under it and from which base paths their scopes count. A request under a
// namespace is decided here, as the federation decides, and by the site's
// own rules as well (the next authorizer; the stricter wins: a director's
// list never opens what the site closes); a request under none is left to
// the site's rules alone.
//
// # Why a package of its own
//
// The cache and its front ends know nothing of federations: they call an
// Authorizer. The federation membership (package pelican) learns the
// namespaces and hands them to Set; the server puts this authorizer in
// front of the site's (package security). The list changes while the
// cache runs (namespaces come and go with the origins), so it is replaced
// whole under a lock, and the token verifier is rebuilt only when the set
// of issuers changes.
//
// # Tokens
//
// A private namespace needs a bearer token (Authorization header, or
// authz= in the query or the root:// opaque data) that an issuer of that
// namespace signed, that names one of Config.Audiences, and whose storage
// scope for the operation covers the path once joined to one of the
// issuer's base paths (the SciTokens convention that XRootD's scitokens
// plugin and Pelican's caches follow: scope storage.read:/ of an issuer
// with base path /private covers /private/f). An issuer's restricted
// paths, when it has any, further bound what its tokens reach. Anything
// else is refused with the reason, never with the token.
package nsauth

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hepcache/hepcache/internal/auth/token"
	"github.com/hepcache/hepcache/internal/backend"
)

// Issuer is a token issuer of a namespace.
type Issuer struct {
	// URL is the issuer ("iss"), an https:// URL whose
	// /.well-known/openid-configuration names its keys.
	URL string
	// BasePaths are where the issuer's scope paths live: with "/private",
	// storage.read:/a covers /private/a. Empty: "/".
	BasePaths []string
	// RestrictedPaths, when not empty, bound the paths its tokens may
	// reach (absolute namespace paths).
	RestrictedPaths []string
}

// Namespace is one entry of the published list.
type Namespace struct {
	// Path is the namespace prefix ("/public", "/ospool/data").
	Path string
	// PublicRead: anyone may read (open, stat, list, checksum) below
	// Path, with or without a token.
	PublicRead bool
	// Issuers grant access below Path to the bearers of their tokens.
	Issuers []Issuer
}

// Operations a token's storage scope must grant.
const (
	OpRead   = "read"   // GET, HEAD, PROPFIND, prestage
	OpModify = "modify" // evict
)

// Defaults. A zero Config field means "use the default".
const (
	// defaultClockSkew tolerates clocks that differ a little, as the
	// WLCG profile recommends.
	defaultClockSkew = 60 * time.Second
)

// Config configures an Authorizer.
type Config struct {
	// Audiences are the "aud" values a token must name one of: the
	// cache's data URL, "https://wlcg.cern.ch/jwt/v1/any", "ANY". Required.
	Audiences []string
	// RootCAs verify the issuers' https servers. Nil: the system pool.
	RootCAs *x509.CertPool
	// ClockSkew is the tolerance on exp, nbf and iat. Default 60 s.
	ClockSkew time.Duration
	// AllowTokensWithoutTLS accepts tokens that came over unencrypted
	// connections (?authz= on plain root://, plain http://), as the
	// site's security.allow_tokens_without_tls does. Default false: such
	// a token is ignored and the request is decided as without one.
	AllowTokensWithoutTLS bool
	// Logger receives denials (at debug: federation clients are many) and
	// issuer changes. Default slog.Default().
	Logger *slog.Logger
}

// verifier is what the Authorizer needs of token.Verifier.
type verifier interface {
	Verify(ctx context.Context, raw string) (*token.Claims, error)
	Close() error
}

// Authorizer decides requests under the namespaces last Set. Safe for
// concurrent use.
type Authorizer struct {
	cfg Config
	// newVerifier builds the verifier of a set of issuers; a test seam.
	newVerifier func(*token.Config) (verifier, error)

	// setMu serialises Set (which builds verifiers outside mu).
	setMu sync.Mutex
	// mu protects ns, ver and issuers.
	mu sync.RWMutex
	// ns is sorted by decreasing path length: the first match is the
	// longest.
	ns []Namespace
	// ver verifies tokens of issuers (the sorted issuer URLs joined);
	// nil when no namespace has an issuer.
	ver     verifier
	issuers string
}

// New validates cfg and returns an Authorizer with no namespace: every
// request is left to the next authorizer until Set.
func New(cfg *Config) (*Authorizer, error) {
	c := *cfg
	c.Audiences = slices.Clone(cfg.Audiences)
	if c.ClockSkew == 0 {
		c.ClockSkew = defaultClockSkew
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	var errs []error
	if len(c.Audiences) == 0 {
		errs = append(errs, errors.New("audiences: required (the cache's URL, or https://wlcg.cern.ch/jwt/v1/any)"))
	}
	if c.ClockSkew < 0 {
		errs = append(errs, fmt.Errorf("clock skew %v: must not be negative", c.ClockSkew))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("nsauth: %w", err)
	}
	return &Authorizer{cfg: c, newVerifier: func(tc *token.Config) (verifier, error) { return token.New(tc) }}, nil
}

// Set replaces the namespaces. Namespaces with a malformed path or issuer
// are left out and reported in the error (the others are in force).
func (a *Authorizer) Set(list []Namespace) error {
	a.setMu.Lock()
	defer a.setMu.Unlock()
	var errs []error
	ns := make([]Namespace, 0, len(list))
	urls := map[string]bool{}
	for _, n := range list {
		p, err := cleanAbs(n.Path)
		if err != nil {
			errs = append(errs, fmt.Errorf("namespace %q: %w", n.Path, err))
			continue
		}
		n.Path = p
		ok := true
		for i, is := range n.Issuers {
			if !strings.HasPrefix(is.URL, "https://") {
				errs = append(errs, fmt.Errorf("namespace %s: issuer %q is not an https:// URL", p, is.URL))
				ok = false
				break
			}
			is.BasePaths = slices.Clone(is.BasePaths)
			for j, b := range is.BasePaths {
				if is.BasePaths[j], err = cleanAbs(b); err != nil {
					errs = append(errs, fmt.Errorf("namespace %s: issuer %s: base path %q: %w", p, is.URL, b, err))
					ok = false
				}
			}
			is.RestrictedPaths = slices.Clone(is.RestrictedPaths)
			for j, r := range is.RestrictedPaths {
				if is.RestrictedPaths[j], err = cleanAbs(r); err != nil {
					errs = append(errs, fmt.Errorf("namespace %s: issuer %s: restricted path %q: %w", p, is.URL, r, err))
					ok = false
				}
			}
			n.Issuers = slices.Clone(n.Issuers)
			n.Issuers[i] = is
		}
		if !ok {
			continue
		}
		for _, is := range n.Issuers {
			urls[is.URL] = true
		}
		ns = append(ns, n)
	}
	sort.SliceStable(ns, func(i, j int) bool { return len(ns[i].Path) > len(ns[j].Path) })
	keys := make([]string, 0, len(urls))
	for u := range urls {
		keys = append(keys, u)
	}
	sort.Strings(keys)
	joined := strings.Join(keys, " ")

	a.mu.RLock()
	same := joined == a.issuers
	a.mu.RUnlock()
	var ver verifier
	if !same && len(keys) > 0 {
		tc := &token.Config{Audiences: a.cfg.Audiences, ClockSkew: a.cfg.ClockSkew, RootCAs: a.cfg.RootCAs}
		for _, u := range keys {
			tc.Issuers = append(tc.Issuers, token.Issuer{Issuer: u})
		}
		v, err := a.newVerifier(tc)
		if err != nil {
			// Keep the namespaces (public ones work) but no token can
			// be verified: private reads are refused, never allowed.
			errs = append(errs, fmt.Errorf("token issuers: %w", err))
		}
		ver = v
	}
	a.mu.Lock()
	a.ns = ns
	var old verifier
	if !same {
		old, a.ver, a.issuers = a.ver, ver, joined
	}
	a.mu.Unlock()
	if old != nil {
		old.Close()
	}
	if !same {
		a.cfg.Logger.Info("nsauth: token issuers", "issuers", joined, "namespaces", len(ns))
	}
	return errors.Join(errs...)
}

// Namespaces returns the namespaces in force, longest path first.
func (a *Authorizer) Namespaces() []Namespace {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return slices.Clone(a.ns)
}

// Lookup returns the namespace holding p (a clean absolute path): the one
// with the longest path that is p or a parent of it.
func (a *Authorizer) Lookup(p string) (Namespace, bool) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.lookupLocked(p)
}

func (a *Authorizer) lookupLocked(p string) (Namespace, bool) {
	for _, n := range a.ns {
		if token.PathCovers(n.Path, p) {
			return n, true
		}
	}
	return Namespace{}, false
}

// Decision is the outcome of Decide for a path under a namespace.
type Decision struct {
	// Namespace is the namespace holding the path.
	Namespace string
	// User names the bearer of the token that granted access (sub@iss),
	// "" for a public read without one.
	User string
	// Until is when the grant ends (the token's expiry plus the clock
	// skew tolerated); zero for a public read, which needs no token.
	Until time.Time
}

// ErrNoNamespace: the path is under no namespace; the caller's own rules
// decide.
var ErrNoNamespace = errors.New("nsauth: path under no federation namespace")

// Decide says whether the bearer of tok ("" for none) may do op (OpRead,
// OpModify) on p, a clean absolute path. It returns ErrNoNamespace for a
// path under no namespace, nil with the decision to allow, or an error
// wrapping backend.ErrForbidden whose text is the reason (never the
// token).
func (a *Authorizer) Decide(ctx context.Context, p, op, tok string) (Decision, error) {
	a.mu.RLock()
	n, ok := a.lookupLocked(p)
	ver := a.ver
	a.mu.RUnlock()
	if !ok {
		return Decision{}, ErrNoNamespace
	}
	d := Decision{Namespace: n.Path}
	if op == OpRead && n.PublicRead {
		return d, nil
	}
	what := "reading"
	if op != OpRead {
		what = "the " + op + " operation on"
	}
	if len(n.Issuers) == 0 {
		return d, fmt.Errorf("%s %s needs a token, and namespace %s names no issuer: %w", what, p, n.Path, backend.ErrForbidden)
	}
	if tok == "" {
		return d, fmt.Errorf("%s %s needs a bearer token from an issuer of namespace %s (%s): none was presented: %w",
			what, p, n.Path, issuerList(n), backend.ErrForbidden)
	}
	if ver == nil {
		return d, fmt.Errorf("%s %s: the issuers of namespace %s cannot be verified here (see the cache's log): %w", what, p, n.Path, backend.ErrForbidden)
	}
	c, err := ver.Verify(ctx, tok)
	if err != nil {
		return d, fmt.Errorf("%s %s: bearer token refused: %s: %w", what, p, strings.TrimSuffix(err.Error(), ": "+token.ErrInvalid.Error()), backend.ErrForbidden)
	}
	d.User = c.Name()
	if !c.Expiry.IsZero() {
		d.Until = c.Expiry.Add(a.cfg.ClockSkew)
	}
	for _, is := range n.Issuers {
		if is.URL != c.Issuer {
			continue
		}
		if grants(is, c, op, p) {
			return d, nil
		}
		return d, fmt.Errorf("%s %s: the token of %s grants no storage.%s scope covering it (scopes %s, base paths %s): %w",
			what, p, c.Name(), op, scopeList(c), strings.Join(basePaths(is), ","), backend.ErrForbidden)
	}
	return d, fmt.Errorf("%s %s: the token is from %s, not from an issuer of namespace %s (%s): %w",
		what, p, c.Issuer, n.Path, issuerList(n), backend.ErrForbidden)
}

// grants reports whether a scope of c for op, joined to a base path of
// is, covers p, within is's restricted paths.
func grants(is Issuer, c *token.Claims, op, p string) bool {
	if len(is.RestrictedPaths) > 0 && !slices.ContainsFunc(is.RestrictedPaths, func(r string) bool { return token.PathCovers(r, p) }) {
		return false
	}
	for _, s := range c.Scopes {
		if s.Op != op {
			continue
		}
		for _, b := range basePaths(is) {
			if token.PathCovers(path.Join(b, s.Path), p) {
				return true
			}
		}
	}
	return false
}

func basePaths(is Issuer) []string {
	if len(is.BasePaths) == 0 {
		return []string{"/"}
	}
	return is.BasePaths
}

func issuerList(n Namespace) string {
	var out []string
	for _, is := range n.Issuers {
		out = append(out, is.URL)
	}
	return strings.Join(out, ", ")
}

func scopeList(c *token.Claims) string {
	if len(c.Scopes) == 0 {
		return "none"
	}
	var out []string
	for _, s := range c.Scopes {
		out = append(out, s.String())
	}
	return strings.Join(out, " ")
}

// cleanAbs cleans an absolute path, refusing relative ones and "..".
func cleanAbs(p string) (string, error) {
	if !strings.HasPrefix(p, "/") {
		return "", errors.New("not an absolute path")
	}
	if strings.ContainsRune(p, 0) || slices.Contains(strings.Split(p, "/"), "..") {
		return "", errors.New("contains '..' or NUL")
	}
	return path.Clean(p), nil
}

// Close stops the token verifier's key downloads.
func (a *Authorizer) Close() error {
	a.mu.Lock()
	v := a.ver
	a.ver, a.issuers = nil, ""
	a.mu.Unlock()
	if v != nil {
		return v.Close()
	}
	return nil
}
