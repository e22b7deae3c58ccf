package authtest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Issuer is a test token issuer with an RSA (RS256) and an EC (ES256)
// key.
type Issuer struct {
	// URL is the issuer ("iss"); set by Serve, or given to NewIssuer.
	URL      string
	RSA      *rsa.PrivateKey
	EC       *ecdsa.PrivateKey
	RSAKid   string
	ECKid    string
	Requests atomic.Int64 // HTTP requests the served issuer answered

	// mu protects jwks (replaceable to test key rotation).
	mu   sync.Mutex
	jwks []byte
}

// NewIssuer makes an issuer named url with RSA key rsaIndex.
func NewIssuer(tb testing.TB, url string, rsaIndex int) *Issuer {
	tb.Helper()
	is := &Issuer{URL: url, RSA: RSAKey(tb, rsaIndex), EC: ECKey(tb), RSAKid: "rsa1", ECKid: "ec1"}
	is.jwks = is.makeJWKS()
	return is
}

func b64u(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func (is *Issuer) makeJWKS() []byte {
	x := make([]byte, 32)
	y := make([]byte, 32)
	is.EC.PublicKey.X.FillBytes(x)
	is.EC.PublicKey.Y.FillBytes(y)
	doc := map[string]any{"keys": []map[string]string{
		{"kty": "RSA", "kid": is.RSAKid, "use": "sig", "alg": "RS256", "n": b64u(is.RSA.N.Bytes()), "e": b64u(big.NewInt(int64(is.RSA.E)).Bytes())},
		{"kty": "EC", "kid": is.ECKid, "use": "sig", "crv": "P-256", "x": b64u(x), "y": b64u(y)},
	}}
	b, _ := json.Marshal(doc)
	return b
}

// JWKS returns the key set document the issuer publishes.
func (is *Issuer) JWKS() []byte {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.jwks
}

// SetJWKS replaces the published key set (key rotation).
func (is *Issuer) SetJWKS(b []byte) {
	is.mu.Lock()
	is.jwks = b
	is.mu.Unlock()
}

// RotateEC replaces the EC key and its kid, and republishes the keys.
func (is *Issuer) RotateEC(tb testing.TB, kid string) {
	is.mu.Lock()
	is.EC = ECKey(tb)
	is.ECKid = kid
	is.jwks = is.makeJWKS()
	is.mu.Unlock()
}

// WriteJWKS writes the key set to dir/name and returns the path.
func (is *Issuer) WriteJWKS(tb testing.TB, dir, name string) string {
	tb.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, is.JWKS(), 0o644); err != nil {
		tb.Fatal(err)
	}
	return p
}

// Serve publishes the issuer over https with a certificate from ca
// (discovery document and JWKS) and sets URL to the server's address.
func (is *Issuer) Serve(tb testing.TB, ca *CA) *httptest.Server {
	tb.Helper()
	host := ca.Host(tb, "127.0.0.1", "localhost")
	mux := http.NewServeMux()
	var srv *httptest.Server
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		is.Requests.Add(1)
		json.NewEncoder(w).Encode(map[string]string{"issuer": is.URL, "jwks_uri": srv.URL + "/jwks"})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		is.Requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write(is.JWKS())
	})
	srv = httptest.NewUnstartedServer(mux)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{host.Cert.Raw}, PrivateKey: host.Key}}}
	srv.StartTLS()
	tb.Cleanup(srv.Close)
	is.URL = srv.URL
	return srv
}

// Claims are the claims of a test token; Token fills iss, iat, nbf, exp,
// jti and wlcg.ver unless set.
type Claims map[string]any

// Token signs a WLCG-profile token for sub with the given scope and
// audience, valid for an hour, with RS256.
func (is *Issuer) Token(tb testing.TB, sub, scope, aud string) string {
	tb.Helper()
	return is.Sign(tb, "RS256", Claims{"sub": sub, "scope": scope, "aud": aud})
}

// Sign signs claims with alg ("RS256" or "ES256"), filling the usual
// claims that are missing (set a claim to nil to leave it out).
func (is *Issuer) Sign(tb testing.TB, alg string, c Claims) string {
	tb.Helper()
	now := time.Now().Unix()
	full := Claims{"iss": is.URL, "iat": now, "nbf": now - 1, "exp": now + 3600, "jti": "t" + nextSerial().String(), "wlcg.ver": "1.0"}
	for k, v := range c {
		if v == nil {
			delete(full, k)
			continue
		}
		full[k] = v
	}
	is.mu.Lock()
	kid := is.RSAKid
	if alg == "ES256" {
		kid = is.ECKid
	}
	ec := is.EC
	is.mu.Unlock()
	hdr, _ := json.Marshal(map[string]string{"alg": alg, "typ": "JWT", "kid": kid})
	body, _ := json.Marshal(full)
	signed := b64u(hdr) + "." + b64u(body)
	sum := sha256.Sum256([]byte(signed))
	var sig []byte
	switch alg {
	case "RS256":
		var err error
		if sig, err = rsa.SignPKCS1v15(rand.Reader, is.RSA, crypto.SHA256, sum[:]); err != nil {
			tb.Fatal(err)
		}
	case "ES256":
		r, s, err := ecdsa.Sign(rand.Reader, ec, sum[:])
		if err != nil {
			tb.Fatal(err)
		}
		sig = make([]byte, 64)
		r.FillBytes(sig[:32])
		s.FillBytes(sig[32:])
	default:
		tb.Fatalf("alg %s", alg)
	}
	return signed + "." + b64u(sig)
}

// SignRaw signs an arbitrary header and payload with the RSA key (for
// negative tests: alg "none", crit, ...).
func (is *Issuer) SignRaw(tb testing.TB, header, payload []byte) string {
	tb.Helper()
	signed := b64u(header) + "." + b64u(payload)
	sum := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, is.RSA, crypto.SHA256, sum[:])
	if err != nil {
		tb.Fatal(err)
	}
	return signed + "." + b64u(sig)
}
