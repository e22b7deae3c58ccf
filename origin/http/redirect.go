package httporigin

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
// every read carries as If-Match. The origin keeps the target by path as
// well, for the next open of the file and its checksum. The redirector is asked again only when
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
	// used is set once a request went there: a first reuse that fails
	// says the origin's targets are single-use.
	used atomic.Bool
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

// get sends a GET (the read's hdr) for the file's bytes (pathRequest,
// the open's target first).
func (f *file) get(ctx context.Context, hdr http.Header) (*http.Response, error) {
	return f.o.pathRequest(ctx, http.MethodGet, f.path, hdr, &f.target)
}

// pathRequest sends a request for origin path p: to the target its
// redirects led to while that is kept (pin's, an open file's, first;
// else the origin's for p), else to the origin URL, whose redirect is
// then kept for p (and in pin). A kept target that fails is dropped and
// the origin URL asked instead.
func (o *Origin) pathRequest(ctx context.Context, method, p string, hdr http.Header, pin *atomic.Pointer[target]) (*http.Response, error) {
	now := o.cfg.now()
	t := (*target)(nil)
	if pin != nil {
		t = pin.Load()
	}
	if t == nil || !now.Before(t.until) {
		t = o.targets.get(p, now)
	}
	if t != nil {
		resp, err := o.send(ctx, method, t.u, t.cred, hdr, nil)
		if ctx.Err() != nil || !targetFailed(resp, err) {
			t.used.Store(true)
			if pin != nil && err == nil {
				pin.Store(t)
			}
			return resp, err
		}
		status := "no answer"
		if resp != nil {
			status = resp.Status
			io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if !t.used.Load() && resp.StatusCode >= 400 && resp.StatusCode < 500 && !o.noReuse.Swap(true) {
				o.cfg.Logger.Info("redirect targets are not kept for this origin: the first reuse of one failed (its redirects are good for one request)",
					"origin", o.name, "target", stripQuery(t.u.String()), "status", status)
			}
		}
		o.cfg.Logger.Debug("redirect target failed; asking the origin URL again", "origin", o.name, "path", p,
			"target", stripQuery(t.u.String()), "status", status, "err", err)
		o.targets.drop(p, t)
		if pin != nil {
			pin.CompareAndSwap(t, nil)
		}
	}
	resp, err := o.do(ctx, method, p, hdr, nil)
	if err == nil && resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if t := o.targetOf(resp); t != nil {
			o.targets.put(p, t, now)
			if pin != nil {
				pin.Store(t)
			}
		}
	}
	return resp, err
}

// maxTargets bounds the targets an origin keeps by path.
const maxTargets = 4096

// targets are the redirect targets an origin keeps by path, so that a
// file opened again (a client's probe, then its read) or checksummed
// after its download is not sent through the redirector again.
type targets struct {
	// mu protects m.
	mu sync.Mutex
	m  map[string]*target
}

func (ts *targets) get(p string, now time.Time) *target {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := ts.m[p]
	if t != nil && !now.Before(t.until) {
		delete(ts.m, p)
		return nil
	}
	return t
}

func (ts *targets) put(p string, t *target, now time.Time) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.m == nil {
		ts.m = map[string]*target{}
	}
	if len(ts.m) >= maxTargets {
		for k, o := range ts.m {
			if !now.Before(o.until) || len(ts.m) >= maxTargets {
				delete(ts.m, k)
			}
		}
	}
	ts.m[p] = t
}

// drop forgets t for p (not a newer target).
func (ts *targets) drop(p string, t *target) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.m[p] == t {
		delete(ts.m, p)
	}
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
