package nsauth

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/auth/authtest"
	"github.com/hepcache/hepcache/internal/auth/token"
	"github.com/hepcache/hepcache/internal/authz"
	"github.com/hepcache/hepcache/internal/backend"
	httpfront "github.com/hepcache/hepcache/internal/frontend/http"
	xrdfront "github.com/hepcache/hepcache/internal/frontend/xrootd"
	"github.com/hepcache/hepcache/internal/security"
)

const aud = "https://cache.example:8443"

// newTestAuthorizer is an Authorizer trusting two issuers served over
// https: one for /private (base path /private), one for /other.
func newTestAuthorizer(t *testing.T, mut func(*Config)) (*Authorizer, *authtest.Issuer, *authtest.Issuer) {
	t.Helper()
	ca := authtest.NewCA(t, "nsauth test CA")
	priv := authtest.NewIssuer(t, "", 0)
	priv.Serve(t, ca)
	other := authtest.NewIssuer(t, "", 1)
	other.Serve(t, ca)
	cfg := &Config{Audiences: []string{aud, "https://wlcg.cern.ch/jwt/v1/any"}, RootCAs: authtest.Pool(ca), Logger: slog.New(slog.DiscardHandler)}
	if mut != nil {
		mut(cfg)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	err = a.Set([]Namespace{
		{Path: "/public", PublicRead: true},
		{Path: "/private/", Issuers: []Issuer{{URL: priv.URL, BasePaths: []string{"/private"}}}},
		{Path: "/public/secret", Issuers: []Issuer{{URL: priv.URL, BasePaths: []string{"/public/secret"}}}},
		{Path: "/other", Issuers: []Issuer{{URL: other.URL, BasePaths: []string{"/other"}, RestrictedPaths: []string{"/other/ok"}}}},
		{Path: "/pelican/monitoring", PublicRead: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	return a, priv, other
}

func TestDecide(t *testing.T) {
	a, priv, other := newTestAuthorizer(t, nil)
	good := priv.Token(t, "alice", "storage.read:/", aud)
	cases := []struct {
		name, path, op, tok string
		want                string // "" allowed; else a word of the reason
	}{
		{"public without token", "/public/f", OpRead, "", ""},
		{"public with a token of no issuer of it", "/public/f", OpRead, other.Token(t, "x", "storage.read:/", aud), ""},
		{"monitoring", "/pelican/monitoring/directorTest/h/2026-01-01/t.txt", OpRead, "", ""},
		{"longest namespace wins", "/public/secret/f", OpRead, "", "needs a bearer token"},
		{"private without token", "/private/f", OpRead, "", "needs a bearer token from an issuer of namespace /private (" + priv.URL + ")"},
		{"private with token", "/private/sub/f", OpRead, good, ""},
		{"private with the WLCG any audience", "/private/sub/f", OpRead, priv.Token(t, "alice", "storage.read:/sub", "https://wlcg.cern.ch/jwt/v1/any"), ""},
		{"scope elsewhere", "/private/f", OpRead, priv.Token(t, "alice", "storage.read:/sub", aud), "grants no storage.read scope"},
		{"scope for another op", "/private/f", OpRead, priv.Token(t, "alice", "storage.modify:/", aud), "grants no storage.read scope"},
		{"wrong audience", "/private/f", OpRead, priv.Token(t, "alice", "storage.read:/", "https://elsewhere"), "audience"},
		{"foreign issuer", "/private/f", OpRead, other.Token(t, "bob", "storage.read:/", aud), "not from an issuer of namespace /private"},
		{"garbage token", "/private/f", OpRead, "not.a.token", "bearer token refused"},
		{"restricted path inside", "/other/ok/f", OpRead, other.Token(t, "bob", "storage.read:/", aud), ""},
		{"restricted path outside", "/other/no/f", OpRead, other.Token(t, "bob", "storage.read:/", aud), "grants no"},
		{"evict a public path needs a token", "/public/f", OpModify, "", "names no issuer"},
		{"evict with modify", "/private/f", OpModify, priv.Token(t, "alice", "storage.modify:/", aud), ""},
		{"evict with read only", "/private/f", OpModify, good, "grants no storage.modify"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := a.Decide(context.Background(), c.path, c.op, c.tok)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && err == nil:
				t.Fatalf("allowed (%+v); want refused for %q", d, c.want)
			case c.want != "" && (!errors.Is(err, backend.ErrForbidden) || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v; want ErrForbidden saying %q", err, c.want)
			}
			if c.tok != "" && err != nil && strings.Contains(err.Error(), c.tok) {
				t.Fatalf("the reason shows the token: %v", err)
			}
		})
	}
	if _, err := a.Decide(context.Background(), "/elsewhere/f", OpRead, good); !errors.Is(err, ErrNoNamespace) {
		t.Fatalf("a path under no namespace: %v; want ErrNoNamespace", err)
	}
	if _, err := a.Decide(context.Background(), "/publicity/f", OpRead, ""); !errors.Is(err, ErrNoNamespace) {
		t.Fatalf("/publicity is not under /public: %v", err)
	}
}

// TestSetRebuildsVerifierOnIssuerChange: the verifier is rebuilt (and the
// old one closed) only when the set of issuers changes; bad entries are
// reported and left out, the rest is in force.
func TestSetRebuildsVerifierOnIssuerChange(t *testing.T) {
	a, err := New(&Config{Audiences: []string{aud}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var built, closed int
	a.newVerifier = func(tc *token.Config) (verifier, error) {
		built++
		return &fakeVerifier{closed: &closed}, nil
	}
	one := []Namespace{{Path: "/a", Issuers: []Issuer{{URL: "https://i1"}}}, {Path: "/p", PublicRead: true}}
	if err := a.Set(one); err != nil || built != 1 {
		t.Fatalf("first Set: %v, %d verifiers built", err, built)
	}
	if err := a.Set(append(one, Namespace{Path: "/b", Issuers: []Issuer{{URL: "https://i1"}}})); err != nil || built != 1 || closed != 0 {
		t.Fatalf("same issuers: %v, built %d closed %d; want no rebuild", err, built, closed)
	}
	err = a.Set([]Namespace{{Path: "/a", Issuers: []Issuer{{URL: "https://i2"}}}, {Path: "rel"}, {Path: "/c", Issuers: []Issuer{{URL: "http://plain"}}}})
	if err == nil || !strings.Contains(err.Error(), `namespace "rel"`) || !strings.Contains(err.Error(), "not an https:// URL") {
		t.Fatalf("bad entries: %v", err)
	}
	if built != 2 || closed != 1 || len(a.Namespaces()) != 1 {
		t.Fatalf("built %d closed %d namespaces %v; want a new verifier, the old closed, one namespace", built, closed, a.Namespaces())
	}
	if _, ok := a.Lookup("/p/x"); ok {
		t.Fatal("a namespace of the old list is still in force")
	}
}

type fakeVerifier struct{ closed *int }

func (f *fakeVerifier) Verify(context.Context, string) (*token.Claims, error) {
	return nil, errors.New("fake")
}
func (f *fakeVerifier) Close() error { *f.closed++; return nil }

// TestHTTPAdapter: under a namespace the federation decides and the
// site's authorizer is asked as well, without the federation's token;
// elsewhere the site's decides alone, with the token where the client put
// it; a client's token is never left in the opaque data that goes to
// origins.
func TestHTTPAdapter(t *testing.T) {
	a, priv, _ := newTestAuthorizer(t, nil)
	tok := priv.Token(t, "alice", "storage.read:/", aud)
	var nextCalls int
	var nextOpaque, nextAuth string
	h := a.HTTP(httpfront.AuthorizerFunc(func(r *http.Request, req *backend.Request, op string) error {
		nextCalls++
		nextOpaque, nextAuth = req.Opaque, r.Header.Get("Authorization")
		return nil
	}))
	do := func(target, authz string) (*backend.Request, error) {
		r := httptest.NewRequest("GET", target, nil)
		r.TLS = &tls.ConnectionState{} // https://
		if authz != "" {
			r.Header.Set("Authorization", authz)
		}
		req := &backend.Request{Path: r.URL.Path, Opaque: r.URL.RawQuery, Client: r.RemoteAddr}
		return req, h.Authorize(r, req, "read")
	}
	if req, err := do("/private/f?authz=Bearer%20"+tok+"&x=1", ""); err != nil || req.Opaque != "x=1" || req.User != "alice@"+priv.URL || req.OriginToken != tok {
		t.Fatalf("token in authz: %v, opaque %q, user %q, origin token %t", err, req.Opaque, req.User, req.OriginToken == tok)
	}
	// A public read passes no token on to the origin.
	if req, err := do("/public/f", "Bearer "+tok); err != nil || req.OriginToken != "" || req.User != "" {
		t.Fatalf("a public read: %v, origin token %t", err, req.OriginToken != "")
	}
	if _, err := do("/private/f", "Bearer "+tok); err != nil {
		t.Fatalf("token in the header: %v", err)
	}
	if _, err := do("/private/f", ""); err == nil {
		t.Fatal("no token: allowed")
	}
	if nextCalls != 3 || strings.Contains(nextOpaque, "authz") || nextAuth != "" {
		t.Fatalf("the site's authorizer was asked %d times about the 3 federation paths allowed, last with opaque %q, Authorization %q; want each once, without the federation's token",
			nextCalls, nextOpaque, nextAuth)
	}
	if _, err := do("/site/f?authz="+tok, ""); err != nil || nextCalls != 4 || !strings.Contains(nextOpaque, "authz=") {
		t.Fatalf("a site path: %v, %d calls, opaque %q; want the site's authorizer with the token", err, nextCalls, nextOpaque)
	}
}

func TestXRootDAdapter(t *testing.T) {
	a, priv, _ := newTestAuthorizer(t, nil)
	tok := priv.Token(t, "alice", "storage.read:/", aud)
	x := a.XRootD(nil).(xrdfront.RequestAuthorizer)
	req := &backend.Request{Path: "/private/f", Opaque: "authz=" + tok, Protocol: "roots"}
	if err := x.AuthorizeRequest(context.Background(), xrdfront.OpOpen, req); err != nil || req.Opaque != "" {
		t.Fatalf("%v, opaque %q", err, req.Opaque)
	}
	if err := x.Authorize(context.Background(), xrdfront.OpStat, backend.Request{Path: "/private/f"}); err == nil {
		t.Fatal("no token: allowed")
	}
	if err := x.Authorize(context.Background(), xrdfront.OpStat, backend.Request{Path: "/site/f"}); err != nil {
		t.Fatalf("a site path with no site authorizer: %v", err)
	}
}

// TestTokensOverPlainConnections: a federation token that crossed the
// network in the clear (?authz= on plain root://, plain http://) does not
// count, and the refusal says why, unless the site allows it, as the
// site's own rules do (security.allow_tokens_without_tls).
func TestTokensOverPlainConnections(t *testing.T) {
	for _, allow := range []bool{false, true} {
		a, priv, _ := newTestAuthorizer(t, func(c *Config) { c.AllowTokensWithoutTLS = allow })
		tok := priv.Token(t, "alice", "storage.read:/", aud)
		x := a.XRootD(nil).(xrdfront.RequestAuthorizer)
		rootErr := x.AuthorizeRequest(context.Background(), xrdfront.OpOpen,
			&backend.Request{Path: "/private/f", Opaque: "authz=" + tok, Protocol: "root"})
		r := httptest.NewRequest("GET", "/private/f", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		httpErr := a.HTTP(nil).Authorize(r, &backend.Request{Path: "/private/f"}, "read")
		for name, err := range map[string]error{"root://": rootErr, "http://": httpErr} {
			switch {
			case allow && err != nil:
				t.Errorf("%s with allow_tokens_without_tls: %v", name, err)
			case !allow && (!errors.Is(err, backend.ErrForbidden) || !strings.Contains(err.Error(), "unencrypted "+name)):
				t.Errorf("%s: %v; want refused, saying the token came unencrypted", name, err)
			case err != nil && strings.Contains(err.Error(), tok):
				t.Errorf("%s: the reason shows the token", name)
			}
		}
		// A public read needs no token: a token in the clear changes nothing.
		if err := x.AuthorizeRequest(context.Background(), xrdfront.OpOpen,
			&backend.Request{Path: "/public/f", Opaque: "authz=" + tok, Protocol: "root"}); err != nil {
			t.Errorf("a public read with a token in the clear: %v", err)
		}
	}
}

// TestGrantEndsWithToken: a read allowed by a token carries the token's
// expiry (plus the skew tolerated) as the end of its authorization, which
// the root:// front end checks before every read of the open file; asked
// again with the open's request (the token is no longer in it), a
// private path is refused. A public read has no end.
func TestGrantEndsWithToken(t *testing.T) {
	a, priv, _ := newTestAuthorizer(t, func(c *Config) { c.ClockSkew = 5 * time.Second })
	exp := time.Now().Add(90 * time.Second).Truncate(time.Second)
	tok := priv.Sign(t, "RS256", authtest.Claims{"sub": "alice", "scope": "storage.read:/", "aud": aud, "exp": exp.Unix()})
	x := a.XRootD(nil).(xrdfront.RequestAuthorizer)
	req := &backend.Request{Path: "/private/f", Opaque: "authz=" + tok, Protocol: "roots"}
	if err := x.AuthorizeRequest(context.Background(), xrdfront.OpOpen, req); err != nil {
		t.Fatal(err)
	}
	if want := exp.Add(5 * time.Second); !req.AuthUntil.Equal(want) {
		t.Fatalf("AuthUntil %v; want the token's expiry plus the skew, %v", req.AuthUntil, want)
	}
	again := *req
	again.AuthUntil = time.Time{}
	if err := x.AuthorizeRequest(context.Background(), xrdfront.OpRead, &again); !errors.Is(err, backend.ErrForbidden) {
		t.Fatalf("asked again once the grant ended: %v; want refused", err)
	}
	pub := &backend.Request{Path: "/public/f", Opaque: "authz=" + tok, Protocol: "roots"}
	if err := x.AuthorizeRequest(context.Background(), xrdfront.OpOpen, pub); err != nil || !pub.AuthUntil.IsZero() {
		t.Fatalf("a public read: %v, until %v; want allowed without end", err, pub.AuthUntil)
	}
	r := httptest.NewRequest("GET", "/private/f", nil)
	r.TLS = &tls.ConnectionState{}
	r.Header.Set("Authorization", "Bearer "+tok)
	hreq := &backend.Request{Path: "/private/f"}
	if err := a.HTTP(nil).Authorize(r, hreq, "read"); err != nil || !hreq.AuthUntil.Equal(exp.Add(5*time.Second)) {
		t.Fatalf("https: %v, until %v", err, hreq.AuthUntil)
	}
}

// TestSiteRulesStillApply (issue 36 item 7): a director that lists a
// namespace as public (here /public, as a fake director could list "/")
// does not open what the site's own [security] rules close: the stricter
// wins, over https and root:// alike. What both allow is allowed, with
// the site's restrictions (cached data only) and the federation's user.
func TestSiteRulesStillApply(t *testing.T) {
	a, priv, _ := newTestAuthorizer(t, nil)
	tok := priv.Token(t, "alice", "storage.read:/", aud)
	site, err := security.New(&security.Config{Logger: slog.New(slog.DiscardHandler), Rules: []authz.Rule{
		{Path: "/", Read: []string{"anonymous"}},
		{Path: "/public/closed", Read: []string{"authenticated"}},
		{Path: "/private/cached", Read: []string{"anonymous"}, Fetch: []string{"none"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	h := a.HTTP(site.HTTPAuthorizer())
	x := a.XRootD(site.XRootDAuthorizer()).(xrdfront.RequestAuthorizer)
	cases := []struct {
		path, tok string
		allowed   bool
		noFetch   bool
	}{
		{"/public/open", "", true, false},
		{"/public/closed/f", "", false, false},
		{"/public/closed/f", tok, false, false}, // a token the site does not know is no credential of the site's
		{"/private/f", tok, true, false},
		{"/private/f", "", false, false},
		{"/private/cached/f", tok, true, true},
	}
	for _, c := range cases {
		r := httptest.NewRequest("GET", c.path, nil)
		r.TLS = &tls.ConnectionState{}
		if c.tok != "" {
			r.Header.Set("Authorization", "Bearer "+c.tok)
		}
		hreq := &backend.Request{Path: c.path, Client: r.RemoteAddr, Protocol: "https"}
		xreq := &backend.Request{Path: c.path, Protocol: "roots"}
		if c.tok != "" {
			xreq.Opaque = "authz=" + c.tok
		}
		for name, err := range map[string]error{
			"https": h.Authorize(r, hreq, "read"),
			"roots": x.AuthorizeRequest(context.Background(), xrdfront.OpOpen, xreq),
		} {
			req := hreq
			if name == "roots" {
				req = xreq
			}
			switch {
			case c.allowed && err != nil:
				t.Errorf("%s %s (token %t): %v; want allowed", name, c.path, c.tok != "", err)
			case !c.allowed && !errors.Is(err, backend.ErrForbidden):
				t.Errorf("%s %s (token %t): %v; want refused by the site's rules", name, c.path, c.tok != "", err)
			case err == nil && req.NoFetch != c.noFetch:
				t.Errorf("%s %s: NoFetch %t; want the site's %t", name, c.path, req.NoFetch, c.noFetch)
			case err == nil && c.tok != "" && (req.User != "alice@"+priv.URL || req.OriginToken != tok || strings.Contains(req.Opaque, "authz")):
				t.Errorf("%s %s: user %q, origin token %t, opaque %q; want the federation's user and token, none in the opaque data", name, c.path, req.User, req.OriginToken == tok, req.Opaque)
			}
		}
	}
}
