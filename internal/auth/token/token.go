// Package token verifies bearer tokens of the WLCG common JWT profile and
// of SciTokens: an RS256 or ES256 JSON Web Token from a configured issuer,
// whose keys come from a JWKS file or the issuer's discovery URL (cached and
// refreshed), checked for iss, aud, exp and nbf, and turned into Claims
// (storage scopes with path-prefix semantics, wlcg.groups).
package token

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net/http"
	"strings"
	"time"
)

// ErrInvalid marks a token that is not acceptable (malformed, bad
// signature, wrong issuer or audience, expired). Check with errors.Is.
var ErrInvalid = errors.New("token: invalid")

// Defaults. A zero Config field means "use the default".
const (
	// defaultClockSkew tolerates clocks of issuer and cache that differ a
	// little, as the WLCG profile recommends (at most a few minutes).
	defaultClockSkew = 60 * time.Second
	// defaultMaxTokenSize bounds a token; WLCG tokens are a few KiB, and
	// XRootD's ztn default is 4 KiB.
	defaultMaxTokenSize = 16 << 10
	// defaultKeyRefresh is how often an issuer's keys are reloaded.
	defaultKeyRefresh = 10 * time.Minute
	// defaultKeyMinRefresh bounds reloads triggered by unknown key ids.
	defaultKeyMinRefresh = 30 * time.Second
	// defaultFetchTimeout bounds one key download.
	defaultFetchTimeout = 10 * time.Second
)

// Issuer is one trusted token issuer.
type Issuer struct {
	// Issuer is the exact "iss" value, e.g. "https://cms-auth.web.cern.ch/".
	// Required.
	Issuer string
	// Audiences are the "aud" values accepted from this issuer, e.g. the
	// cache's URL, or "https://wlcg.cern.ch/jwt/v1/any" to accept tokens
	// for any WLCG service. A token must name at least one. Default: the
	// Config's Audiences.
	Audiences []string
	// JWKSFile is a JSON Web Key Set file with the issuer's keys (re-read
	// every KeyRefresh). Default "": the keys are fetched from the issuer
	// (JWKSURL, or discovered from Issuer + /.well-known/openid-configuration).
	JWKSFile string
	// JWKSURL is the https:// URL of the issuer's keys. Default "":
	// discovered.
	JWKSURL string
	// BasePath is where the issuer's scope paths live in the namespace:
	// with "/store/user", the scope "storage.read:/alice" covers
	// /store/user/alice. Default "/".
	BasePath string
	// RestrictedPaths bound the issuer's scopes (XrdAccSciTokens'
	// restricted_path): paths relative to BasePath, as scope paths are; a
	// scope reaches only into them (a broader scope is narrowed to them,
	// one outside them is dropped). Default empty: no bound.
	RestrictedPaths []string
	// IgnoreScopes makes the issuer's storage scopes grant nothing, and
	// IgnoreGroups its wlcg.groups count for nothing (XrdAccSciTokens'
	// authorization_strategy without capability, without group). Default
	// false: both count.
	IgnoreScopes, IgnoreGroups bool
}

// Config configures a Verifier.
type Config struct {
	// Issuers are the trusted issuers; tokens of any other issuer are
	// refused before any key is fetched. Required.
	Issuers []Issuer
	// Audiences are accepted by every issuer without its own list.
	Audiences []string
	// ClockSkew is the tolerance on exp, nbf and iat. Default 60 s.
	ClockSkew time.Duration
	// MaxTokenSize bounds a token in bytes. Default 16 KiB.
	MaxTokenSize int
	// KeyRefresh is how often issuer keys are reloaded. Default 10 min.
	// Shorter notices a revoked key sooner at the expense of more requests
	// to the issuer.
	KeyRefresh time.Duration
	// KeyMinRefresh is the least time between two reloads of one issuer's
	// keys, however many tokens with unknown key ids arrive. Default 30 s.
	KeyMinRefresh time.Duration
	// FetchTimeout bounds one key download. Default 10 s.
	FetchTimeout time.Duration
	// RootCAs verify the issuers' https servers. Default nil: the system
	// pool.
	RootCAs *x509.CertPool
}

// Claims is what a verified token says.
type Claims struct {
	Issuer    string
	Subject   string
	Audience  []string
	ID        string // jti
	ClientID  string // client_id
	Expiry    time.Time
	NotBefore time.Time // zero if absent
	IssuedAt  time.Time // zero if absent
	// Scopes are the storage scopes, paths already under the issuer's
	// BasePath.
	Scopes []Scope
	// Groups are the wlcg.groups ("/cms", "/cms/uscms").
	Groups []string
	// OtherScopes are the scopes that are not storage scopes, as written
	// ("openid", "compute.read", a service's own such as
	// "pelican.directorTestReport"), for services that grant by them.
	OtherScopes []string
	// Profile is "wlcg" (wlcg.ver), "scitokens" (ver scitoken:2.0) or "".
	Profile string
}

// Allows reports whether a scope of the token grants op on p (a clean
// absolute path).
func (c *Claims) Allows(op, p string) bool {
	for _, s := range c.Scopes {
		if s.Covers(op, p) {
			return true
		}
	}
	return false
}

// Name identifies the token's bearer in logs: sub@iss.
func (c *Claims) Name() string { return c.Subject + "@" + c.Issuer }

// Verifier verifies tokens. Safe for concurrent use.
type Verifier struct {
	cfg     Config
	now     func() time.Time
	issuers map[string]*issuerState
	ctx     context.Context
	cancel  context.CancelFunc
}

type issuerState struct {
	cfg  Issuer
	auds []string
	keys *keySet
}

// New validates cfg and returns a Verifier. No key is fetched before the
// first token of an issuer arrives.
func New(cfg *Config) (*Verifier, error) {
	return newVerifier(cfg, time.Now, nil)
}

// newVerifier is New with a clock and an HTTP transport for tests.
func newVerifier(cfg *Config, now func() time.Time, rt http.RoundTripper) (*Verifier, error) {
	c := *cfg
	c.Issuers = append([]Issuer(nil), cfg.Issuers...)
	if c.ClockSkew == 0 {
		c.ClockSkew = defaultClockSkew
	}
	if c.MaxTokenSize == 0 {
		c.MaxTokenSize = defaultMaxTokenSize
	}
	if c.KeyRefresh == 0 {
		c.KeyRefresh = defaultKeyRefresh
	}
	if c.KeyMinRefresh == 0 {
		c.KeyMinRefresh = defaultKeyMinRefresh
	}
	if c.FetchTimeout == 0 {
		c.FetchTimeout = defaultFetchTimeout
	}
	if rt == nil {
		rt = &http.Transport{
			TLSClientConfig:       &tls.Config{RootCAs: c.RootCAs, MinVersion: tls.VersionTLS12},
			Proxy:                 http.ProxyFromEnvironment,
			ResponseHeaderTimeout: c.FetchTimeout,
		}
	}
	client := &http.Client{Transport: rt, Timeout: c.FetchTimeout}
	v := &Verifier{cfg: c, now: now, issuers: map[string]*issuerState{}}
	v.ctx, v.cancel = context.WithCancel(context.Background())
	var errs []error
	if len(c.Issuers) == 0 {
		errs = append(errs, errors.New("no issuer configured"))
	}
	if c.ClockSkew < 0 || c.ClockSkew > 10*time.Minute {
		errs = append(errs, fmt.Errorf("clock skew %v: want 0 to 10m", c.ClockSkew))
	}
	if c.MaxTokenSize < 256 || c.MaxTokenSize > 512<<10 {
		errs = append(errs, fmt.Errorf("max token size %d: want 256 to 524288 bytes", c.MaxTokenSize))
	}
	if c.KeyRefresh < time.Second || c.KeyMinRefresh < 0 || c.FetchTimeout < 0 {
		errs = append(errs, fmt.Errorf("key refresh %v, min refresh %v, fetch timeout %v: refresh at least 1s, none negative", c.KeyRefresh, c.KeyMinRefresh, c.FetchTimeout))
	}
	for i, is := range c.Issuers {
		if is.Issuer == "" {
			errs = append(errs, fmt.Errorf("issuer %d: no issuer URL", i))
			continue
		}
		if _, dup := v.issuers[is.Issuer]; dup {
			errs = append(errs, fmt.Errorf("issuer %s: listed twice", is.Issuer))
			continue
		}
		auds := is.Audiences
		if len(auds) == 0 {
			auds = c.Audiences
		}
		if len(auds) == 0 {
			errs = append(errs, fmt.Errorf("issuer %s: no audience: list the audiences this cache accepts (its URL, or https://wlcg.cern.ch/jwt/v1/any)", is.Issuer))
		}
		if is.JWKSFile == "" {
			u := is.JWKSURL
			if u == "" {
				u = is.Issuer
			}
			if err := checkHTTPS(u); err != nil {
				errs = append(errs, fmt.Errorf("issuer %s: keys are fetched from %s, which %w; or give a jwks_file", is.Issuer, u, err))
			}
		}
		if is.BasePath != "" {
			if bp, err := cleanScopePath(is.BasePath); err != nil {
				errs = append(errs, fmt.Errorf("issuer %s: base path: %w", is.Issuer, err))
			} else {
				is.BasePath = bp
			}
		}
		rps := is.RestrictedPaths
		is.RestrictedPaths = nil
		for _, rp := range rps {
			if c, err := cleanScopePath(rp); err != nil {
				errs = append(errs, fmt.Errorf("issuer %s: restricted path: %w", is.Issuer, err))
			} else {
				is.RestrictedPaths = append(is.RestrictedPaths, joinBase(is.BasePath, c))
			}
		}
		v.issuers[is.Issuer] = &issuerState{cfg: is, auds: auds, keys: &keySet{
			issuer: is.Issuer, file: is.JWKSFile, jwksURL: is.JWKSURL, client: client,
			refresh: c.KeyRefresh, minRefresh: c.KeyMinRefresh, timeout: c.FetchTimeout,
			now: now, base: v.ctx,
		}}
	}
	if err := errors.Join(errs...); err != nil {
		v.cancel()
		return nil, fmt.Errorf("token verifier: %w", err)
	}
	return v, nil
}

// Close stops key downloads in progress.
func (v *Verifier) Close() error {
	v.cancel()
	return nil
}

// MaxTokenSize is the largest token Verify accepts.
func (v *Verifier) MaxTokenSize() int { return v.cfg.MaxTokenSize }

// header is the JOSE header of a token.
type header struct {
	Alg  string   `json:"alg"`
	Kid  string   `json:"kid"`
	Typ  string   `json:"typ"`
	Crit []string `json:"crit"`
}

// rawClaims is the payload as issuers write it.
type rawClaims struct {
	Iss      string          `json:"iss"`
	Sub      string          `json:"sub"`
	Aud      json.RawMessage `json:"aud"`
	Exp      *json.Number    `json:"exp"`
	Nbf      *json.Number    `json:"nbf"`
	Iat      *json.Number    `json:"iat"`
	Jti      string          `json:"jti"`
	Scope    string          `json:"scope"`
	Groups   []string        `json:"wlcg.groups"`
	WLCGVer  string          `json:"wlcg.ver"`
	Ver      string          `json:"ver"`
	ClientID string          `json:"client_id"`
}

// Parsed is a token split into its parts, not yet verified.
type Parsed struct {
	header    header
	claims    rawClaims
	signed    []byte // header.payload as sent
	signature []byte
}

// Parse splits a compact JWS and decodes its header and claims, without
// checking anything that needs keys or a clock. It never panics on any
// input (it is fuzzed).
func Parse(raw string, maxSize int) (*Parsed, error) {
	if len(raw) > maxSize {
		return nil, fmt.Errorf("token of %d bytes is longer than the limit of %d: %w", len(raw), maxSize, ErrInvalid)
	}
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("not a JWT (want header.payload.signature): %w", ErrInvalid)
	}
	p := &Parsed{signed: []byte(parts[0] + "." + parts[1])}
	hb, err := b64(parts[0])
	if err != nil {
		return nil, fmt.Errorf("token header: %w", errors.Join(ErrInvalid, err))
	}
	if err := strictJSON(hb, &p.header); err != nil {
		return nil, fmt.Errorf("token header: %w", errors.Join(ErrInvalid, err))
	}
	pb, err := b64(parts[1])
	if err != nil {
		return nil, fmt.Errorf("token payload: %w", errors.Join(ErrInvalid, err))
	}
	if err := strictJSON(pb, &p.claims); err != nil {
		return nil, fmt.Errorf("token payload: %w", errors.Join(ErrInvalid, err))
	}
	if p.signature, err = b64(parts[2]); err != nil {
		return nil, fmt.Errorf("token signature: %w", errors.Join(ErrInvalid, err))
	}
	return p, nil
}

// Issuer returns the unverified "iss" claim.
func (p *Parsed) Issuer() string { return p.claims.Iss }

func b64(s string) ([]byte, error) {
	return base64.RawURLEncoding.Strict().DecodeString(s)
}

// strictJSON decodes one JSON object, keeping numbers exact.
func strictJSON(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("trailing data after the JSON object")
	}
	return nil
}

// Verify checks a token and returns its claims. The token is the bare
// JWT (without "Bearer "). Errors wrap ErrInvalid unless the issuer's keys
// could not be obtained at all.
func (v *Verifier) Verify(ctx context.Context, raw string) (*Claims, error) {
	p, err := Parse(raw, v.cfg.MaxTokenSize)
	if err != nil {
		return nil, err
	}
	h, rc := p.header, p.claims
	if h.Alg != "RS256" && h.Alg != "ES256" {
		return nil, fmt.Errorf("token algorithm %q: only RS256 and ES256 are accepted: %w", h.Alg, ErrInvalid)
	}
	if len(h.Crit) > 0 {
		return nil, fmt.Errorf("token has critical header parameters %q that are not understood: %w", h.Crit, ErrInvalid)
	}
	is := v.issuers[rc.Iss]
	if is == nil {
		return nil, fmt.Errorf("token issuer %q is not trusted: %w", rc.Iss, ErrInvalid)
	}
	keys, err := is.keys.lookup(ctx, h.Alg, h.Kid)
	if err != nil {
		return nil, fmt.Errorf("token of %s: %w", rc.Iss, err)
	}
	if !verifySig(keys, h.Alg, p.signed, p.signature) {
		return nil, fmt.Errorf("token of %s: bad signature: %w", rc.Iss, ErrInvalid)
	}

	// The signature is good: the claims are the issuer's.
	c := &Claims{Issuer: rc.Iss, Subject: rc.Sub, ID: rc.Jti, ClientID: rc.ClientID, Groups: rc.Groups}
	if c.Audience, err = audiences(rc.Aud); err != nil {
		return nil, fmt.Errorf("token of %s: aud: %w", rc.Iss, errors.Join(ErrInvalid, err))
	}
	if !anyIn(c.Audience, is.auds) {
		return nil, fmt.Errorf("token of %s has audience %q, this cache accepts %q: %w", rc.Iss, c.Audience, is.auds, ErrInvalid)
	}
	now, skew := v.now(), v.cfg.ClockSkew
	if rc.Exp == nil {
		return nil, fmt.Errorf("token of %s has no expiry (exp): %w", rc.Iss, ErrInvalid)
	}
	if c.Expiry, err = numericDate(*rc.Exp); err != nil {
		return nil, fmt.Errorf("token of %s: exp: %w", rc.Iss, errors.Join(ErrInvalid, err))
	}
	if !now.Before(c.Expiry.Add(skew)) {
		return nil, fmt.Errorf("token of %s expired at %s: %w", rc.Iss, c.Expiry.UTC().Format(time.RFC3339), ErrInvalid)
	}
	if rc.Nbf != nil {
		if c.NotBefore, err = numericDate(*rc.Nbf); err != nil {
			return nil, fmt.Errorf("token of %s: nbf: %w", rc.Iss, errors.Join(ErrInvalid, err))
		}
		if now.Add(skew).Before(c.NotBefore) {
			return nil, fmt.Errorf("token of %s is not valid before %s: %w", rc.Iss, c.NotBefore.UTC().Format(time.RFC3339), ErrInvalid)
		}
	}
	if rc.Iat != nil {
		if c.IssuedAt, err = numericDate(*rc.Iat); err != nil {
			return nil, fmt.Errorf("token of %s: iat: %w", rc.Iss, errors.Join(ErrInvalid, err))
		}
		if now.Add(skew).Before(c.IssuedAt) {
			return nil, fmt.Errorf("token of %s was issued in the future (%s): %w", rc.Iss, c.IssuedAt.UTC().Format(time.RFC3339), ErrInvalid)
		}
	}
	if c.Scopes, err = parseScopes(rc.Scope, is.cfg.BasePath); err != nil {
		return nil, fmt.Errorf("token of %s: %w", rc.Iss, errors.Join(ErrInvalid, err))
	}
	if len(is.cfg.RestrictedPaths) > 0 {
		c.Scopes = restrict(c.Scopes, is.cfg.RestrictedPaths)
	}
	if is.cfg.IgnoreScopes {
		c.Scopes = nil
	}
	c.OtherScopes = otherScopes(rc.Scope)
	switch {
	case rc.WLCGVer != "":
		c.Profile = "wlcg"
	case strings.HasPrefix(rc.Ver, "scitoken"):
		c.Profile = "scitokens"
	}
	for _, g := range c.Groups {
		if !strings.HasPrefix(g, "/") {
			return nil, fmt.Errorf("token of %s: group %q is not a path: %w", rc.Iss, g, ErrInvalid)
		}
	}
	if is.cfg.IgnoreGroups {
		c.Groups = nil
	}
	return c, nil
}

func verifySig(keys []key, alg string, signed, sig []byte) bool {
	sum := sha256.Sum256(signed)
	for _, k := range keys {
		switch alg {
		case "RS256":
			pub, ok := k.pub.(*rsa.PublicKey)
			if ok && rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig) == nil {
				return true
			}
		case "ES256":
			pub, ok := k.pub.(*ecdsa.PublicKey)
			if !ok || len(sig) != 64 {
				continue
			}
			r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
			if ecdsa.Verify(pub, sum[:], r, s) {
				return true
			}
		}
	}
	return false
}

// audiences decodes "aud": a string or an array of strings.
func audiences(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, errors.New("missing")
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, errors.New("neither a string nor an array of strings")
	}
	return many, nil
}

func anyIn(have, want []string) bool {
	for _, h := range have {
		for _, w := range want {
			if h == w {
				return true
			}
		}
	}
	return false
}

// numericDate converts a JWT NumericDate (seconds, maybe fractional).
func numericDate(n json.Number) (time.Time, error) {
	f, err := n.Float64()
	if err != nil || math.IsNaN(f) || f < 0 || f > 1<<40 {
		return time.Time{}, fmt.Errorf("bad date %q", n.String())
	}
	sec := math.Floor(f)
	return time.Unix(int64(sec), int64((f-sec)*1e9)), nil
}
