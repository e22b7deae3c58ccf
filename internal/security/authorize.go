package security

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hepcache/hepcache/internal/auth/gsi"
	"github.com/hepcache/hepcache/internal/auth/token"
	"github.com/hepcache/hepcache/internal/auth/voms"
	"github.com/hepcache/hepcache/internal/auth/ztn"
	"github.com/hepcache/hepcache/internal/authz"
	"github.com/hepcache/hepcache/internal/backend"
	httpfront "github.com/hepcache/hepcache/internal/frontend/http"
	xrdfront "github.com/hepcache/hepcache/internal/frontend/xrootd"
)

// defaultClockSkew: Config.ClockSkew's default, as tokens'.
const defaultClockSkew = 60 * time.Second

// ErrUnauthenticated marks a credential that was presented but does not
// verify (an invalid token or certificate). It is wrapped together with
// backend.ErrForbidden.
var ErrUnauthenticated = errors.New("security: credential refused")

// refusedError is a credential that does not verify: its text is the
// reason alone, as the client reads it (the class names of the sentinels
// it wraps add nothing there); it never holds the credential itself.
type refusedError struct {
	msg string
	err error
}

func (e *refusedError) Error() string   { return e.msg }
func (e *refusedError) Unwrap() []error { return []error{ErrUnauthenticated, e.err} }

// decide applies the rules to sub for req and sets req.User and
// req.NoFetch. It logs denials; note, when not empty, is added to the
// reason of a denial (why a credential the client meant to use did not
// count).
func (s *Security) decide(sub *authz.Subject, req *backend.Request, op, note string) error {
	if sub.Name != "" {
		req.User = sub.Name
	}
	req.VO, req.Role, req.Group = voRole(sub)
	// A session keeps the credential it authenticated with: each request
	// checks that it has not expired since (a client may keep a connection
	// for days with kXR_ping).
	now := time.Now()
	skew := s.cfg.ClockSkew
	if skew <= 0 {
		skew = defaultClockSkew
	}
	if sub.Token != nil && now.After(sub.Token.Expiry.Add(skew)) {
		return s.deny(req, op, sub, fmt.Sprintf("the token of %s expired at %s during the session; reconnect with a fresh token", sub.Token.Name(), sub.Token.Expiry.UTC().Format(time.RFC3339)))
	}
	if sub.X509 != nil && now.After(sub.X509.NotAfter.Add(skew)) {
		return s.deny(req, op, sub, fmt.Sprintf("the certificate chain of %s expired at %s during the session; re-authenticate with a fresh proxy", sub.X509.Subject, sub.X509.NotAfter.UTC().Format(time.RFC3339)))
	}
	var expired []string
	if len(sub.VOMS) > 0 {
		valid := make([]voms.Attributes, 0, len(sub.VOMS))
		for _, a := range sub.VOMS {
			if now.After(a.NotAfter.Add(skew)) {
				expired = append(expired, fmt.Sprintf("the VOMS attributes of VO %s expired at %s during the session", a.VO, a.NotAfter.UTC().Format(time.RFC3339)))
				continue
			}
			valid = append(valid, a)
		}
		if len(expired) > 0 {
			cp := *sub // sub may be the session's: decide on a copy
			cp.VOMS = valid
			sub = &cp
		}
	}
	d := s.pol.Load().authz.Decide(sub, req.Path)
	req.AuthUntil = authUntil(sub, skew)
	if !d.Read {
		if len(expired) > 0 {
			d.Reason += " (" + strings.Join(expired, "; ") + "; re-authenticate with a fresh proxy)"
		}
		if note != "" {
			d.Reason += "; " + note
		}
		return s.deny(req, op, sub, d.Reason)
	}
	if !d.Fetch {
		req.NoFetch = true
		s.log.Debug("authz: cached data only", "client", req.Client, "user", sub.String(), "path", req.Path, "op", op, "protocol", req.Protocol, "reason", d.Reason)
	}
	return nil
}

// authUntil is when the credentials of sub stop counting: the earliest
// expiry of its token, proxy chain and (unexpired) VOMS attributes, plus
// skew; zero without any.
func authUntil(sub *authz.Subject, skew time.Duration) time.Time {
	var until time.Time
	earlier := func(t time.Time) {
		if until.IsZero() || t.Before(until) {
			until = t
		}
	}
	if sub.Token != nil {
		earlier(sub.Token.Expiry)
	}
	if sub.X509 != nil {
		earlier(sub.X509.NotAfter)
	}
	for _, a := range sub.VOMS {
		earlier(a.NotAfter)
	}
	if until.IsZero() {
		return until
	}
	return until.Add(skew)
}

func (s *Security) deny(req *backend.Request, op string, sub *authz.Subject, reason string) error {
	s.log.Info("authz: denied", "client", req.Client, "user", sub.String(), "path", req.Path, "origin", req.Origin, "op", op, "protocol", req.Protocol, "reason", reason)
	return fmt.Errorf("%s: %w", reason, backend.ErrForbidden)
}

// voRole is what sub's credential says of its VO, role and group: the
// first VOMS attribute's VO and its first FQAN, else a token's first
// wlcg.groups group ("/cms/uscms": VO cms).
func voRole(sub *authz.Subject) (vo, role, group string) {
	for _, a := range sub.VOMS {
		vo = a.VO
		for _, f := range a.FQANs {
			if q, err := voms.ParseFQAN(f); err == nil {
				return vo, q.Role, q.Group
			}
		}
		return vo, "", ""
	}
	if sub.Token != nil && len(sub.Token.Groups) > 0 {
		g := sub.Token.Groups[0]
		vo, _, _ = strings.Cut(strings.TrimPrefix(g, "/"), "/")
		return vo, "", g
	}
	return "", "", ""
}

// verifyToken verifies a presented token.
func (s *Security) verifyToken(ctx context.Context, tok string) (*token.Claims, error) {
	p := s.pol.Load()
	if p.tokens == nil {
		return nil, fmt.Errorf("bearer tokens are not accepted here (no token issuer configured): %w", ErrUnauthenticated)
	}
	c, err := p.tokc.get(tok, func() (*token.Claims, error) { return p.tokens.Verify(ctx, tok) })
	if err != nil {
		return nil, &refusedError{"bearer token refused: " + strings.TrimSuffix(err.Error(), ": "+token.ErrInvalid.Error()), err}
	}
	return c, nil
}

// HTTPAuthorizer returns the HTTP front end's authorizer: it reads a
// bearer token (Authorization header, or the authz query parameter) and a
// client certificate chain, and applies the rules. It also implements
// httpfront.Identifier (who owns a prestage job).
func (s *Security) HTTPAuthorizer() httpfront.Authorizer { return httpAuthorizer{s} }

type httpAuthorizer struct{ s *Security }

var _ httpfront.Identifier = httpAuthorizer{}

// Authorize implements httpfront.Authorizer.
func (a httpAuthorizer) Authorize(r *http.Request, req *backend.Request, op string) error {
	s := a.s
	sub, why, note := s.httpSubject(r, token.TakeAuthz(&req.Opaque))
	if why != "" {
		return s.deny(req, op, sub, why)
	}
	return s.decide(sub, req, op, note)
}

// Identify implements httpfront.Identifier: the verified credential's
// name, "" without one.
func (a httpAuthorizer) Identify(r *http.Request) (string, error) {
	sub, why, _ := a.s.httpSubject(r, token.Bearer(r.URL.Query().Get("authz")))
	if why != "" {
		return "", fmt.Errorf("%s: %w", why, backend.ErrForbidden)
	}
	return sub.Name, nil
}

// httpSubject verifies the credentials of r (tok: a token from the query);
// a credential that does not verify gives the reason as why. A token sent
// over plain http:// is not used (note says so) unless the site allows it.
func (s *Security) httpSubject(r *http.Request, tok string) (sub *authz.Subject, why, note string) {
	sub = &authz.Subject{}
	if h := r.Header.Get("Authorization"); h != "" {
		if !strings.HasPrefix(strings.ToLower(h), "bearer ") {
			return sub, "only Bearer authorization is accepted", ""
		}
		tok = token.Bearer(h)
	}
	if tok != "" && r.TLS == nil && !s.cfg.AllowTokensWithoutTLS {
		note, tok = token.InTheClear("http://", "https://"), ""
	}
	if tok != "" {
		c, err := s.verifyToken(r.Context(), tok)
		if err != nil {
			return sub, err.Error(), ""
		}
		sub.Token, sub.Name = c, c.Name()
	}
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		xs, err := s.verifyChain(r.TLS.PeerCertificates)
		if err != nil {
			return sub, fmt.Sprintf("client certificate refused: %v", err), ""
		}
		sub.X509, sub.VOMS, sub.User = xs.X509, xs.VOMS, xs.User
		if sub.Name == "" {
			sub.Name = xs.Name
		}
	}
	return sub, "", note
}

// XRootDAuthorizer returns the root:// front end's authorizer. It
// implements xrootd.RequestAuthorizer, so it can mark requests NoFetch.
func (s *Security) XRootDAuthorizer() xrdfront.Authorizer { return xrdAuthorizer{s} }

type xrdAuthorizer struct{ s *Security }

// Authorize implements xrootd.Authorizer for callers that cannot take
// request changes; NoFetch decisions are then denials.
func (a xrdAuthorizer) Authorize(ctx context.Context, op xrdfront.Op, req backend.Request) error {
	r := req
	if err := a.AuthorizeRequest(ctx, op, &r); err != nil {
		return err
	}
	if r.NoFetch && !req.NoFetch {
		return fmt.Errorf("%s may read only cached data: %w", req.Path, backend.ErrForbidden)
	}
	return nil
}

// AuthorizeRequest implements xrootd.RequestAuthorizer.
func (a xrdAuthorizer) AuthorizeRequest(ctx context.Context, op xrdfront.Op, req *backend.Request) error {
	s := a.s
	sub := &authz.Subject{}
	id := xrdfront.IdentityFrom(ctx)
	if id != nil {
		if as, ok := id.Attrs.(*authz.Subject); ok {
			cp := *as
			sub = &cp
		}
		if sub.Name == "" {
			sub.Name = id.Name
		}
	}
	note := ""
	if tok := token.TakeAuthz(&req.Opaque); tok != "" && sub.Token == nil {
		if req.Protocol == "root" && !s.cfg.AllowTokensWithoutTLS {
			// The docs promise that plain root:// clients are anonymous:
			// a token in the opaque data crossed the network in the
			// clear and does not count.
			note = token.InTheClear("root://", "roots://")
		} else {
			c, err := s.verifyToken(ctx, tok)
			if err != nil {
				return s.deny(req, string(op), sub, err.Error())
			}
			sub.Token, sub.Name = c, c.Name()
		}
	}
	switch {
	case note != "":
	case sub.Authenticated():
	case id != nil && len(id.Refused) > 0:
		// XrdCl fell back to unix after its token or proxy was refused.
		note = "the credential presented was refused (" + strings.Join(id.Refused, "; ") + ")"
	case s.pol.Load().tokens != nil && req.Protocol == "root":
		// XrdCl sends a token (ztn) only over TLS: on root:// it
		// connects anonymously whatever BEARER_TOKEN holds.
		note = "bearer tokens are accepted over roots:// only (XrdCl sends none over root://)"
	}
	return s.decide(sub, req, string(op), note)
}

// XRootDAuthenticator returns the root:// security layer: ztn tokens (on
// TLS connections) and gsi proxies, with a unix fallback for clients
// without either unless RequireAuth; nil when neither is configured.
func (s *Security) XRootDAuthenticator() xrdfront.Authenticator {
	if s.pol.Load().tokens == nil && s.gsi == nil {
		return nil
	}
	return xrdAuthenticator{s}
}

type xrdAuthenticator struct{ s *Security }

// Params implements xrootd.Authenticator. ztn is offered on TLS
// connections (XrdCl uses it only there), and on plain ones when it is
// the only way in, so that the client fails with a clear error; gsi on
// any connection. Clients try them in this order.
func (a xrdAuthenticator) Params(c xrdfront.ConnInfo) string {
	s := a.s
	p := ""
	if tokens := s.pol.Load().tokens; tokens != nil && (c.TLS != nil || s.cfg.RequireAuth && s.gsi == nil) {
		p += ztn.Params(tokens.MaxTokenSize(), false)
	}
	if s.gsi != nil {
		gp, err := s.gsi.Params()
		if err != nil {
			s.log.Error("security: gsi not offered", "err", err)
		}
		p += gp
	}
	switch {
	case !s.cfg.RequireAuth && p == "":
		return ""
	case !s.cfg.RequireAuth, p == "":
		// unix is accepted as anonymous, or, when authentication is
		// required but nothing could be offered (a broken gsi host
		// certificate), refused with the reason: never no security.
		p += "&P=unix"
	}
	return p
}

// Authenticate implements xrootd.Authenticator.
func (a xrdAuthenticator) Authenticate(ctx context.Context, c xrdfront.ConnInfo, credType string, cred []byte) (*xrdfront.Identity, []byte, error) {
	s := a.s
	switch credType {
	case "ztn":
		if s.pol.Load().tokens == nil {
			break
		}
		if c.TLS == nil {
			return nil, nil, errors.New("ztn needs a TLS connection: use roots://")
		}
		tok, err := ztn.ParseCredentials(cred)
		if err != nil {
			return nil, nil, err
		}
		claims, err := s.verifyToken(ctx, tok)
		if err != nil {
			s.log.Info("security: ztn token refused", "client", c.Remote.String(), "login", c.LoginName, "err", err)
			return nil, nil, err
		}
		s.log.Debug("security: ztn authenticated", "client", c.Remote.String(), "user", claims.Name())
		return &xrdfront.Identity{Name: claims.Name(), Protocol: "ztn", Attrs: &authz.Subject{Name: claims.Name(), Token: claims}}, nil, nil
	case "gsi":
		if s.gsi == nil || c.AuthState == nil {
			break
		}
		return a.gsiStep(c, cred)
	case "unix":
		if s.cfg.RequireAuth {
			return nil, nil, errors.New("this server requires authentication: " + a.accepted())
		}
		if _, _, err := ztn.ParseUnix(cred); err != nil {
			return nil, nil, err
		}
		// The unix protocol proves nothing: the client stays anonymous.
		return &xrdfront.Identity{Name: c.LoginName, Protocol: "unix", Attrs: &authz.Subject{Name: c.LoginName}}, nil, nil
	}
	return nil, nil, fmt.Errorf("security protocol %q is not supported here (%s)", credType, a.accepted())
}

// accepted says what a client may authenticate with.
func (a xrdAuthenticator) accepted() string {
	var ways []string
	if a.s.pol.Load().tokens != nil {
		ways = append(ways, "a bearer token (ztn over roots://: set BEARER_TOKEN or BEARER_TOKEN_FILE)")
	}
	if a.s.gsi != nil {
		ways = append(ways, "an X.509 proxy (gsi: set X509_USER_PROXY)")
	}
	return strings.Join(ways, " or ")
}

// gsiStep runs one step of a gsi handshake, whose state lives in the
// connection's AuthState, and verifies the proxy chain at the end as a
// TLS client certificate is verified.
func (a xrdAuthenticator) gsiStep(c xrdfront.ConnInfo, cred []byte) (*xrdfront.Identity, []byte, error) {
	s := a.s
	// The handshake lives as long as the connection, failures included:
	// it counts the certificate requests (each costs a signature), which
	// a fresh state at every failure would let a client multiply.
	hs, ok := (*c.AuthState).(*gsi.Handshake)
	if !ok {
		hs = &gsi.Handshake{}
		*c.AuthState = hs
	}
	chain, more, err := s.gsi.Step(hs, cred)
	if err != nil {
		s.log.Info("security: gsi refused", "client", c.Remote.String(), "login", c.LoginName, "err", err)
		return nil, nil, err
	}
	if more != nil {
		return nil, more, nil
	}
	sub, err := s.verifyChain(chain)
	if err != nil {
		s.log.Info("security: gsi proxy refused", "client", c.Remote.String(), "login", c.LoginName, "err", err)
		return nil, nil, fmt.Errorf("gsi: proxy refused: %w", err)
	}
	s.log.Debug("security: gsi authenticated", "client", c.Remote.String(), "user", sub.Name)
	return &xrdfront.Identity{Name: sub.Name, Protocol: "gsi", Attrs: sub}, nil, nil
}
