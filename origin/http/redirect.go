package httporigin

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// # Redirects
//
// An origin URL may be a redirector: a Pelican director sends each
// request to the origin that holds the object, a dCache WebDAV door sends
// each GET to a pool. Followed on every block read, the redirector sees a
// request per block (1,030 for a 1 GiB object), and a federation's
// director serves every cache and client of the federation. So an open
// file keeps the target its open (or a read) was redirected to and sends
// its reads there; the open's answer (size, ETag) pins the version, which
// every read carries as If-Match. The redirector is asked again only when
// the target fails (no answer, 5xx, 4xx other than a version change) or
// its time is up (Config.RedirectTTL, or the redirect's Cache-Control
// max-age, no-store: not kept). A door whose targets are good for one
// request (its first reuse answered 4xx) has its targets no longer kept.
//
// Credentials (the cache's Authorization and the client's authz) follow a
// redirect only over https, and only to hosts vouched for: the origin
// URL's own host, a host the origin URL's host redirected to when
// AuthorizeRedirects (the federation's director names the federation's
// origins), and past those only the same host again. Anything else is
// sent without them: a redirect to http://, or onward from an origin to a
// host nobody named, cannot take the federation's token.

// target is a redirect target kept for an open file's reads.
type target struct {
	// u is the URL the redirects led to, without authz (the client's
	// token is added per request, where cred allows).
	u *url.URL
	// cred: the credentials go there (credentialed when learnt).
	cred bool
	// until is when the target is dropped.
	until time.Time
	// used is set once a read went there: a first reuse that fails says
	// the origin's targets are single-use.
	used bool
}

// credentialed reports whether a request that went along chain (the
// origin URL or a kept target first, the redirects' targets after it) may
// carry the credentials at its last URL.
func (o *Origin) credentialed(chain []*url.URL) bool {
	dest := chain[len(chain)-1]
	if dest.Scheme != "https" {
		return false
	}
	if !o.cfg.AuthorizeRedirects {
		return sameHost(dest, o.base)
	}
	for i := 1; i < len(chain); i++ {
		if chain[i].Scheme != "https" {
			return false
		}
		// The origin URL's host names hosts; others only themselves.
		if !sameHost(chain[i-1], o.base) && !sameHost(chain[i], chain[i-1]) {
			return false
		}
	}
	return true
}

// sameHost compares host and port.
func sameHost(a, b *url.URL) bool {
	return strings.EqualFold(a.Host, b.Host)
}

// setAuthz puts tok in u's query as authz, keeping the other parameters.
func setAuthz(u *url.URL, tok string) {
	q := u.Query()
	q.Set("authz", tok)
	u.RawQuery = q.Encode()
}

// dropAuthz removes authz from u's query.
func dropAuthz(u *url.URL) {
	if !strings.Contains(u.RawQuery, "authz") {
		return
	}
	q := u.Query()
	q.Del("authz")
	u.RawQuery = q.Encode()
}

// targetOf returns the target a successful response was redirected to,
// to be kept; nil when it was not redirected, or targets are not kept.
func (o *Origin) targetOf(resp *http.Response) *target {
	last := resp.Request.Response // the redirect that led here
	if last == nil || o.cfg.RedirectTTL < 0 || o.noReuse.Load() {
		return nil
	}
	ttl := o.cfg.RedirectTTL
	for _, v := range last.Header.Values("Cache-Control") {
		for d := range strings.SplitSeq(v, ",") {
			d = strings.ToLower(strings.TrimSpace(d))
			if d == "no-store" || d == "no-cache" {
				return nil
			}
			if s, ok := strings.CutPrefix(d, "max-age="); ok {
				if n, err := strconv.Atoi(s); err == nil {
					ttl = min(ttl, time.Duration(n)*time.Second)
				}
			}
		}
	}
	if ttl <= 0 {
		return nil
	}
	var chain []*url.URL
	for r := resp.Request; r != nil; {
		chain = append(chain, r.URL)
		if r.Response == nil {
			break
		}
		r = r.Response.Request
	}
	for i, j := 0, len(chain)-1; i < j; i, j = i+1, j-1 {
		chain[i], chain[j] = chain[j], chain[i]
	}
	u := *resp.Request.URL
	dropAuthz(&u)
	return &target{u: &u, cred: o.credentialed(chain), until: o.cfg.now().Add(ttl)}
}

// get sends a GET (the read's hdr) for the file's bytes: to the kept
// target while it lasts, else to the origin URL, whose redirect is then
// kept. A kept target that fails is dropped and the origin URL asked.
func (f *file) get(ctx context.Context, hdr http.Header) (*http.Response, error) {
	o := f.o
	if t := f.target.Load(); t != nil {
		if o.cfg.now().Before(t.until) {
			resp, err := o.send(ctx, http.MethodGet, t.u, t.cred, hdr, nil)
			if ctx.Err() != nil || !targetFailed(resp, err) {
				if !t.used {
					// Copy on write: targets are shared by concurrent reads.
					cp := *t
					cp.used = true
					f.target.CompareAndSwap(t, &cp)
				}
				return resp, err
			}
			status := "no answer"
			if resp != nil {
				status = resp.Status
				io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
				resp.Body.Close()
				if !t.used && resp.StatusCode >= 400 && resp.StatusCode < 500 && !o.noReuse.Swap(true) {
					o.cfg.Logger.Info("redirect targets are not kept for this origin: the first reuse of one failed (its redirects are good for one request)",
						"origin", o.name, "target", stripQuery(t.u.String()), "status", status)
				}
			}
			o.cfg.Logger.Debug("redirect target failed; asking the origin URL again", "origin", o.name, "path", f.path,
				"target", stripQuery(t.u.String()), "status", status, "err", err)
		}
		f.target.CompareAndSwap(t, nil)
	}
	resp, err := o.do(ctx, http.MethodGet, f.path, hdr, nil)
	if err == nil && (resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusPartialContent) {
		if t := o.targetOf(resp); t != nil {
			f.target.Store(t)
		}
	}
	return resp, err
}

// targetFailed reports whether a read sent to a kept target should be
// asked of the origin URL instead: no answer, a server error, or a
// refusal; not a version change (412, 416), which the origin URL would
// lead to as well.
func targetFailed(resp *http.Response, err error) bool {
	if err != nil {
		return true
	}
	switch c := resp.StatusCode; {
	case c == http.StatusOK || c == http.StatusPartialContent:
		return false
	case c == http.StatusPreconditionFailed || c == http.StatusRequestedRangeNotSatisfiable:
		return false
	case c >= 400:
		return true
	}
	return false
}
