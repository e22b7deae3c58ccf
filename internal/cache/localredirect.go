package cache

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/policy"
	"github.com/hepcache/hepcache/internal/sidecar"
)

// validLocalRedirect checks Config.LocalRedirect: empty, or a clean
// absolute path that fits in a URL without escaping.
func validLocalRedirect(p string) error {
	if p == "" {
		return nil
	}
	if !strings.HasPrefix(p, "/") || path.Clean(p) != p || strings.ContainsAny(p, "?#\x00") {
		return fmt.Errorf("local redirect %q: want a clean absolute path without '?' or '#', e.g. /mnt/cache-space/data", p)
	}
	return nil
}

// localRedirect returns the redirect that sends the client of req to its
// own copy of k under Config.LocalRedirect, or nil when the proxy serves
// the open: the feature is off, the client cannot follow such a redirect,
// the path is not cached as immutable, or the file is not complete,
// durable and checksummed.
//
// Only durable blocks count (the sidecar's bitmap, not the blocks written
// but not yet synced): the client reads the file through its own mount,
// possibly of a shared file system on another host, which sees only what
// the cache has synced. A file whose checksum is not yet known is still
// being verified against the origin and may be dropped; it is served here
// until then.
func (c *Cache) localRedirect(k Key, req backend.Request, d policy.Decision) *backend.RedirectError {
	if c.cfg.LocalRedirect == "" || !req.FollowsFileRedirect || d.Action != policy.Cache || d.Mutable {
		return nil
	}
	size, ok := c.completeChecksummed(k)
	if !ok {
		return nil
	}
	// The data file must be there with its full size (an admin may have
	// deleted it; the proxy then fetches it again).
	dp := c.dataPath(k)
	if st, err := c.cfg.FS.Stat(dp); err != nil || !st.Mode().IsRegular() || st.Size() != size {
		return nil
	}
	rel, err := filepath.Rel(filepath.Join(c.cfg.Dir, "data"), dp)
	if err != nil || strings.ContainsAny(rel, "?#") {
		return nil
	}
	// The client reads the file without the cache seeing it: count it as a
	// use so that purge keeps recently redirected files.
	now := c.cfg.now()
	c.catalog.Touch(k, now)
	c.stats.LocalRedirects.Add(1)
	if fn := c.cfg.OnAccess; fn != nil {
		// The access-log line of the access, whose bytes the cache does
		// not see: status "redirect", bytes_read 0 (docs/access-log.md).
		fn(AccessRecord{Time: now.UTC(), OpenTime: now.UTC(), Path: k.Path, Origin: k.Origin, Size: size,
			Client: req.Client, User: req.User, Protocol: req.Protocol, Status: "redirect"})
	}
	return &backend.RedirectError{URL: "file://localhost" + path.Join(c.cfg.LocalRedirect, filepath.ToSlash(rel))}
}

// completeChecksummed returns the size of k if its durable state (the open
// entry's, else the sidecar's) is complete with a known checksum.
func (c *Cache) completeChecksummed(k Key) (size int64, ok bool) {
	c.mu.Lock()
	e := c.files[k]
	c.mu.Unlock()
	if e != nil && e.initialized() {
		// The checksum is published only once the complete file was
		// synced and checked: no need to wait for a sync in progress.
		if s := e.sums.Load(); s != nil {
			return s.Len, true
		}
		return e.size, false
	}
	in := c.readSidecar(k)
	if in == nil {
		return 0, false
	}
	return in.FileSize, in.Complete() && in.ChecksumState != sidecar.ChecksumNone
}
