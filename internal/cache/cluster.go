package cache

import (
	"context"
	"fmt"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/origin"
)

// OpenCached opens the file whose cache key is (originURL, p), p being the
// path after name mapping, only if it is complete in the cache; otherwise
// it returns an error wrapping origin.ErrNotFound. It never contacts an
// origin: it serves the peer lookups of a cluster (a node asking whether
// this one has a file before fetching it from the origin).
func (c *Cache) OpenCached(ctx context.Context, originURL, p string) (backend.File, error) {
	cp, err := cleanPath(p)
	if err != nil {
		return nil, err
	}
	k := Key{Origin: originURL, Path: cp}
	c.mu.Lock()
	e := c.files[k]
	c.mu.Unlock()
	complete := false
	if e != nil && e.initialized() {
		complete = e.complete()
	} else if in := c.readSidecar(k); in != nil {
		complete = in.Complete()
	}
	if !complete {
		return nil, fmt.Errorf("%s: not complete in this cache: %w", k, origin.ErrNotFound)
	}
	// The origin is only used if the cached copy turns out unusable (its
	// data file is gone): then the lookup fails instead of fetching.
	e, err = c.acquire(ctx, noOrigin(originURL), k, false, true /* noFetch */)
	if err != nil {
		c.stats.OpenErrors.Add(1)
		return nil, fmt.Errorf("%s: %w: %w", k, origin.ErrNotFound, err)
	}
	return newHandle(e, backend.Request{Origin: originURL, Path: cp, Protocol: "peer", NoFetch: true}, c.cfg.now()), nil
}

// noOrigin stands for an origin that must not be contacted.
type noOrigin string

var _ origin.Origin = noOrigin("")

func (o noOrigin) err(op, p string) error {
	return fmt.Errorf("%s %s%s: cache-only access: %w", op, string(o), p, origin.ErrUnavailable)
}

func (o noOrigin) Stat(ctx context.Context, p string) (origin.FileInfo, error) {
	return origin.FileInfo{}, o.err("stat", p)
}

func (o noOrigin) Open(ctx context.Context, p string) (origin.File, error) {
	return nil, o.err("open", p)
}

func (o noOrigin) List(ctx context.Context, p string, withStat bool) ([]origin.FileInfo, error) {
	return nil, o.err("list", p)
}

func (o noOrigin) Checksum(ctx context.Context, p, algo string) (string, error) {
	return "", o.err("checksum", p)
}

func (o noOrigin) String() string { return string(o) }
func (o noOrigin) Close() error   { return nil }
