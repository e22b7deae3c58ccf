package pelican

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The federation's REST API, as Pelican's services serve it. Paths and
// fields are those of PelicanPlatform/pelican: discovery
// (config/config.go, /.well-known/pelican-configuration), the registry
// (registry/registry.go RegisterRegistryAPI), the director
// (director/director.go RegisterDirectorAPI) and the structures of
// server_structs/director.go and server_structs/registry.go.

// federation is what discovery says.
type federation struct {
	Discovery string `json:"discovery_endpoint"`
	Director  string `json:"director_endpoint"`
	Registry  string `json:"namespace_registration_endpoint"`
	JWKS      string `json:"jwks_uri"`
}

// Bounds on what is read of a response.
const (
	maxSmallBody     = 1 << 20
	maxNamespaceBody = 64 << 20 // the OSDF lists some thousand namespaces
)

// client speaks to the federation's services.
type client struct {
	http *http.Client
	ua   string
}

func newClient(cfg *Config) *client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12}
	tr.MaxIdleConnsPerHost = 4
	return &client{http: &http.Client{Transport: tr, Timeout: cfg.RequestTimeout}, ua: cfg.UserAgent}
}

func (c *client) close() { c.http.CloseIdleConnections() }

// caHint says what to do about a federation whose certificates the cache
// does not trust (a federation with its own CA, as any test or private
// one): the error alone ("x509: certificate signed by unknown authority")
// does not name the setting.
func caHint(err error) string {
	var ua x509.UnknownAuthorityError
	if errors.As(err, &ua) {
		return " (the federation's certificates are signed by a CA this cache does not trust: add its CA file to security.origin_ca_paths)"
	}
	return ""
}

// apiError is an answer other than success from a federation service,
// with its status, its message and, for 429 and 503, how long to wait.
type apiError struct {
	Method, URL string
	Status      int
	Msg         string
	// RetryAfter is the Retry-After of a 429 or 503 (0 without one).
	RetryAfter time.Duration
	// Approval marks the director's "not approved by an administrator".
	Approval bool
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.URL, e.Status, http.StatusText(e.Status), e.Msg)
}

// retryable reports a "not now" (429, 503) as against a "no".
func (e *apiError) retryable() bool {
	return e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable
}

// do sends a request with a JSON body (nil: none) and decodes a 2xx JSON
// answer into out (nil: ignored). Errors never contain the Authorization
// header's token.
func (c *client) do(ctx context.Context, method, u, bearer string, body, out any, limit int64) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, fmt.Errorf("%s %s: encode: %w", method, u, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, u, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.ua)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w%s", method, u, err, caHint(err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%s %s: reading the answer: %w", method, u, err)
	}
	if int64(len(b)) > limit {
		return resp.StatusCode, fmt.Errorf("%s %s: answer larger than %d bytes", method, u, limit)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e := &apiError{Method: method, URL: u, Status: resp.StatusCode, Msg: message(b)}
		if e.retryable() {
			e.RetryAfter = retryAfter(resp.Header.Get("Retry-After"))
		}
		var ap struct {
			Approval bool `json:"approval_error"`
		}
		if json.Unmarshal(b, &ap) == nil {
			e.Approval = ap.Approval
		}
		return resp.StatusCode, e
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: answer is not the JSON expected: %w", method, u, err)
		}
	}
	return resp.StatusCode, nil
}

// message is the human text of an error answer: Pelican's
// {"status":"error","msg":...}, the director's {"error":...}, else the
// body itself, bounded.
func message(b []byte) string {
	var m struct {
		Msg   string `json:"msg"`
		Error string `json:"error"`
	}
	if json.Unmarshal(b, &m) == nil {
		if m.Msg != "" {
			return m.Msg
		}
		if m.Error != "" {
			return m.Error
		}
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// retryAfter parses a Retry-After in seconds (what Pelican's services
// send); an HTTP date is honoured too. 0: none or unparseable.
func retryAfter(v string) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

// join appends path elements to a base URL.
func join(base string, elem ...string) string {
	u, err := url.JoinPath(base, elem...)
	if err != nil {
		return strings.TrimRight(base, "/") + "/" + strings.Join(elem, "/")
	}
	return u
}

// discover reads the federation's discovery document.
func (c *client) discover(ctx context.Context, fedURL string) (federation, error) {
	var f federation
	u := join(fedURL, ".well-known", "pelican-configuration")
	if _, err := c.do(ctx, http.MethodGet, u, "", nil, &f, maxSmallBody); err != nil {
		return f, fmt.Errorf("federation discovery: %w", err)
	}
	if f.Director == "" || f.Registry == "" {
		return f, fmt.Errorf("federation discovery %s: no director_endpoint or namespace_registration_endpoint", u)
	}
	if f.Discovery == "" {
		f.Discovery = fedURL
	}
	return f, nil
}

// keyStatus asks the registry whether prefix is registered and with this
// key (registry.go checkNamespaceExistsHandler).
func (c *client) keyStatus(ctx context.Context, registry, prefix string, k *Key) (exists, match bool, err error) {
	var res struct {
		Exists bool   `json:"prefix_exists"`
		Match  bool   `json:"key_match"`
		Msg    string `json:"message"`
	}
	req := map[string]string{"prefix": prefix, "pubkey": string(k.PublicJWK())}
	_, err = c.do(ctx, http.MethodPost, join(registry, "api", "v1.0", "registry", "checkNamespaceExists"), "", req, &res, maxSmallBody)
	return res.Exists, res.Match, err
}

// registerResult is what a registration did.
type registerResult struct {
	// Created is set when this call added the registration (201).
	Created bool
	// Msg is the registry's message.
	Msg string
}

// register runs the registry's key-sign challenge for prefix
// (registry.go keySignChallenge): a first POST with a client nonce and
// the public key set, answered with the registry's nonce, payload and
// signature; a second with the client's signature over both nonces. 201:
// created, pending approval where the federation requires it.
func (c *client) register(ctx context.Context, registry, prefix, site, serverID string, k *Key) (registerResult, error) {
	u := join(registry, "api", "v1.0", "registry")
	nonce, err := newNonce()
	if err != nil {
		return registerResult{}, err
	}
	jwks := k.PublicJWKS()
	var challenge struct {
		ServerNonce     string `json:"server_nonce"`
		ClientNonce     string `json:"client_nonce"`
		ServerPayload   string `json:"server_payload"`
		ServerSignature string `json:"server_signature"`
	}
	if _, err := c.do(ctx, http.MethodPost, u, "", map[string]any{"client_nonce": nonce, "pubkey": jwks}, &challenge, maxSmallBody); err != nil {
		return registerResult{}, fmt.Errorf("registration of %s: %w", prefix, err)
	}
	if challenge.ServerNonce == "" || challenge.ServerSignature == "" || challenge.ClientNonce != nonce {
		return registerResult{}, fmt.Errorf("registration of %s: the registry's challenge is incomplete or answers another nonce", prefix)
	}
	payload := nonce + challenge.ServerNonce
	sig, err := k.SignASN1([]byte(payload))
	if err != nil {
		return registerResult{}, fmt.Errorf("registration of %s: sign: %w", prefix, err)
	}
	commit := map[string]any{
		"pubkey":            jwks,
		"prefix":            prefix,
		"site_name":         site,
		"client_nonce":      nonce,
		"server_nonce":      challenge.ServerNonce,
		"client_payload":    payload,
		"client_signature":  fmt.Sprintf("%x", sig),
		"server_payload":    challenge.ServerPayload,
		"server_signature":  challenge.ServerSignature,
		"access_token":      "",
		"identity_required": "false",
		"server_id":         serverID,
	}
	var res struct {
		Msg string `json:"message"`
	}
	status, err := c.do(ctx, http.MethodPost, u, "", commit, &res, maxSmallBody)
	if err != nil {
		return registerResult{}, fmt.Errorf("registration of %s: %w", prefix, err)
	}
	return registerResult{Created: status == http.StatusCreated, Msg: res.Msg}, nil
}

// approved asks the registry whether prefix is approved
// (registry.go checkApprovalHandler).
func (c *client) approved(ctx context.Context, registry, prefix string) (bool, error) {
	var res struct {
		Approved bool `json:"approved"`
	}
	_, err := c.do(ctx, http.MethodPost, join(registry, "api", "v1.0", "registry", "checkNamespaceStatus"), "", map[string]string{"prefix": prefix}, &res, maxSmallBody)
	return res.Approved, err
}

// rawNamespaces reads the director's namespace list (director.go
// listNamespacesV2), each entry as the director wrote it.
func (c *client) rawNamespaces(ctx context.Context, director string) ([]json.RawMessage, error) {
	var ns []json.RawMessage
	if _, err := c.do(ctx, http.MethodGet, join(director, "api", "v2.0", "director", "listNamespaces"), "", nil, &ns, maxNamespaceBody); err != nil {
		return nil, fmt.Errorf("namespace list: %w", err)
	}
	return ns, nil
}

// advertise sends an ad (director.go registerServerAd, with the cache
// server type).
func (c *client) advertise(ctx context.Context, director, tok string, ad *advertisement) error {
	_, err := c.do(ctx, http.MethodPost, join(director, "api", "v1.0", "director", "registerCache"), tok, ad, nil, maxSmallBody)
	return err
}

// fedToken asks the director for a federation token (fed_token.go
// getFedToken), proving membership with an advertisement token.
func (c *client) fedToken(ctx context.Context, director, advTok, site string) (string, error) {
	q := url.Values{"host": {site}, "sType": {"Cache"}}
	u := join(director, "api", "v1.0", "director", "getFedToken") + "?" + q.Encode()
	var res struct {
		Token string `json:"access_token"`
		Error string `json:"error"`
	}
	if _, err := c.do(ctx, http.MethodGet, u, advTok, nil, &res, maxSmallBody); err != nil {
		return "", fmt.Errorf("federation token: %w", err)
	}
	if res.Token == "" {
		if res.Error != "" {
			return "", fmt.Errorf("federation token: the director answered %q", res.Error)
		}
		return "", errors.New("federation token: the director answered no token")
	}
	return res.Token, nil
}
