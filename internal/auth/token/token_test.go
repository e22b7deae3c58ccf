package token

import (
	"context"
	"encoding/base64"
	"errors"
	"github.com/hepcache/hepcache/internal/eventually"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/auth/authtest"
)

const aud = "https://cache.example:1094"

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func fileVerifier(t *testing.T, is *authtest.Issuer, mut func(*Config)) (*Verifier, *clock) {
	t.Helper()
	cfg := &Config{Issuers: []Issuer{{Issuer: is.URL, JWKSFile: is.WriteJWKS(t, t.TempDir(), "jwks.json")}}, Audiences: []string{aud}}
	if mut != nil {
		mut(cfg)
	}
	clk := &clock{t: time.Now()}
	v, err := newVerifier(cfg, clk.now, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v, clk
}

func TestVerifyAlgorithms(t *testing.T) {
	is := authtest.NewIssuer(t, "https://issuer.example", 0)
	v, _ := fileVerifier(t, is, nil)
	for _, alg := range []string{"RS256", "ES256"} {
		t.Run(alg, func(t *testing.T) {
			tok := is.Sign(t, alg, authtest.Claims{"sub": "alice", "aud": aud, "scope": "storage.read:/store openid", "wlcg.groups": []string{"/cms", "/cms/uscms"}})
			c, err := v.Verify(context.Background(), tok)
			if err != nil {
				t.Fatal(err)
			}
			if c.Subject != "alice" || c.Issuer != is.URL || c.Profile != "wlcg" {
				t.Errorf("claims %+v", c)
			}
			if len(c.Groups) != 2 || c.Groups[1] != "/cms/uscms" {
				t.Errorf("groups %q", c.Groups)
			}
			if !c.Allows("read", "/store/mc/f.root") || c.Allows("read", "/other") || c.Allows("stage", "/store/f") {
				t.Errorf("scopes %v", c.Scopes)
			}
			if !c.HasScope("openid") || c.HasScope("storage.read:/store") || len(c.OtherScopes) != 1 {
				t.Errorf("other scopes %q; want [openid]", c.OtherScopes)
			}
		})
	}
}

func TestVerifyRejects(t *testing.T) {
	is := authtest.NewIssuer(t, "https://issuer.example", 0)
	other := authtest.NewIssuer(t, "https://issuer.example", 1) // same name, other keys
	v, _ := fileVerifier(t, is, nil)
	now := time.Now().Unix()
	good := authtest.Claims{"sub": "a", "aud": aud, "scope": "storage.read:/"}
	with := func(kv ...any) authtest.Claims {
		c := authtest.Claims{}
		for k, v := range good {
			c[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			c[kv[i].(string)] = kv[i+1]
		}
		return c
	}
	tamper := func(tok string) string {
		parts := strings.Split(tok, ".")
		p, _ := b64(parts[1])
		p = []byte(strings.Replace(string(p), `"sub":"a"`, `"sub":"b"`, 1))
		return parts[0] + "." + b64u(p) + "." + parts[2]
	}
	cases := []struct {
		name, tok, want string
	}{
		{"expired", is.Sign(t, "RS256", with("exp", now-120)), "expired"},
		{"no exp", is.Sign(t, "RS256", with("exp", nil)), "no expiry"},
		{"not yet valid", is.Sign(t, "RS256", with("nbf", now+600)), "not valid before"},
		{"issued in future", is.Sign(t, "RS256", with("iat", now+600)), "future"},
		{"wrong audience", is.Sign(t, "RS256", with("aud", "https://elsewhere")), "audience"},
		{"no audience", is.Sign(t, "RS256", with("aud", nil)), "aud"},
		{"untrusted issuer", is.Sign(t, "RS256", with("iss", "https://evil.example")), "not trusted"},
		{"signed by other key", other.Sign(t, "RS256", good), "bad signature"},
		{"tampered payload", tamper(is.Sign(t, "ES256", good)), "bad signature"},
		{"alg none", is.SignRaw(t, []byte(`{"alg":"none"}`), []byte(`{"iss":"`+is.URL+`"}`)), "algorithm"},
		{"alg HS256", is.SignRaw(t, []byte(`{"alg":"HS256"}`), []byte(`{"iss":"`+is.URL+`"}`)), "algorithm"},
		{"crit header", is.SignRaw(t, []byte(`{"alg":"RS256","kid":"rsa1","crit":["exp"]}`), []byte(`{"iss":"`+is.URL+`"}`)), "critical"},
		{"wlcg scope without path", is.Sign(t, "RS256", with("scope", "storage.read")), "needs a path"},
		{"scope with dotdot", is.Sign(t, "RS256", with("scope", "storage.read:/store/../etc")), "'..'"},
		{"relative scope", is.Sign(t, "RS256", with("scope", "storage.read:store")), "not absolute"},
		{"group not a path", is.Sign(t, "RS256", with("wlcg.groups", []string{"cms"})), "group"},
		{"two parts", "abc.def", "not a JWT"},
		{"padding", strings.Replace(is.Sign(t, "RS256", good), ".", "=.", 1), "header"},
		{"oversize", strings.Repeat("a", 20000), "longer than"},
		{"garbage json", b64u([]byte(`{"alg":"RS256"`)) + ".e30.AA", "header"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := v.Verify(context.Background(), tc.tok)
			if err == nil {
				t.Fatalf("accepted: %+v", c)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

func b64u(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func TestClockSkew(t *testing.T) {
	is := authtest.NewIssuer(t, "https://issuer.example", 0)
	v, clk := fileVerifier(t, is, func(c *Config) { c.ClockSkew = 30 * time.Second })
	tok := is.Sign(t, "ES256", authtest.Claims{"sub": "a", "aud": aud})
	clk.add(time.Hour + 20*time.Second) // 20 s past exp: within the skew
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatalf("within skew: %v", err)
	}
	clk.add(20 * time.Second) // 40 s past exp
	if _, err := v.Verify(context.Background(), tok); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("past skew: %v", err)
	}
	v2, clk2 := fileVerifier(t, is, func(c *Config) { c.ClockSkew = 30 * time.Second })
	clk2.add(-20 * time.Second) // the cache's clock is behind the issuer's
	if _, err := v2.Verify(context.Background(), is.Sign(t, "RS256", authtest.Claims{"sub": "a", "aud": aud})); err != nil {
		t.Fatalf("nbf within skew: %v", err)
	}
}

func TestAudienceListAndBasePath(t *testing.T) {
	is := authtest.NewIssuer(t, "https://scitokens.example", 0)
	v, _ := fileVerifier(t, is, func(c *Config) {
		c.Issuers[0].Audiences = []string{"ANY", aud}
		c.Issuers[0].BasePath = "/store/user"
	})
	tok := is.Sign(t, "RS256", authtest.Claims{"sub": "bob", "aud": []string{"x", "ANY"}, "ver": "scitoken:2.0", "wlcg.ver": nil, "scope": "read:/bob write:/bob/out read"})
	c, err := v.Verify(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	if c.Profile != "scitokens" {
		t.Errorf("profile %q", c.Profile)
	}
	for _, tc := range []struct {
		op, path string
		ok       bool
	}{
		{"read", "/store/user/bob/f.root", true},
		{"read", "/store/user/bob", true},
		{"read", "/store/user/bobby/f", true}, // "read" alone covers the whole base path
		{"read", "/store/data/f", false},
		{"modify", "/store/user/bob/out/x", true},
		{"modify", "/store/user/bob/x", false},
	} {
		if got := c.Allows(tc.op, tc.path); got != tc.ok {
			t.Errorf("Allows(%s, %s) = %v, want %v (scopes %v)", tc.op, tc.path, got, tc.ok, c.Scopes)
		}
	}
}

// TestRestrictedPaths: restricted_path bounds what an issuer's scopes
// grant, whatever the token claims (a base path of "/" with the
// restriction /store/cms: storage.read:/ reads only below /store/cms).
func TestRestrictedPaths(t *testing.T) {
	is := authtest.NewIssuer(t, "https://scitokens.example", 0)
	v, _ := fileVerifier(t, is, func(c *Config) {
		c.Issuers[0].RestrictedPaths = []string{"/store/cms", "/store/mc/"}
	})
	tok := is.Sign(t, "RS256", authtest.Claims{"sub": "bob", "aud": aud, "scope": "storage.read:/ storage.stage:/store/cms/user storage.read:/other"})
	c, err := v.Verify(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		op, path string
		ok       bool
	}{
		{"read", "/store/cms/f.root", true},
		{"read", "/store/mc/f.root", true},
		{"read", "/store/data/f.root", false},
		{"read", "/other/f", false},
		{"read", "/f", false},
		{"stage", "/store/cms/user/x", true},
		{"stage", "/store/cms/x", false},
	} {
		if got := c.Allows(tc.op, tc.path); got != tc.ok {
			t.Errorf("Allows(%s, %s) = %v, want %v (scopes %v)", tc.op, tc.path, got, tc.ok, c.Scopes)
		}
	}
}

func TestPathCovers(t *testing.T) {
	for _, tc := range []struct {
		prefix, p string
		want      bool
	}{
		{"/", "/a", true}, {"/store", "/store", true}, {"/store", "/store/a", true},
		{"/store", "/storefoo", false}, {"/store", "/", false}, {"/store/a", "/store", false},
	} {
		if got := PathCovers(tc.prefix, tc.p); got != tc.want {
			t.Errorf("PathCovers(%q, %q) = %v", tc.prefix, tc.p, got)
		}
	}
}

// TestDiscoveryCacheAndRefresh fetches keys from the issuer's URL through
// discovery, caches them, refreshes them when old, follows a key rotation
// and does not let tokens with unknown key ids hammer the issuer.
func TestDiscoveryCacheAndRefresh(t *testing.T) {
	ca := authtest.NewCA(t, "Test CA")
	is := authtest.NewIssuer(t, "", 0)
	is.Serve(t, ca)
	clk := &clock{t: time.Now()}
	v, err := newVerifier(&Config{Issuers: []Issuer{{Issuer: is.URL}}, Audiences: []string{aud}, RootCAs: authtest.Pool(ca),
		KeyRefresh: time.Hour, KeyMinRefresh: time.Minute}, clk.now, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	ctx := context.Background()
	verify := func(tok string) error { _, err := v.Verify(ctx, tok); return err }

	if err := verify(is.Sign(t, "ES256", authtest.Claims{"sub": "a", "aud": aud})); err != nil {
		t.Fatal(err)
	}
	if n := is.Requests.Load(); n != 2 {
		t.Fatalf("first token: %d requests to the issuer, want 2 (discovery + JWKS)", n)
	}
	for i := 0; i < 5; i++ {
		if err := verify(is.Sign(t, "RS256", authtest.Claims{"sub": "a", "aud": aud})); err != nil {
			t.Fatal(err)
		}
	}
	if n := is.Requests.Load(); n != 2 {
		t.Fatalf("cached keys: %d requests, want still 2", n)
	}

	// Rotation: a token with a new kid makes one reload, after the minimum
	// interval has passed.
	is.RotateEC(t, "ec2")
	rotated := is.Sign(t, "ES256", authtest.Claims{"sub": "a", "aud": aud})
	if err := verify(rotated); err == nil || !strings.Contains(err.Error(), `kid "ec2"`) {
		t.Fatalf("new kid within the minimum refresh interval: %v", err)
	}
	if n := is.Requests.Load(); n != 2 {
		t.Fatalf("unknown kid right after a load: %d requests, want 2", n)
	}
	clk.add(2 * time.Minute)
	if err := verify(rotated); err != nil {
		t.Fatalf("after rotation: %v", err)
	}
	if n := is.Requests.Load(); n != 4 {
		t.Fatalf("rotation: %d requests, want 4", n)
	}
	// Made-up key ids: at most one reload per minimum interval.
	for i := 0; i < 20; i++ {
		tok := is.SignRaw(t, []byte(`{"alg":"RS256","kid":"bogus`+string(rune('a'+i))+`"}`), []byte(`{"iss":"`+is.URL+`","aud":"`+aud+`","exp":9999999999}`))
		if verify(tok) == nil {
			t.Fatal("bogus kid accepted")
		}
	}
	if n := is.Requests.Load(); n != 4 {
		t.Fatalf("bogus kids: %d requests, want 4", n)
	}

	// Old keys are refreshed in the background; the token is not delayed.
	clk.add(2 * time.Hour)
	if err := verify(is.Sign(t, "ES256", authtest.Claims{"sub": "a", "aud": aud, "exp": time.Now().Add(3 * time.Hour).Unix()})); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return is.Requests.Load() == 6 })
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	eventually.True(t, cond, "the background key refresh")
}

func TestIssuerUnreachable(t *testing.T) {
	is := authtest.NewIssuer(t, "https://127.0.0.1:1", 0)
	v, err := New(&Config{Issuers: []Issuer{{Issuer: is.URL}}, Audiences: []string{aud}, FetchTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	_, err = v.Verify(context.Background(), is.Token(t, "a", "storage.read:/", aud))
	if err == nil || !strings.Contains(err.Error(), "refresh failed") {
		t.Fatalf("unreachable issuer: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	_, err := New(&Config{Issuers: []Issuer{{Issuer: "http://plain.example"}, {Issuer: "https://a.example"}, {Issuer: ""}}})
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, want := range []string{"https://", "no audience", "no issuer URL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}
