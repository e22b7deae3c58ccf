// Package federation chains caches: a cache can use other caches as its
// origin (site cache -> regional cache -> origin). Requests carry the caches
// they passed through (hc.via) so that a loop or a chain longer than a limit
// is refused, and a list of upstreams in preference order fails over when
// one is down.
package federation

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/origin"
)

// KeyVia is the opaque key listing the caches a request passed through,
// comma-separated, oldest first.
const KeyVia = "hc.via"

// DefaultMaxHops is how many caches a request may pass through.
const DefaultMaxHops = 4

// ErrLoop is returned for a request that passed through this cache already
// or through too many caches. It wraps origin.ErrInvalid (kXR_ArgInvalid,
// HTTP 502), so an upstream's refusal makes a Failover try the next one.
var ErrLoop = fmt.Errorf("federation: request loop: %w", origin.ErrInvalid)

type viaKey struct{}

// WithVia returns ctx carrying the via list for requests to upstreams.
func WithVia(ctx context.Context, via []string) context.Context {
	return context.WithValue(ctx, viaKey{}, via)
}

// ViaFrom returns the via list of ctx, or nil.
func ViaFrom(ctx context.Context) []string {
	v, _ := ctx.Value(viaKey{}).([]string)
	return v
}

// ParseVia returns the via list in an opaque string.
func ParseVia(opaque string) []string {
	for opaque != "" {
		var kv string
		kv, opaque, _ = strings.Cut(opaque, "&")
		if k, v, _ := strings.Cut(kv, "="); k == KeyVia {
			var out []string
			for _, n := range strings.Split(v, ",") {
				if n = strings.TrimSpace(n); n != "" {
					out = append(out, n)
				}
			}
			return out
		}
	}
	return nil
}

// Guard is the backend decorator that refuses loops: a request whose via
// list names this cache, or is MaxHops long, fails with ErrLoop; others go
// on with this cache added to the via list in their context, where
// ViaOrigin finds it.
type Guard struct {
	next    backend.Backend
	self    string
	maxHops int
}

var _ backend.Backend = (*Guard)(nil)

// NewGuard returns a Guard in front of next for the cache called self
// (unique among the caches of a federation). maxHops 0 means
// DefaultMaxHops.
func NewGuard(next backend.Backend, self string, maxHops int) *Guard {
	if next == nil || self == "" {
		panic("federation: NewGuard needs a backend and a name")
	}
	if maxHops <= 0 {
		maxHops = DefaultMaxHops
	}
	return &Guard{next: next, self: self, maxHops: maxHops}
}

// check refuses loops and returns the context for the next backend.
func (g *Guard) check(ctx context.Context, req backend.Request) (context.Context, error) {
	via := ParseVia(req.Opaque)
	for _, n := range via {
		if n == g.self {
			return ctx, fmt.Errorf("%s: came back to %s through %s: %w", req, g.self, strings.Join(via, " -> "), ErrLoop)
		}
	}
	if len(via) >= g.maxHops {
		return ctx, fmt.Errorf("%s: passed %d caches (%s), at most %d: %w", req, len(via), strings.Join(via, " -> "), g.maxHops, ErrLoop)
	}
	return WithVia(ctx, append(via[:len(via):len(via)], g.self)), nil
}

// Open implements backend.Backend.
func (g *Guard) Open(ctx context.Context, req backend.Request) (backend.File, error) {
	ctx, err := g.check(ctx, req)
	if err != nil {
		return nil, err
	}
	return g.next.Open(ctx, req)
}

// Stat implements backend.Backend.
func (g *Guard) Stat(ctx context.Context, req backend.Request) (origin.FileInfo, error) {
	ctx, err := g.check(ctx, req)
	if err != nil {
		return origin.FileInfo{}, err
	}
	return g.next.Stat(ctx, req)
}

// List implements backend.Backend.
func (g *Guard) List(ctx context.Context, req backend.Request, withStat bool) ([]origin.FileInfo, error) {
	ctx, err := g.check(ctx, req)
	if err != nil {
		return nil, err
	}
	return g.next.List(ctx, req, withStat)
}

// ListEach implements backend.EachLister.
func (g *Guard) ListEach(ctx context.Context, req backend.Request, withStat bool, fn func(origin.FileInfo) error) error {
	ctx, err := g.check(ctx, req)
	if err != nil {
		return err
	}
	return backend.ListEach(ctx, g.next, req, withStat, fn)
}

// Checksum implements backend.Backend.
func (g *Guard) Checksum(ctx context.Context, req backend.Request, algo string) (string, error) {
	ctx, err := g.check(ctx, req)
	if err != nil {
		return "", err
	}
	return g.next.Checksum(ctx, req, algo)
}

// ViaOrigin wraps a root:// Origin so that its requests carry the via list
// of their context (or just self, for requests the cache makes on its
// own) as opaque data, for the next cache's Guard. Origins that are not
// caches ignore it (XRootD ignores unknown CGI).
func ViaOrigin(o origin.Origin, self string) origin.Origin {
	return &viaOrigin{Origin: o, self: self}
}

type viaOrigin struct {
	origin.Origin
	self string
}

func (o *viaOrigin) path(ctx context.Context, p string) string {
	via := ViaFrom(ctx)
	if len(via) == 0 {
		via = []string{o.self}
	}
	sep := "?"
	if strings.Contains(p, "?") {
		sep = "&"
	}
	return p + sep + KeyVia + "=" + strings.Join(via, ",")
}

func (o *viaOrigin) Stat(ctx context.Context, p string) (origin.FileInfo, error) {
	vp := o.path(ctx, p)
	fi, err := o.Origin.Stat(ctx, vp)
	return fi, unvia(err, vp, p)
}

func (o *viaOrigin) Open(ctx context.Context, p string) (origin.File, error) {
	vp := o.path(ctx, p)
	f, err := o.Origin.Open(ctx, vp)
	return f, unvia(err, vp, p)
}

func (o *viaOrigin) List(ctx context.Context, p string, withStat bool) ([]origin.FileInfo, error) {
	vp := o.path(ctx, p)
	l, err := o.Origin.List(ctx, vp, withStat)
	return l, unvia(err, vp, p)
}

// ListEach implements origin.ListEacher, passing the origin's own through.
func (o *viaOrigin) ListEach(ctx context.Context, p string, withStat bool, fn func(origin.FileInfo) error) error {
	vp := o.path(ctx, p)
	return unvia(origin.ListEach(ctx, o.Origin, vp, withStat, fn), vp, p)
}

func (o *viaOrigin) Checksum(ctx context.Context, p, algo string) (string, error) {
	vp := o.path(ctx, p)
	c, err := o.Origin.Checksum(ctx, vp, algo)
	return c, unvia(err, vp, p)
}

// viaError is an origin's error with the path as the client named it:
// the via list is the caches' business, not the text a client, a
// prestage status or a log reads ("open root://o//f?hc.via=vm: ...").
type viaError struct {
	msg string
	err error
}

func (e *viaError) Error() string { return e.msg }
func (e *viaError) Unwrap() error { return e.err }

// unvia returns err with vp (the path with the via list) written as p.
func unvia(err error, vp, p string) error {
	if err == nil || !strings.Contains(err.Error(), vp) {
		return err
	}
	return &viaError{msg: strings.ReplaceAll(err.Error(), vp, p), err: err}
}

// errSwitch reports whether err at one upstream should make a Failover try
// the next: the upstream is down, timed out or refused a loop; not when
// the file is missing or the caller gave up.
func errSwitch(ctx context.Context, err error) bool {
	if ctx.Err() != nil || err == nil {
		return false
	}
	return errors.Is(err, origin.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, origin.ErrInvalid)
}
