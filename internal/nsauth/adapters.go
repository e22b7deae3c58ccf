package nsauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/hepcache/hepcache/internal/auth/token"
	"github.com/hepcache/hepcache/internal/backend"
	httpfront "github.com/hepcache/hepcache/internal/frontend/http"
	xrdfront "github.com/hepcache/hepcache/internal/frontend/xrootd"
)

// HTTP returns the HTTP front end's authorizer: requests under a namespace
// are decided by Decide (token from the Authorization header or the authz
// query parameter) and then by next as well (siteAllows), the others by
// next alone (nil: allowed). A client's token never reaches an origin:
// authz is removed from the request's opaque data.
func (a *Authorizer) HTTP(next httpfront.Authorizer) httpfront.Authorizer {
	return httpAuth{a: a, next: next}
}

type httpAuth struct {
	a    *Authorizer
	next httpfront.Authorizer
}

var _ httpfront.Identifier = httpAuth{}

// Authorize implements httpfront.Authorizer.
func (h httpAuth) Authorize(r *http.Request, req *backend.Request, op string) error {
	if req.Origin != "" {
		// Forwarding mode names another origin: not the federation's.
		return h.nextAuthorize(r, req, op)
	}
	qtok := token.TakeAuthz(&req.Opaque)
	tok := qtok
	if v := r.Header.Get("Authorization"); v != "" {
		tok = token.Bearer(v)
	}
	d, err := h.a.decideAs(r.Context(), req.Path, tok, r.TLS == nil, "http://", "https://")
	if errors.Is(err, ErrNoNamespace) {
		if qtok != "" {
			// The site's rules read the token where the client put it.
			req.Opaque = addAuthz(req.Opaque, qtok)
		}
		return h.nextAuthorize(r, req, op)
	}
	if err != nil {
		h.a.cfg.Logger.Debug("nsauth: denied", "client", req.Client, "path", req.Path, "op", op, "reason", err)
		return err
	}
	return siteAllows(req, d, tok, func(site *backend.Request, withTok bool) error {
		if h.next == nil {
			return nil
		}
		sr := r
		if withTok {
			if qtok != "" && r.Header.Get("Authorization") == "" {
				site.Opaque = addAuthz(site.Opaque, qtok)
			}
		} else if r.Header.Get("Authorization") != "" {
			sr = r.Clone(r.Context())
			sr.Header.Del("Authorization")
		}
		return h.next.Authorize(sr, site, op)
	})
}

// siteAllows asks the site's own rules (ask) about a request the
// federation allowed (d, with the client's token tok): the stricter wins,
// so a director's list can never open what the site's [security] rules
// close. The site judges the client first as it is without the
// federation's token (its address, certificate, its own login), and, if
// that is refused and there is a token, with it (a site that trusts the
// same issuer may grant by its identity): a token the site does not know
// is not a credential of the site's, and the client could always come
// without it. On success req gets the site's view (NoFetch, its user),
// then the federation's (user, origin token), and the earlier end of the
// two grants.
func siteAllows(req *backend.Request, d Decision, tok string, ask func(site *backend.Request, withTok bool) error) error {
	site := *req
	err := ask(&site, false)
	if err != nil && tok != "" {
		site = *req
		err = ask(&site, true)
	}
	if err != nil {
		return err
	}
	siteUntil := site.AuthUntil
	site.Opaque = req.Opaque // the federation's token stays out of it
	*req = site
	d.Apply(req, tok)
	if !siteUntil.IsZero() && (req.AuthUntil.IsZero() || siteUntil.Before(req.AuthUntil)) {
		req.AuthUntil = siteUntil
	}
	return nil
}

func (h httpAuth) nextAuthorize(r *http.Request, req *backend.Request, op string) error {
	if h.next == nil {
		return nil
	}
	return h.next.Authorize(r, req, op)
}

// Identify implements httpfront.Identifier: the next authorizer's view,
// which names the owners of prestage jobs.
func (h httpAuth) Identify(r *http.Request) (string, error) {
	if id, ok := h.next.(httpfront.Identifier); ok {
		return id.Identify(r)
	}
	return "", nil
}

// XRootD returns the root:// front end's authorizer: requests under a
// namespace are decided by Decide with the token of the authz opaque
// parameter (root:// clients of a federation send it there; a ztn login
// is the site's business, verified by next against the site's issuers)
// and then by next as well (siteAllows), the others by next alone (nil:
// allowed).
func (a *Authorizer) XRootD(next xrdfront.Authorizer) xrdfront.Authorizer {
	return xrdAuth{a: a, next: next}
}

type xrdAuth struct {
	a    *Authorizer
	next xrdfront.Authorizer
}

var _ xrdfront.RequestAuthorizer = xrdAuth{}

// Authorize implements xrootd.Authorizer.
func (x xrdAuth) Authorize(ctx context.Context, op xrdfront.Op, req backend.Request) error {
	return x.AuthorizeRequest(ctx, op, &req)
}

// AuthorizeRequest implements xrootd.RequestAuthorizer.
func (x xrdAuth) AuthorizeRequest(ctx context.Context, op xrdfront.Op, req *backend.Request) error {
	if req.Origin != "" {
		return x.nextAuthorize(ctx, op, req)
	}
	tok := token.TakeAuthz(&req.Opaque)
	d, err := x.a.decideAs(ctx, req.Path, tok, req.Protocol == "root", "root://", "roots://")
	if errors.Is(err, ErrNoNamespace) {
		if tok != "" {
			req.Opaque = addAuthz(req.Opaque, tok)
		}
		return x.nextAuthorize(ctx, op, req)
	}
	if err != nil {
		x.a.cfg.Logger.Debug("nsauth: denied", "client", req.Client, "path", req.Path, "op", string(op), "reason", err)
		return err
	}
	return siteAllows(req, d, tok, func(site *backend.Request, withTok bool) error {
		if withTok {
			site.Opaque = addAuthz(site.Opaque, tok)
		}
		return x.nextAuthorize(ctx, op, site)
	})
}

// decideAs is Decide for a read by a client whose token came over a
// connection that is unencrypted when clear (plain, the scheme it came
// by; secure, the one to use): there, unless the site allows it, the
// token is ignored and a refusal says why.
func (a *Authorizer) decideAs(ctx context.Context, p, tok string, clear bool, plain, secure string) (Decision, error) {
	if tok == "" || !clear || a.cfg.AllowTokensWithoutTLS {
		return a.Decide(ctx, p, OpRead, tok)
	}
	d, err := a.Decide(ctx, p, OpRead, "")
	if err != nil && !errors.Is(err, ErrNoNamespace) {
		err = fmt.Errorf("%s: %w", token.InTheClear(plain, secure), err)
	}
	return d, err
}

// Apply marks a request Decide allowed: its user, until when (the front end
// asks again before a read of a file opened longer), and, for a private
// namespace, the token that granted it as the one the origin is given
// (the federation's origins authorize each reader themselves).
func (d Decision) Apply(req *backend.Request, tok string) {
	if d.User != "" {
		req.User = d.User
		req.OriginToken = tok
		req.AuthUntil = d.Until
	}
}

func (x xrdAuth) nextAuthorize(ctx context.Context, op xrdfront.Op, req *backend.Request) error {
	switch n := x.next.(type) {
	case nil:
		return nil
	case xrdfront.RequestAuthorizer:
		return n.AuthorizeRequest(ctx, op, req)
	default:
		return n.Authorize(ctx, op, *req)
	}
}

// addAuthz puts a token back as authz for the next authorizer.
func addAuthz(opaque, tok string) string {
	q, _ := url.ParseQuery(opaque)
	if q == nil {
		q = url.Values{}
	}
	q.Set("authz", tok)
	return q.Encode()
}
