package pelicantest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestDoubleRefusesWhatPelicanRefuses: the double is only worth its
// passes if it fails what Pelican fails: a registration whose challenge
// is signed by another key, ads whose token is signed by an unregistered
// key, lacks the scope, names no kid; and it records what Pelican lets
// pass but its own cache never sends (a long token, another audience,
// missing fields).
func TestDoubleRefusesWhatPelicanRefuses(t *testing.T) {
	f := Start(t, Options{})
	cl := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: f.Pool()}}}
	post := func(path, tok string, body any) (int, string) {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", f.URL+path, bytes.NewReader(b))
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		out, _ := json.Marshal(m)
		return resp.StatusCode, string(out)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	jwks := map[string]any{"keys": []any{ecJWK(&key.PublicKey, "k1")}}
	register := func(signer *ecdsa.PrivateKey) (int, string) {
		nonce := newID() + newID()
		code, body := post("/api/v1.0/registry", "", map[string]any{"client_nonce": nonce, "pubkey": jwks})
		if code != 200 {
			t.Fatalf("challenge: %d %s", code, body)
		}
		var ch map[string]string
		json.Unmarshal([]byte(body), &ch)
		sig, _ := ecdsa.SignASN1(rand.Reader, signer, sha([]byte(nonce+ch["server_nonce"])))
		return post("/api/v1.0/registry", "", map[string]any{"pubkey": jwks, "prefix": "/caches/site1", "site_name": "site1",
			"client_nonce": nonce, "server_nonce": ch["server_nonce"], "client_payload": nonce + ch["server_nonce"],
			"client_signature": hex.EncodeToString(sig), "server_payload": ch["server_payload"], "server_signature": ch["server_signature"],
			"identity_required": "false", "server_id": "abc1234"})
	}
	if code, body := register(other); code != 500 || !strings.Contains(body, "client verified:false") {
		t.Fatalf("a challenge signed by another key: %d %s", code, body)
	}
	if code, body := register(key); code != 201 {
		t.Fatalf("registration: %d %s", code, body)
	}
	now := time.Now().Unix()
	claims := func(mut func(map[string]any)) map[string]any {
		c := map[string]any{"iss": "https://c", "sub": "https://c", "aud": wlcgAudience(f.URL), "scope": "pelican.advertise",
			"iat": now, "nbf": now, "exp": now + 60, "jti": newID()}
		if mut != nil {
			mut(c)
		}
		return c
	}
	ad := func(mut func(map[string]any)) map[string]any {
		a := map[string]any{"name": "site1", "startTime": now, "instanceID": newID(), "generationID": 1, "version": "7.16.0",
			"expiry": time.Now().Add(15 * time.Minute), "serverId": "abc1234", "registry-prefix": "/caches/site1",
			"data-url": "https://c:8443", "web-url": "https://c:8443", "capabilities": map[string]bool{}, "namespaces": []any{},
			"token-issuer": []any{}, "storageType": "", "directorTest": false, "downtimes": []any{}, "requiredFeatures": []any{},
			"now": time.Now(), "status": "ok"}
		if mut != nil {
			mut(a)
		}
		return a
	}
	for _, c := range []struct {
		name string
		tok  string
		ad   map[string]any
		code int
	}{
		{"good", signES256(key, "k1", claims(nil)), ad(nil), 200},
		{"another key", signES256(other, "k1", claims(nil)), ad(nil), 403},
		{"unknown kid", signES256(key, "k2", claims(nil)), ad(nil), 403},
		{"no scope", signES256(key, "k1", claims(func(c map[string]any) { c["scope"] = "storage.read:/" })), ad(nil), 403},
		{"expired", signES256(key, "k1", claims(func(c map[string]any) { c["exp"] = now - 120 })), ad(nil), 403},
		{"not a cache prefix", signES256(key, "k1", claims(nil)), ad(func(a map[string]any) { a["registry-prefix"] = "/origins/site1" }), 403},
		{"old version", signES256(key, "k1", claims(nil)), ad(func(a map[string]any) { a["version"] = "7.10.0" }), 400},
		{"plain http data URL", signES256(key, "k1", claims(nil)), ad(func(a map[string]any) { a["data-url"] = "http://c:8000" }), 400},
		{"another server id", signES256(key, "k1", claims(nil)), ad(func(a map[string]any) { a["serverId"] = "zzz9999" }), 400},
	} {
		if code, body := post("/api/v1.0/director/registerCache", c.tok, c.ad); code != c.code {
			t.Errorf("%s: %d %s; want %d", c.name, code, body, c.code)
		}
	}
	n := len(f.Errors())
	// Pelican's director accepts these; its caches never send them.
	post("/api/v1.0/director/registerCache", signES256(key, "k1", claims(func(c map[string]any) { c["exp"] = now + 3600 })), ad(nil))
	post("/api/v1.0/director/registerCache", signES256(key, "k1", claims(func(c map[string]any) { c["aud"] = "https://elsewhere" })), ad(nil))
	if errs := f.Errors()[n:]; len(errs) != 2 || !strings.Contains(errs[0], "lifetime") || !strings.Contains(errs[1], "audience") {
		t.Fatalf("recorded %q; want the lifetime and the audience", errs)
	}
	if len(f.Ads()) != 3 {
		t.Fatalf("%d ads accepted; want 3", len(f.Ads()))
	}
}
