package xrootd

import (
	"errors"
	"strings"

	"github.com/hepcache/hepcache/internal/backend"
)

// Redirects to local files (seed 000's shared cache space).
//
// The backend may answer an open with a RedirectError to
// file://localhost/<path>: XrdCl then opens that file itself
// (XrdClLocalFileHandler) and reads it without the server. A client that
// cannot see the file (no mount) fails locally; XrdCl then retries the
// open at the manager that sent it, with tried=<host> in the opaque, and
// the rewritten local path as the path. It retries only at a manager,
// which is why the server announces itself as one when local redirects
// are on (Config.Manager); from a plain data server XrdCl 5.5.3 retries
// the local file in a tight loop until it crashes.
//
// XrdCl 5.5.3 sends the retried open with the local path it failed to open
// (its request was rewritten for the redirect); XrdCl 6 sends the original
// path. So the connection remembers the redirects it sent, and an open with
// tried= of a remembered local path is the client coming back: it is served
// the original path through the backend. Any open with tried= is served
// without a local redirect (the client reports a failure where it was
// sent), which also ends the loop when the connection has forgotten the
// redirect (a reconnect). The original path goes through the Authorizer
// again, as any open does.

// maxLocalRedirects bounds the redirects a connection remembers; XrdCl
// comes back within milliseconds of the redirect, so a few suffice even
// for a client opening many files at once.
const maxLocalRedirects = 64

// localRedirect is a redirect to a local file sent on a connection.
type localRedirect struct {
	// target is the local path the client was sent to, as it sends it
	// back in the retried open.
	target string
	// raw is the path (and opaque) of the client's original open, path
	// the path alone.
	raw, path string
}

// noteLocalRedirect remembers the redirect in err, if it is one to a
// local file, answering the open of raw.
func (c *conn) noteLocalRedirect(err error, raw string) {
	var re *backend.RedirectError
	if !errors.As(err, &re) {
		return
	}
	target, ok := strings.CutPrefix(re.URL, "file://localhost")
	if !ok {
		return
	}
	target, _, _ = strings.Cut(target, "?")
	c.srv.stats.LocalRedirects.Add(1)
	c.localMu.Lock()
	defer c.localMu.Unlock()
	if len(c.local) >= maxLocalRedirects {
		c.local = append(c.local[:0], c.local[1:]...)
	}
	p, _, _ := strings.Cut(raw, "?")
	c.local = append(c.local, localRedirect{target: target, raw: raw, path: p})
}

// localFallback looks at an open of raw. If raw carries tried= (the client
// failed where it was sent), the open must not be redirected to a local
// file (retry). If raw is moreover the local path of a redirect this
// connection sent, orig is the path of the client's original open, to be
// served instead; otherwise orig is raw.
func (c *conn) localFallback(raw string) (orig string, retry bool) {
	p, opaque, _ := strings.Cut(raw, "?")
	if !hasKey(opaque, "tried") {
		return raw, false
	}
	c.localMu.Lock()
	defer c.localMu.Unlock()
	for i, l := range c.local {
		if l.target == p || l.path == p {
			c.local = append(c.local[:i], c.local[i+1:]...)
			c.srv.stats.LocalFallbacks.Add(1)
			c.log.Info("xrootd: client could not open the local file it was redirected to (is the cache space mounted there?); serving it",
				"client", c.remote, "path", l.path, "local", l.target)
			if l.target == p {
				return l.raw, true
			}
			return raw, true
		}
	}
	return raw, true
}

// hasKey reports whether the CGI string opaque has key.
func hasKey(opaque, key string) bool {
	for opaque != "" {
		var kv string
		kv, opaque, _ = strings.Cut(opaque, "&")
		if k, _, _ := strings.Cut(kv, "="); k == key {
			return true
		}
	}
	return false
}
