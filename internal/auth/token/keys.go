package token

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// Limits on what an issuer may hand us.
const (
	// maxKeyDocument bounds a JWKS or discovery document.
	maxKeyDocument = 1 << 20
	// maxKeysPerIssuer bounds the keys kept per issuer.
	maxKeysPerIssuer = 64
	minRSABits       = 2048
	maxRSABits       = 8192
)

// key is one verification key of an issuer.
type key struct {
	kid string
	alg string // "RS256" or "ES256"
	pub crypto.PublicKey
}

// jwk is one JSON Web Key (RFC 7517) as issuers publish them.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// ParseJWKS parses a JWK Set document and returns the number of RS256 and
// ES256 signing keys in it; keys of other types are skipped. It is what the
// verifier uses on every JWKS it loads.
func ParseJWKS(b []byte) (int, error) {
	ks, err := parseJWKS(b)
	return len(ks), err
}

func parseJWKS(b []byte) ([]key, error) {
	var doc struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("parse JWKS: %w", err)
	}
	var out []key
	var errs []error
	for i, k := range doc.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		var kk key
		var err error
		switch k.Kty {
		case "RSA":
			kk, err = rsaKey(k)
		case "EC":
			kk, err = ecKey(k)
		default:
			continue // e.g. OKP: not a profile algorithm
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("key %d (kid %q): %w", i, k.Kid, err))
			continue
		}
		if len(out) == maxKeysPerIssuer {
			return nil, fmt.Errorf("JWKS has more than %d keys", maxKeysPerIssuer)
		}
		out = append(out, kk)
	}
	if len(out) == 0 {
		errs = append(errs, errors.New("JWKS has no usable RS256 or ES256 key"))
		return nil, errors.Join(errs...)
	}
	return out, nil
}

func rsaKey(k jwk) (key, error) {
	if k.Alg != "" && k.Alg != "RS256" {
		return key{}, fmt.Errorf("RSA key for alg %q: only RS256 is accepted", k.Alg)
	}
	n, err := b64int(k.N)
	if err != nil {
		return key{}, fmt.Errorf("modulus: %w", err)
	}
	e, err := b64int(k.E)
	if err != nil {
		return key{}, fmt.Errorf("exponent: %w", err)
	}
	if bits := n.BitLen(); bits < minRSABits || bits > maxRSABits {
		return key{}, fmt.Errorf("RSA modulus of %d bits: want %d to %d", bits, minRSABits, maxRSABits)
	}
	if !e.IsInt64() || e.Int64() < 3 || e.Int64() > 1<<31-1 || e.Bit(0) == 0 {
		return key{}, errors.New("RSA exponent out of range")
	}
	return key{kid: k.Kid, alg: "RS256", pub: &rsa.PublicKey{N: n, E: int(e.Int64())}}, nil
}

func ecKey(k jwk) (key, error) {
	if k.Crv != "P-256" {
		return key{}, fmt.Errorf("EC curve %q: only P-256 (ES256) is accepted", k.Crv)
	}
	if k.Alg != "" && k.Alg != "ES256" {
		return key{}, fmt.Errorf("EC key for alg %q: only ES256 is accepted", k.Alg)
	}
	x, err := b64fixed(k.X, 32)
	if err != nil {
		return key{}, fmt.Errorf("x: %w", err)
	}
	y, err := b64fixed(k.Y, 32)
	if err != nil {
		return key{}, fmt.Errorf("y: %w", err)
	}
	// Parsing the uncompressed point checks that it lies on the curve.
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
	if err != nil {
		return key{}, fmt.Errorf("EC point: %w", err)
	}
	return key{kid: k.Kid, alg: "ES256", pub: pub}, nil
}

func b64int(s string) (*big.Int, error) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return nil, err
	}
	if len(b) == 0 {
		return nil, errors.New("empty")
	}
	return new(big.Int).SetBytes(b), nil
}

func b64fixed(s string, n int) ([]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return nil, err
	}
	if len(b) != n {
		return nil, fmt.Errorf("%d bytes, want %d", len(b), n)
	}
	return b, nil
}

// keySet holds one issuer's keys, loaded from a file or from the issuer's
// URL, and refreshes them: when they are older than refresh, and when a
// token names a key id we do not know (a rotated key), but never more often
// than minRefresh, so that tokens with made-up key ids cannot make us hammer
// the issuer. A failed refresh keeps the keys we have.
type keySet struct {
	issuer     string
	file       string // JWKS file, or ""
	jwksURL    string // explicit JWKS URL, or "" to discover
	client     *http.Client
	refresh    time.Duration
	minRefresh time.Duration
	timeout    time.Duration
	now        func() time.Time
	base       context.Context // cancelled when the Verifier closes

	// mu protects the fields below.
	mu      sync.Mutex
	keys    []key
	fetched time.Time     // last successful load
	tried   time.Time     // last load attempt
	lastErr error         // error of the last attempt, nil if it worked
	loading chan struct{} // closed when the load in flight ends; nil if none
}

// lookup returns the candidate keys for a token signed with alg and kid,
// loading or refreshing the set when needed.
func (ks *keySet) lookup(ctx context.Context, alg, kid string) ([]key, error) {
	for attempt := 0; ; attempt++ {
		now := ks.now()
		ks.mu.Lock()
		cands := ks.matchLocked(alg, kid)
		stale := ks.keys == nil || now.Sub(ks.fetched) >= ks.refresh
		ch := ks.loading
		if attempt > 0 || len(cands) > 0 && !stale {
			return ks.resultLocked(cands, alg, kid)
		}
		if ch == nil {
			if !ks.tried.IsZero() && now.Sub(ks.tried) < ks.minRefresh {
				return ks.resultLocked(cands, alg, kid)
			}
			ch = make(chan struct{})
			ks.loading = ch
			ks.tried = now
			go ks.load(ch)
		}
		ks.mu.Unlock()
		if len(cands) > 0 {
			// A refresh of keys we still trust: do not wait for it.
			return cands, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the keys of issuer %s: %w", ks.issuer, ctx.Err())
		}
	}
}

// resultLocked unlocks ks.mu and returns cands, or why there are none.
// MUST be called with ks.mu held.
func (ks *keySet) resultLocked(cands []key, alg, kid string) ([]key, error) {
	err := ks.lastErr
	ks.mu.Unlock()
	if len(cands) > 0 {
		return cands, nil
	}
	if err != nil {
		return nil, fmt.Errorf("no %s key with kid %q for issuer %s; the last key refresh failed: %w", alg, kid, ks.issuer, errors.Join(ErrInvalid, err))
	}
	return nil, fmt.Errorf("no %s key with kid %q for issuer %s: %w", alg, kid, ks.issuer, ErrInvalid)
}

// matchLocked returns the keys that may have signed a token with alg and
// kid. MUST be called with ks.mu held.
func (ks *keySet) matchLocked(alg, kid string) []key {
	var out []key
	for _, k := range ks.keys {
		if k.alg == alg && (kid == "" || k.kid == kid) {
			out = append(out, k)
		}
	}
	return out
}

// load fetches the keys once and publishes them; it closes done at the
// end. It runs detached from the token that asked for it, bounded by
// ks.timeout and the Verifier's life, so that a client that hangs up does
// not waste the fetch.
func (ks *keySet) load(done chan struct{}) {
	ctx, cancel := context.WithTimeout(ks.base, ks.timeout)
	defer cancel()
	keys, err := ks.fetch(ctx)
	ks.mu.Lock()
	if err == nil {
		ks.keys = keys
		ks.fetched = ks.now()
	}
	ks.lastErr = err
	ks.loading = nil
	ks.mu.Unlock()
	close(done)
}

func (ks *keySet) fetch(ctx context.Context) ([]key, error) {
	if ks.file != "" {
		b, err := os.ReadFile(ks.file)
		if err != nil {
			return nil, fmt.Errorf("read JWKS of issuer %s: %w", ks.issuer, err)
		}
		keys, err := parseJWKS(b)
		if err != nil {
			return nil, fmt.Errorf("JWKS file %s: %w", ks.file, err)
		}
		return keys, nil
	}
	u := ks.jwksURL
	if u == "" {
		var err error
		if u, err = ks.discover(ctx); err != nil {
			return nil, err
		}
	}
	b, err := ks.get(ctx, u)
	if err != nil {
		return nil, err
	}
	keys, err := parseJWKS(b)
	if err != nil {
		return nil, fmt.Errorf("JWKS %s: %w", u, err)
	}
	return keys, nil
}

// discover reads the issuer's OpenID Connect (or OAuth) metadata for its
// jwks_uri.
func (ks *keySet) discover(ctx context.Context) (string, error) {
	base := strings.TrimRight(ks.issuer, "/")
	var errs []error
	for _, wk := range []string{"/.well-known/openid-configuration", "/.well-known/oauth-authorization-server"} {
		b, err := ks.get(ctx, base+wk)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var meta struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		if err := json.Unmarshal(b, &meta); err != nil {
			return "", fmt.Errorf("issuer %s metadata: %w", ks.issuer, err)
		}
		if meta.JWKSURI == "" {
			return "", fmt.Errorf("issuer %s metadata has no jwks_uri", ks.issuer)
		}
		if err := checkHTTPS(meta.JWKSURI); err != nil {
			return "", fmt.Errorf("issuer %s jwks_uri: %w", ks.issuer, err)
		}
		return meta.JWKSURI, nil
	}
	return "", fmt.Errorf("discover keys of issuer %s: %w", ks.issuer, errors.Join(errs...))
}

func (ks *keySet) get(ctx context.Context, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := ks.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxKeyDocument+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	if len(b) > maxKeyDocument {
		return nil, fmt.Errorf("GET %s: document longer than %d bytes", u, maxKeyDocument)
	}
	return b, nil
}

// checkHTTPS refuses key URLs that are not https: keys fetched in clear
// text could be replaced on the way.
func checkHTTPS(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("%q: must be an https:// URL", raw)
	}
	return nil
}
