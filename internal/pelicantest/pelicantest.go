// Package pelicantest is a protocol double of a Pelican federation's
// registry, director and origin, on one https server on loopback, for
// tests of a cache joining it (package pelican). It checks what Pelican's
// services check, and a little more where Pelican's own cache always
// complies: every signature (the registration's key-sign challenge, the
// advertisement and federation-token requests' ES256 tokens against the
// key the registry holds, by kid and alg), every scope, every token's
// lifetime and audience, and the fields of an advertisement. A request
// that fails a check is answered as Pelican answers it (status and JSON
// message) and recorded in Errors, so that a test can say what differed.
//
// It is a double, not Pelican: CI cannot run Pelican (the Go module proxy
// does not serve it, and it needs minutes to build), so the real
// federation is exercised by scripts/pelican-interop.sh instead. What each
// handler does is cited from PelicanPlatform/pelican.
package pelicantest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/auth/authtest"
)

// DirectorTestBody is the director's test object (server_utils
// DirectorTestBody), served with a newline.
const DirectorTestBody = "This object was created by the Pelican director-test functionality"

// Namespace is an origin export the double serves.
type Namespace struct {
	// Path is the federation prefix ("/public").
	Path string
	// PublicRead: readable without a token. Otherwise the double's origin
	// issuer (Federation.IssuerURL, base path Path) grants reads.
	PublicRead bool
	// Files are the objects, by path relative to Path ("/f.txt").
	Files map[string][]byte
}

// Options configure a Federation.
type Options struct {
	// Namespaces the origin exports. Default: /public (public, hello.txt)
	// and /private (private, secret.txt).
	Namespaces []Namespace
	// RequireCacheApproval makes registrations wait for Approve (the
	// OSDF's Registry.RequireCacheApproval).
	RequireCacheApproval bool
	// FedTokenLifetime is the federation tokens' lifetime. Default 15m
	// (Pelican's Director.FedTokenLifetime).
	FedTokenLifetime time.Duration
}

// Federation is the running double. Its methods are safe for concurrent
// use.
type Federation struct {
	// URL is the https base of every service (discovery, registry,
	// director, origin, issuers), as in a one-process Pelican federation.
	URL string
	// CA signed the server's certificate; CAFile holds it in PEM.
	CA     *authtest.CA
	CAFile string

	opts   Options
	srv    *httptest.Server
	fedKey *ecdsa.PrivateKey // the federation's (director's) issuer key
	orgKey *ecdsa.PrivateKey // the origin's issuer key (private namespaces)

	mu sync.Mutex
	// regs are the registrations by prefix.
	regs map[string]*Registration
	// ads are the ads accepted, in order.
	ads []Ad
	// errs are the checks that failed, in order.
	errs []string
	// fail answers the next requests to a path with a status (and
	// Retry-After), for tests of "not now" and outages.
	fail map[string][]Failure
	// down makes every request fail at the connection (director gone).
	down bool
	// originReads counts GETs the origin served, by path.
	originReads map[string]int
	// redirects counts the director's redirects to the origin, by path.
	redirects map[string]int
	// fedTokens counts the federation tokens issued.
	fedTokens int
	// health is the last director test result ("OK", "Error").
	health string
	// tokens are every bearer token the double received or issued, for
	// tests that no secret shows where it should not.
	tokens []string
}

// Registration is what the registry holds for a prefix.
type Registration struct {
	Prefix, Site, ServerID string
	// JWKS is the key set as registered.
	JWKS     json.RawMessage
	keys     map[string]*ecdsa.PublicKey // by kid (all with alg ES256)
	Approved bool
}

// Ad is an accepted advertisement with what the double saw.
type Ad struct {
	Received time.Time
	Body     map[string]any
	// TokenLifetime is exp-iat of the advertisement token.
	TokenLifetime time.Duration
}

// Failure is an injected answer.
type Failure struct {
	Status     int
	RetryAfter string
}

// Start runs the double until the test ends.
func Start(tb testing.TB, o Options) *Federation {
	tb.Helper()
	if o.Namespaces == nil {
		o.Namespaces = []Namespace{
			{Path: "/public", PublicRead: true, Files: map[string][]byte{"/hello.txt": []byte("hello public\n")}},
			{Path: "/private", Files: map[string][]byte{"/secret.txt": []byte("secret data\n")}},
		}
	}
	if o.FedTokenLifetime == 0 {
		o.FedTokenLifetime = 15 * time.Minute
	}
	f := &Federation{opts: o, regs: map[string]*Registration{}, fail: map[string][]Failure{}, originReads: map[string]int{}, redirects: map[string]int{}}
	var err error
	if f.fedKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		tb.Fatal(err)
	}
	if f.orgKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		tb.Fatal(err)
	}
	f.CA = authtest.NewCA(tb, "pelicantest CA")
	host := f.CA.Host(tb, "127.0.0.1", "localhost")
	f.CAFile = filepath.Join(tb.TempDir(), "ca.pem")
	if err := os.WriteFile(f.CAFile, authtest.CertPEM(f.CA.Cert), 0o644); err != nil {
		tb.Fatal(err)
	}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	f.srv.TLS = &tls.Config{Certificates: []tls.Certificate{*host.TLS()}}
	f.srv.StartTLS()
	tb.Cleanup(f.srv.Close)
	f.URL = f.srv.URL
	return f
}

// Pool is a certificate pool trusting the double.
func (f *Federation) Pool() *x509.CertPool { return authtest.Pool(f.CA) }

// IssuerURL is the origin's token issuer of the private namespaces.
func (f *Federation) IssuerURL() string { return f.URL + "/api/v1.0/origin" }

// Approve approves a registration (an administrator's click).
func (f *Federation) Approve(prefix string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r := f.regs[prefix]; r != nil {
		r.Approved = true
	}
}

// Registration returns the registration of prefix, nil when none.
func (f *Federation) Registration(prefix string) *Registration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r := f.regs[prefix]; r != nil {
		cp := *r
		return &cp
	}
	return nil
}

// Ads returns the ads accepted so far.
func (f *Federation) Ads() []Ad {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.ads)
}

// Errors returns the failed checks so far: a test that expects a
// compliant cache wants none.
func (f *Federation) Errors() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.errs)
}

// FailNext makes the next requests to path (a URL path of the double)
// answer with the failures given, one each, in order.
func (f *Federation) FailNext(path string, fs ...Failure) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[path] = append(f.fail[path], fs...)
}

// SetDown makes the whole federation unreachable (every request is cut
// at the connection) or brings it back.
func (f *Federation) SetDown(down bool) {
	f.mu.Lock()
	f.down = down
	f.mu.Unlock()
	if down {
		f.srv.CloseClientConnections()
	}
}

// OriginReads is how many GETs of the object at p the origin served.
func (f *Federation) OriginReads(p string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.originReads[p]
}

// Redirects is how many requests for the object at p the director sent
// on to the origin (its origin redirect, which a cache reads through): a
// cache that keeps the redirect's target for an open file asks once per
// file, not once per block.
func (f *Federation) Redirects(p string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.redirects[p]
}

// Tokens returns every bearer token the double received or issued.
func (f *Federation) Tokens() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.tokens)
}

// FedTokens is how many federation tokens the director issued.
func (f *Federation) FedTokens() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fedTokens
}

// check records a failed check; it returns msg for the answer.
func (f *Federation) check(format string, args ...any) string {
	msg := fmt.Sprintf(format, args...)
	f.mu.Lock()
	f.errs = append(f.errs, msg)
	f.mu.Unlock()
	return msg
}

// --- tokens ---

func b64u(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func ecJWK(pub *ecdsa.PublicKey, kid string) map[string]string {
	b, _ := pub.Bytes()
	return map[string]string{"kty": "EC", "crv": "P-256", "x": b64u(b[1:33]), "y": b64u(b[33:]), "kid": kid, "alg": "ES256", "use": "sig"}
}

func signES256(key *ecdsa.PrivateKey, kid string, claims map[string]any) string {
	hdr, _ := json.Marshal(map[string]string{"alg": "ES256", "typ": "JWT", "kid": kid})
	body, _ := json.Marshal(claims)
	signed := b64u(hdr) + "." + b64u(body)
	sum := sha256.Sum256([]byte(signed))
	r, s, err := ecdsa.Sign(rand.Reader, key, sum[:])
	if err != nil {
		panic("pelicantest: " + err.Error())
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signed + "." + b64u(sig)
}

// Token mints a token of the origin's issuer (the private namespaces'),
// for a client: sub, scope ("storage.read:/"), audience, an hour long.
func (f *Federation) Token(sub, scope, aud string) string {
	now := time.Now().Unix()
	return signES256(f.orgKey, "origin", map[string]any{"iss": f.IssuerURL(), "sub": sub, "aud": aud, "scope": scope,
		"iat": now, "nbf": now, "exp": now + 3600, "jti": newID(), "wlcg.ver": "1.0"})
}

// FederationToken mints a token the federation signs (as the director
// does for its test reports and scrapes): scope, audience, a minute long.
func (f *Federation) FederationToken(scope, aud string) string {
	now := time.Now().Unix()
	return signES256(f.fedKey, "federation", map[string]any{"iss": f.URL, "sub": "director", "aud": aud, "scope": scope,
		"iat": now, "nbf": now, "exp": now + 60, "jti": newID(), "wlcg.ver": "1.0"})
}

func newID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// claims are a verified token's claims.
type claims struct {
	Iss, Sub, Scope string
	Aud             any
	Iat, Nbf, Exp   *float64
	Jti             string
	WLCGVer         string `json:"wlcg.ver"`
}

// leeway is the director's tolerance on token times (token/token_verify.go
// ClockSkewLeeway).
const leeway = 60 * time.Second

// verifyES256 checks a token as the director does (token.VerifyWithKeyset
// over the registered key set): ES256 by a key found by kid whose alg is
// ES256, signature, exp, nbf and iat within the leeway.
func verifyES256(tok string, keys map[string]*ecdsa.PublicKey, now time.Time) (*claims, error) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return nil, errors.New("not a JWT")
	}
	hb, err1 := base64.RawURLEncoding.DecodeString(parts[0])
	pb, err2 := base64.RawURLEncoding.DecodeString(parts[1])
	sig, err3 := base64.RawURLEncoding.DecodeString(parts[2])
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, fmt.Errorf("bad encoding: %w", err)
	}
	var h struct{ Alg, Kid, Typ string }
	if err := json.Unmarshal(hb, &h); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	if h.Alg != "ES256" {
		return nil, fmt.Errorf("alg %q, want ES256", h.Alg)
	}
	if h.Kid == "" {
		return nil, errors.New("no kid in the header (the director looks the key up by kid)")
	}
	pub := keys[h.Kid]
	if pub == nil {
		return nil, fmt.Errorf("kid %q is not in the registered key set", h.Kid)
	}
	if len(sig) != 64 {
		return nil, fmt.Errorf("ES256 signature of %d bytes, want 64", len(sig))
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if !ecdsa.Verify(pub, sum[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		return nil, errors.New("bad signature")
	}
	var c claims
	if err := json.Unmarshal(pb, &c); err != nil {
		return nil, fmt.Errorf("claims: %w", err)
	}
	if c.Exp == nil || c.Iat == nil {
		return nil, errors.New("exp and iat are required")
	}
	exp, iat := time.Unix(int64(*c.Exp), 0), time.Unix(int64(*c.Iat), 0)
	if !now.Before(exp.Add(leeway)) {
		return nil, fmt.Errorf("expired at %s", exp.UTC().Format(time.RFC3339))
	}
	if iat.After(now.Add(leeway)) {
		return nil, errors.New("issued in the future")
	}
	if c.Nbf != nil && time.Unix(int64(*c.Nbf), 0).After(now.Add(leeway)) {
		return nil, errors.New("not valid yet")
	}
	return &c, nil
}

func (c *claims) hasScope(s string) bool { return slices.Contains(strings.Fields(c.Scope), s) }

func (c *claims) audiences() []string {
	switch a := c.Aud.(type) {
	case string:
		return []string{a}
	case []any:
		var out []string
		for _, x := range a {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func (c *claims) lifetime() time.Duration {
	return time.Unix(int64(*c.Exp), 0).Sub(time.Unix(int64(*c.Iat), 0))
}

// parseJWKS reads an EC key set; every key must be P-256 with alg ES256
// and a kid, as the director's key set lookup needs.
func parseJWKS(b []byte) (map[string]*ecdsa.PublicKey, error) {
	var set struct {
		Keys []map[string]string `json:"keys"`
	}
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("key set: %w", err)
	}
	if len(set.Keys) == 0 {
		return nil, errors.New("key set without keys")
	}
	out := map[string]*ecdsa.PublicKey{}
	for i, k := range set.Keys {
		pub, err := ecPublic(k)
		if err != nil {
			return nil, fmt.Errorf("key %d: %w", i, err)
		}
		if k["kid"] == "" || k["alg"] != "ES256" {
			return nil, fmt.Errorf("key %d: kid %q alg %q: want a kid and alg ES256", i, k["kid"], k["alg"])
		}
		out[k["kid"]] = pub
	}
	return out, nil
}

func ecPublic(k map[string]string) (*ecdsa.PublicKey, error) {
	if k["kty"] != "EC" || k["crv"] != "P-256" {
		return nil, fmt.Errorf("kty %q crv %q: want EC P-256 (the registry reads ECDSA keys only)", k["kty"], k["crv"])
	}
	x, err1 := base64.RawURLEncoding.DecodeString(k["x"])
	y, err2 := base64.RawURLEncoding.DecodeString(k["y"])
	if err1 != nil || err2 != nil || len(x) != 32 || len(y) != 32 {
		return nil, errors.New("bad x or y")
	}
	return ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
}

// wlcgAudience is the audience Pelican's services name for a URL
// (token/token_create.go GetWLCGAudience).
func wlcgAudience(raw string) string {
	u, _ := url.Parse(raw)
	port := u.Port()
	if port == "" || u.Scheme == "https" && port == "443" {
		return u.Scheme + "://" + u.Hostname()
	}
	return u.Scheme + "://" + u.Hostname() + ":" + port
}
