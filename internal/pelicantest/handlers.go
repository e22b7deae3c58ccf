package pelicantest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// reply answers JSON as Pelican's gin handlers do.
func reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// refuse answers Pelican's SimpleApiResp error.
func refuse(w http.ResponseWriter, code int, msg string) {
	reply(w, code, map[string]string{"status": "error", "msg": msg})
}

func (f *Federation) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	for _, t := range []string{r.Header.Get("Authorization"), r.URL.Query().Get("authz")} {
		if t = strings.TrimPrefix(t, "Bearer "); t != "" {
			f.tokens = append(f.tokens, t)
		}
	}
	down := f.down
	var inj *Failure
	if q := f.fail[r.URL.Path]; len(q) > 0 {
		inj = &q[0]
		f.fail[r.URL.Path] = q[1:]
	}
	f.mu.Unlock()
	if down {
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				c.Close()
				return
			}
		}
		refuse(w, http.StatusServiceUnavailable, "down")
		return
	}
	if inj != nil {
		if inj.RetryAfter != "" {
			w.Header().Set("Retry-After", inj.RetryAfter)
		}
		refuse(w, inj.Status, "injected failure")
		return
	}
	p := r.URL.Path
	switch {
	case p == "/.well-known/pelican-configuration":
		reply(w, 200, map[string]string{"discovery_endpoint": f.URL, "director_endpoint": f.URL,
			"namespace_registration_endpoint": f.URL, "jwks_uri": f.URL + "/.well-known/issuer.jwks", "broker_endpoint": ""})
	case p == "/.well-known/issuer.jwks":
		reply(w, 200, map[string]any{"keys": []any{ecJWK(&f.fedKey.PublicKey, "federation")}})
	case p == "/api/v1.0/origin/.well-known/openid-configuration":
		reply(w, 200, map[string]string{"issuer": f.IssuerURL(), "jwks_uri": f.IssuerURL() + "/.well-known/issuer.jwks"})
	case p == "/api/v1.0/origin/.well-known/issuer.jwks":
		reply(w, 200, map[string]any{"keys": []any{ecJWK(&f.orgKey.PublicKey, "origin")}})
	case p == "/api/v1.0/registry" && r.Method == http.MethodPost:
		f.register(w, r)
	case p == "/api/v1.0/registry/checkNamespaceExists" && r.Method == http.MethodPost:
		f.checkExists(w, r)
	case p == "/api/v1.0/registry/checkNamespaceStatus" && r.Method == http.MethodPost:
		f.checkStatus(w, r)
	case strings.HasPrefix(p, "/api/v1.0/registry/") && strings.HasSuffix(p, "/.well-known/issuer.jwks"):
		f.prefixJWKS(w, strings.TrimSuffix(strings.TrimPrefix(p, "/api/v1.0/registry"), "/.well-known/issuer.jwks"))
	case p == "/api/v1.0/director/registerCache" && r.Method == http.MethodPost:
		f.registerCache(w, r)
	case p == "/api/v2.0/director/listNamespaces":
		reply(w, 200, f.namespaceList())
	case p == "/api/v1.0/director_ui/servers":
		reply(w, 200, f.servers())
	case p == "/api/v1.0/director/getFedToken":
		f.getFedToken(w, r)
	case strings.HasPrefix(p, "/api/v1.0/director/origin/"):
		f.redirect(w, r, strings.TrimPrefix(p, "/api/v1.0/director/origin"), false)
	case strings.HasPrefix(p, "/api/v1.0/director/object/"):
		f.redirect(w, r, strings.TrimPrefix(p, "/api/v1.0/director/object"), true)
	case strings.HasPrefix(p, "/api/v1.0/director/healthTest/"):
		f.healthTest(w, r, strings.TrimPrefix(p, "/api/v1.0/director/healthTest"))
	case strings.HasPrefix(p, "/api/v1.0/origin/data/"):
		f.origin(w, r, strings.TrimPrefix(p, "/api/v1.0/origin/data"))
	default:
		refuse(w, http.StatusNotFound, "no such endpoint in the double: "+r.Method+" "+p)
	}
}

// decode reads a JSON body (bounded).
func decode(r *http.Request, v any) error {
	return json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(v)
}

// register is the registry's key-sign challenge (registry/registry.go
// cliRegisterNamespace, keySignChallengeInit, keySignChallengeCommit).
func (f *Federation) register(w http.ResponseWriter, r *http.Request) {
	var d struct {
		ClientNonce      string          `json:"client_nonce"`
		ClientPayload    string          `json:"client_payload"`
		ClientSignature  string          `json:"client_signature"`
		ServerNonce      string          `json:"server_nonce"`
		ServerPayload    string          `json:"server_payload"`
		ServerSignature  string          `json:"server_signature"`
		Pubkey           json.RawMessage `json:"pubkey"`
		Prefix           string          `json:"prefix"`
		ServerID         string          `json:"server_id"`
		SiteName         string          `json:"site_name"`
		IdentityRequired string          `json:"identity_required"`
	}
	if err := decode(r, &d); err != nil {
		refuse(w, http.StatusBadRequest, f.check("registration: body: %v", err))
		return
	}
	if d.IdentityRequired != "false" && d.IdentityRequired != "" {
		refuse(w, http.StatusBadRequest, f.check("registration: identity_required %q: automated registrations send \"false\"", d.IdentityRequired))
		return
	}
	switch {
	case d.ClientNonce != "" && d.ClientSignature != "" && d.ServerNonce != "" && d.ServerPayload != "" && d.ServerSignature != "":
	case d.ClientNonce != "":
		// The challenge: the registry signs client nonce + the (empty)
		// server nonce of the request, as keySignChallengeInit does.
		if len(d.ClientNonce) != 64 {
			f.check("registration: client nonce of %d characters, Pelican's are 64 (32 bytes hex)", len(d.ClientNonce))
		}
		serverNonce := newID() + newID()
		payload := []byte(d.ClientNonce + d.ServerNonce)
		sig, _ := ecdsa.SignASN1(rand.Reader, f.fedKey, sha(payload))
		reply(w, 200, map[string]string{"server_nonce": serverNonce, "client_nonce": d.ClientNonce,
			"server_payload": hex.EncodeToString(payload), "server_signature": hex.EncodeToString(sig)})
		return
	default:
		refuse(w, http.StatusBadRequest, f.check("registration: key sign challenge is missing parameters"))
		return
	}
	keys, err := parseJWKS(d.Pubkey)
	if err != nil {
		refuse(w, http.StatusBadRequest, f.check("registration: %v", err))
		return
	}
	first, err := firstKey(d.Pubkey)
	if err != nil {
		refuse(w, http.StatusBadRequest, f.check("registration: %v", err))
		return
	}
	csig, err1 := hex.DecodeString(d.ClientSignature)
	spay, err2 := hex.DecodeString(d.ServerPayload)
	ssig, err3 := hex.DecodeString(d.ServerSignature)
	if err1 != nil || err2 != nil || err3 != nil {
		refuse(w, http.StatusInternalServerError, f.check("registration: signatures and payloads must be hex"))
		return
	}
	clientOK := ecdsa.VerifyASN1(first, sha([]byte(d.ClientNonce+d.ServerNonce)), csig)
	serverOK := ecdsa.VerifyASN1(&f.fedKey.PublicKey, sha(spay), ssig)
	if d.ClientPayload != d.ClientNonce+d.ServerNonce {
		f.check("registration: client_payload is not client_nonce+server_nonce")
	}
	if !clientOK || !serverOK {
		refuse(w, http.StatusInternalServerError, f.check("registration: Unable to verify the client's public key, or an encountered an error with its own: server verified:%t, client verified:%t", serverOK, clientOK))
		return
	}
	prefix := strings.TrimRight(d.Prefix, "/")
	site, isCache := strings.CutPrefix(prefix, "/caches/")
	if !isCache || site == "" || strings.Contains(site, "/") {
		refuse(w, http.StatusBadRequest, f.check("registration: prefix %q: a cache registers /caches/<site>", d.Prefix))
		return
	}
	if strings.TrimSpace(d.SiteName) == "" {
		f.check("registration: no site_name")
	}
	if !regexp.MustCompile(`^[a-z0-9]{7}$`).MatchString(d.ServerID) {
		f.check("registration: server_id %q: Pelican servers send 7 characters of [a-z0-9]", d.ServerID)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.regs[prefix] != nil {
		reply(w, 200, map[string]string{"message": fmt.Sprintf("The prefix %s is already registered -- nothing else to do!", prefix)})
		return
	}
	for _, other := range f.regs {
		if other.ServerID == d.ServerID {
			refuse(w, http.StatusInternalServerError, "server id taken")
			return
		}
	}
	f.regs[prefix] = &Registration{Prefix: prefix, Site: d.SiteName, ServerID: d.ServerID, JWKS: d.Pubkey, keys: keys, Approved: !f.opts.RequireCacheApproval}
	reply(w, http.StatusCreated, map[string]string{"message": fmt.Sprintf("Prefix %s successfully registered", prefix)})
}

func sha(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}

// firstKey is the key at index 0, which the registry verifies the
// challenge with (registry_validation.go validateJwks).
func firstKey(jwks []byte) (*ecdsa.PublicKey, error) {
	var set struct {
		Keys []map[string]string `json:"keys"`
	}
	if err := json.Unmarshal(jwks, &set); err != nil || len(set.Keys) == 0 {
		return nil, fmt.Errorf("no key at index 0 of the key set")
	}
	return ecPublic(set.Keys[0])
}

// checkExists is registry.go checkNamespaceExistsHandler: the pubkey is
// one JWK, matched by kid and value.
func (f *Federation) checkExists(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Prefix string `json:"prefix"`
		PubKey string `json:"pubkey"`
	}
	if err := decode(r, &req); err != nil || req.Prefix == "" || req.PubKey == "" {
		refuse(w, http.StatusBadRequest, f.check("checkNamespaceExists: want prefix and pubkey"))
		return
	}
	var k map[string]string
	if err := json.Unmarshal([]byte(req.PubKey), &k); err != nil {
		refuse(w, http.StatusBadRequest, f.check("checkNamespaceExists: pubkey is not a JWK: %v", err))
		return
	}
	pub, err := ecPublic(k)
	if err != nil {
		refuse(w, http.StatusBadRequest, f.check("checkNamespaceExists: %v", err))
		return
	}
	f.mu.Lock()
	reg := f.regs[req.Prefix]
	f.mu.Unlock()
	if reg == nil {
		reply(w, 200, map[string]any{"prefix_exists": false, "message": "Prefix was not found in database"})
		return
	}
	got := reg.keys[k["kid"]]
	reply(w, 200, map[string]any{"prefix_exists": true, "key_match": got != nil && got.Equal(pub)})
}

// checkStatus is registry.go checkApprovalHandler.
func (f *Federation) checkStatus(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Prefix string `json:"prefix"`
	}
	if err := decode(r, &req); err != nil || req.Prefix == "" {
		refuse(w, http.StatusBadRequest, "prefix is required")
		return
	}
	f.mu.Lock()
	reg := f.regs[req.Prefix]
	f.mu.Unlock()
	if reg == nil {
		refuse(w, http.StatusBadRequest, fmt.Sprintf("The namespace %s does not exist in the registry", req.Prefix))
		return
	}
	reply(w, 200, map[string]bool{"approved": reg.Approved})
}

// prefixJWKS is the registry's key set of a prefix; 403 until approved
// (registry.go wildcardHandler).
func (f *Federation) prefixJWKS(w http.ResponseWriter, prefix string) {
	f.mu.Lock()
	reg := f.regs[prefix]
	f.mu.Unlock()
	switch {
	case reg == nil:
		refuse(w, http.StatusNotFound, fmt.Sprintf("namespace prefix '%s', was not found", prefix))
	case !reg.Approved:
		refuse(w, http.StatusForbidden, "The cache has not been approved by federation administrator")
	default:
		w.Header().Set("Content-Type", "application/json")
		w.Write(reg.JWKS)
	}
}

// registerCache is director.go registerServerAd for a cache.
func (f *Federation) registerCache(w http.ResponseWriter, r *http.Request) {
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "Bearer ") {
		refuse(w, http.StatusForbidden, f.check("registerCache: Bearer token not present in the 'Authorization' header"))
		return
	}
	var raw map[string]any
	body, _ := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err := json.Unmarshal(body, &raw); err != nil {
		refuse(w, http.StatusBadRequest, f.check("registerCache: invalid cache registration: %v", err))
		return
	}
	var ad struct {
		Name           string          `json:"name"`
		InstanceID     string          `json:"instanceID"`
		GenerationID   uint64          `json:"generationID"`
		StartTime      int64           `json:"startTime"`
		Version        string          `json:"version"`
		Expiry         time.Time       `json:"expiry"`
		ServerID       string          `json:"serverId"`
		RegistryPrefix string          `json:"registry-prefix"`
		DataURL        string          `json:"data-url"`
		WebURL         string          `json:"web-url"`
		Namespaces     json.RawMessage `json:"namespaces"`
		Status         string          `json:"status"`
		Now            time.Time       `json:"now"`
		DirectorTest   bool            `json:"directorTest"`
	}
	if err := json.Unmarshal(body, &ad); err != nil {
		refuse(w, http.StatusBadRequest, f.check("registerCache: invalid cache registration: %v", err))
		return
	}
	if ad.DataURL == "" {
		refuse(w, http.StatusBadRequest, f.check("registerCache: data-url is required"))
		return
	}
	prefix := strings.TrimRight(ad.RegistryPrefix, "/")
	if prefix == "" {
		refuse(w, http.StatusForbidden, f.check("registerCache: Cache advertisement rejected: no registry prefix present in the ad"))
		return
	}
	if !strings.HasPrefix(prefix, "/caches/") || prefix == "/caches/" {
		refuse(w, http.StatusForbidden, f.check("registerCache: registry prefix %q is not a valid Cache registration prefix", prefix))
		return
	}
	f.mu.Lock()
	reg := f.regs[prefix]
	f.mu.Unlock()
	if reg == nil {
		refuse(w, http.StatusForbidden, f.check("registerCache: Authorization token verification failed: %s is not registered", prefix))
		return
	}
	if !reg.Approved {
		// Not a failed check: the cache is right to try.
		reply(w, http.StatusForbidden, map[string]any{"approval_error": true, "error": fmt.Sprintf("Cache %q was not approved by an administrator. You may find more information on %s", ad.Name, f.URL)})
		return
	}
	now := time.Now()
	c, err := verifyES256(strings.TrimPrefix(auth, "Bearer "), reg.keys, now)
	if err != nil {
		refuse(w, http.StatusForbidden, f.check("registerCache: Authorization token verification failed %v", err))
		return
	}
	if !c.hasScope("pelican.advertise") {
		refuse(w, http.StatusForbidden, f.check("registerCache: Authorization token verification failed. Token missing required scope (scope %q)", c.Scope))
		return
	}
	// Pelican's director checks neither lifetime nor audience; its caches
	// always send a minute and the director's audience.
	if lt := c.lifetime(); lt <= 0 || lt > time.Minute {
		f.check("registerCache: advertisement token lifetime %v, Pelican's is one minute", lt)
	}
	if want := wlcgAudience(f.URL); !slices.Contains(c.audiences(), want) {
		f.check("registerCache: advertisement token audience %v, want %q", c.audiences(), want)
	}
	var problems []string
	u, err := url.Parse(ad.DataURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		problems = append(problems, fmt.Sprintf("data-url %q is not https://host", ad.DataURL))
	}
	if wu, err := url.Parse(ad.WebURL); ad.WebURL != "" && (err != nil || wu.Scheme != "https") {
		problems = append(problems, fmt.Sprintf("web-url %q is not https", ad.WebURL))
	}
	if ad.Name == "" {
		problems = append(problems, "no name")
	}
	if ad.ServerID != reg.ServerID {
		problems = append(problems, fmt.Sprintf("serverId %q is not the registered %q", ad.ServerID, reg.ServerID))
	}
	if len(ad.InstanceID) != 32 || ad.GenerationID == 0 || ad.StartTime == 0 {
		problems = append(problems, fmt.Sprintf("instanceID %q (want 32 hex), generationID %d, startTime %d: a server names its instance and counts its ads", ad.InstanceID, ad.GenerationID, ad.StartTime))
	}
	if !ad.Expiry.After(now) {
		problems = append(problems, fmt.Sprintf("expiry %v is not in the future", ad.Expiry))
	}
	if ad.Now.IsZero() {
		problems = append(problems, "no now (the director corrects clock skew with it)")
	}
	switch ad.Status {
	case "ok", "warning", "degraded", "critical", "shutting down":
	default:
		problems = append(problems, fmt.Sprintf("status %q is none of Pelican's", ad.Status))
	}
	if !versionAtLeast(ad.Version, 7, 16) {
		problems = append(problems, fmt.Sprintf("version %q: below 7.16 the director does not count a cache as supporting cache authorization", ad.Version))
	}
	problems = append(problems, checkDowntimes(raw["downtimes"], now)...)
	if c, ok := raw["coordinate"].(map[string]any); ok {
		lat, _ := c["Lat"].(float64)
		long, _ := c["Long"].(float64)
		if lat < -90 || lat > 90 || long < -180 || long > 180 || c["Source"] != "declared" {
			problems = append(problems, fmt.Sprintf("coordinate %v: want Lat, Long in range and Source \"declared\" (server_structs.Coordinate)", c))
		}
	}
	var ns []map[string]any
	if err := json.Unmarshal(ad.Namespaces, &ns); err != nil {
		problems = append(problems, fmt.Sprintf("namespaces: %v", err))
	}
	for _, k := range []string{"capabilities", "token-issuer", "storageType", "downtimes", "requiredFeatures"} {
		if _, ok := raw[k]; !ok {
			problems = append(problems, "no "+k)
		}
	}
	if len(problems) > 0 {
		msg := f.check("registerCache: %s", strings.Join(problems, "; "))
		refuse(w, http.StatusBadRequest, "invalid cache registration: "+msg)
		return
	}
	f.mu.Lock()
	f.ads = append(f.ads, Ad{Received: now, Body: raw, TokenLifetime: c.lifetime()})
	f.mu.Unlock()
	reply(w, 200, map[string]string{"status": "success", "msg": "Successful registration"})
}

// checkDowntimes checks an ad's downtimes as the director reads them
// (server_structs.Downtime): an id, Pelican's classes and severities,
// times in Unix milliseconds, an end of -1 (open) or after the start.
func checkDowntimes(v any, now time.Time) []string {
	list, ok := v.([]any)
	if !ok {
		return []string{fmt.Sprintf("downtimes %v: want a list", v)}
	}
	var problems []string
	for i, x := range list {
		d, _ := x.(map[string]any)
		start, _ := d["startTime"].(float64)
		end, _ := d["endTime"].(float64)
		created, _ := d["createdAt"].(float64)
		switch {
		case d["id"] == "" || d["id"] == nil:
			problems = append(problems, fmt.Sprintf("downtime %d: no id", i))
		case d["class"] != "SCHEDULED" && d["class"] != "UNSCHEDULED":
			problems = append(problems, fmt.Sprintf("downtime %d: class %v", i, d["class"]))
		case !slices.Contains([]any{"Outage (completely inaccessible)", "Severe (most services down)",
			"Intermittent Outage (may be up for some of the time)", "No Significant Outage Expected (you shouldn't notice)"}, d["severity"]):
			problems = append(problems, fmt.Sprintf("downtime %d: severity %v is none of Pelican's", i, d["severity"]))
		case math.Abs(start-float64(now.UnixMilli())) > 366*24*3600e3 || created <= 0:
			problems = append(problems, fmt.Sprintf("downtime %d: startTime %v, createdAt %v: want Unix milliseconds", i, start, created))
		case end != -1 && end <= start:
			problems = append(problems, fmt.Sprintf("downtime %d: endTime %v: -1 or after the start", i, end))
		case d["source"] != "cache" || d["serverId"] == "":
			problems = append(problems, fmt.Sprintf("downtime %d: source %v, serverId %v: a cache's own, with its server id", i, d["source"], d["serverId"]))
		}
	}
	return problems
}

// activeDowntime reports whether an ad's downtimes hold one in force at
// now (director/cache_ads.go applyServerDowntimes).
func activeDowntime(ad map[string]any, now time.Time) bool {
	list, _ := ad["downtimes"].([]any)
	ms := float64(now.UnixMilli())
	for _, x := range list {
		d, _ := x.(map[string]any)
		start, _ := d["startTime"].(float64)
		end, _ := d["endTime"].(float64)
		if start <= ms && (end >= ms || end == -1) {
			return true
		}
	}
	return false
}

// filtered reports whether the newest ad of the cache registered under
// prefix holds a downtime in force.
func (f *Federation) filtered(ads []Ad, prefix any) bool {
	for i := len(ads) - 1; i >= 0; i-- {
		if ads[i].Body["registry-prefix"] == prefix {
			return activeDowntime(ads[i].Body, time.Now())
		}
	}
	return false
}

// InDowntime reports whether the director, as it stands, takes the cache
// registered under prefix out of its redirects (its newest ad holds a
// downtime in force).
func (f *Federation) InDowntime(prefix string) bool { return f.filtered(f.Ads(), prefix) }

// versionAtLeast compares a semantic version's major.minor.
func versionAtLeast(v string, major, minor int) bool {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(strings.SplitN(parts[1], "-", 2)[0])
	return err1 == nil && err2 == nil && (ma > major || ma == major && mi >= minor)
}

// urlJSON encodes a URL as Go's encoding/json encodes url.URL, as the
// director's namespace list carries issuers.
func urlJSON(raw string) map[string]any {
	u, _ := url.Parse(raw)
	return map[string]any{"Scheme": u.Scheme, "Opaque": "", "User": nil, "Host": u.Host, "Path": u.Path,
		"RawPath": "", "OmitHost": false, "ForceQuery": false, "RawQuery": "", "Fragment": "", "RawFragment": ""}
}

// namespaceList is director.go listNamespacesV2: the origins' namespaces
// and the monitoring namespace, in Pelican's encoding.
func (f *Federation) namespaceList() []any {
	var out []any
	for _, n := range f.opts.Namespaces {
		caps := map[string]bool{"PublicRead": n.PublicRead, "Read": true, "Write": false, "Listing": true, "FallBackRead": false, "Copies": false}
		issuers := []any{}
		gen := []any{map[string]any{"strategy": "", "vault-server": "", "max-scope-depth": 0, "issuer": urlJSON("")}}
		if !n.PublicRead {
			issuers = append(issuers, map[string]any{"base-paths": []string{n.Path}, "restricted-paths": nil, "issuer": urlJSON(f.IssuerURL())})
			gen = []any{map[string]any{"strategy": "OAuth2", "vault-server": "", "max-scope-depth": 3, "issuer": urlJSON(f.IssuerURL())}}
		}
		out = append(out, map[string]any{"Caps": caps, "path": n.Path, "token-generation": gen, "token-issuer": issuers, "from-topology": false})
	}
	out = append(out, map[string]any{"Caps": map[string]bool{"PublicRead": true, "Read": true}, "path": "/pelican/monitoring",
		"token-generation": nil, "token-issuer": nil, "from-topology": false})
	return out
}

// getFedToken is director/fed_token.go: an advertisement token of the
// registered host buys a token the federation signs.
func (f *Federation) getFedToken(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	host, stype := q.Get("host"), q.Get("sType")
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if tok == "" {
		tok = q.Get("authz")
	}
	if host == "" || stype != "Cache" || tok == "" {
		refuse(w, http.StatusForbidden, f.check("getFedToken: host %q, sType %q, token present %t: want the site name, Cache and a token", host, stype, tok != ""))
		return
	}
	f.mu.Lock()
	reg := f.regs["/caches/"+host]
	f.mu.Unlock()
	if reg == nil || !reg.Approved {
		refuse(w, http.StatusForbidden, fmt.Sprintf("Host '%s' has not been approved by an administrator", host))
		return
	}
	c, err := verifyES256(tok, reg.keys, time.Now())
	if err != nil || !c.hasScope("pelican.advertise") {
		refuse(w, http.StatusForbidden, f.check("getFedToken: The provided advertise token was rejected (%v, scope %v)", err, c != nil && c.hasScope("pelican.advertise")))
		return
	}
	now := time.Now().Unix()
	fed := signES256(f.fedKey, "federation", map[string]any{"iss": f.URL, "sub": host, "aud": "https://wlcg.cern.ch/jwt/v1/any",
		"scope": "storage.read:/", "iat": now, "nbf": now, "exp": now + int64(f.opts.FedTokenLifetime/time.Second), "jti": newID(), "wlcg.ver": "1.0"})
	f.mu.Lock()
	f.fedTokens++
	f.tokens = append(f.tokens, fed)
	f.mu.Unlock()
	reply(w, 200, map[string]string{"access_token": fed})
}

// redirect sends a client to the origin (director.go redirectToOrigin)
// or, for /object, to the cache that advertised last (redirectToCache);
// /pelican/monitoring goes to the director's healthTest objects.
func (f *Federation) redirect(w http.ResponseWriter, r *http.Request, p string, toCache bool) {
	p = path.Clean("/" + p)
	target := f.URL + "/api/v1.0/origin/data" + p
	if !toCache {
		f.mu.Lock()
		f.redirects[p]++
		f.mu.Unlock()
	}
	if strings.HasPrefix(p, "/pelican/monitoring/") {
		target = f.URL + "/api/v1.0/director/healthTest" + p
	} else if f.namespaceOf(p) == nil {
		refuse(w, http.StatusNotFound, "No namespace found for path. Either it doesn't exist, or the Director is experiencing problems")
		return
	}
	if toCache {
		// The newest ad of a cache not in downtime (cache_ads.go
		// filteredServers: the director sends no client there).
		ads := f.Ads()
		var ad *Ad
		for i := len(ads) - 1; i >= 0 && ad == nil; i-- {
			if !f.filtered(ads, ads[i].Body["registry-prefix"]) {
				ad = &ads[i]
			}
		}
		if ad == nil {
			refuse(w, http.StatusNotFound, "no caches")
			return
		}
		target = strings.TrimRight(ad.Body["data-url"].(string), "/") + p
	}
	if r.URL.RawQuery != "" {
		target += "?" + r.URL.RawQuery
	}
	w.Header().Set("Location", target)
	w.WriteHeader(http.StatusTemporaryRedirect)
}

func (f *Federation) namespaceOf(p string) *Namespace {
	for i, n := range f.opts.Namespaces {
		if p == n.Path || strings.HasPrefix(p, n.Path+"/") {
			return &f.opts.Namespaces[i]
		}
	}
	return nil
}

var healthTestPath = regexp.MustCompile(`^/pelican/monitoring/(directorTest|selfTest)/.+\.txt$`)

// healthTest is director.go getHealthTestFile.
func (f *Federation) healthTest(w http.ResponseWriter, r *http.Request, p string) {
	if !healthTestPath.MatchString(path.Clean(p)) {
		refuse(w, http.StatusBadRequest, "invalid health test path")
		return
	}
	body := DirectorTestBody + "\n"
	switch r.Method {
	case http.MethodHead:
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	case http.MethodGet:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, body)
	default:
		refuse(w, http.StatusBadRequest, "Unsupported method: "+r.Method)
	}
}

// origin is a posixv2 origin: GET and HEAD with ranges, ETag, Digest; a
// private namespace needs the federation's token (cache authorization) or
// one of its issuer, with a storage.read scope covering the object.
func (f *Federation) origin(w http.ResponseWriter, r *http.Request, p string) {
	p = path.Clean("/" + p)
	n := f.namespaceOf(p)
	if n == nil {
		refuse(w, http.StatusNotFound, "not found")
		return
	}
	data, ok := n.Files[strings.TrimPrefix(p, n.Path)]
	if !ok {
		refuse(w, http.StatusNotFound, "not found")
		return
	}
	if !n.PublicRead {
		// As a posixv2 origin (origin_serve/authz.go getAcls): the tokens
		// of the Authorization header and of authz are tried; only those
		// of the namespace's issuer grant, the federation's token proves
		// membership only.
		toks := []string{strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), strings.TrimPrefix(r.URL.Query().Get("authz"), "Bearer ")}
		if !slices.ContainsFunc(toks, func(tok string) bool { return f.originAllows(tok, n, p) }) {
			reply(w, http.StatusUnauthorized, map[string]string{"error": "unauthorized", "detail": "authorization failed for storage.read " + p})
			return
		}
	}
	if want := r.Header.Get("Want-Digest"); want != "" {
		var ds []string
		for _, a := range strings.Split(want, ",") {
			switch strings.ToLower(strings.TrimSpace(a)) {
			case "md5":
				s := md5.Sum(data)
				ds = append(ds, "md5="+base64.StdEncoding.EncodeToString(s[:]))
			case "crc32c":
				ds = append(ds, fmt.Sprintf("crc32c=%08x", crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))))
			case "crc32":
				ds = append(ds, fmt.Sprintf("crc32=%08x", crc32.ChecksumIEEE(data)))
			case "sha":
				s := sha1.Sum(data)
				ds = append(ds, "sha="+base64.StdEncoding.EncodeToString(s[:]))
			}
		}
		if len(ds) > 0 {
			w.Header().Set("Digest", strings.Join(ds, ","))
		}
	}
	if r.Method == http.MethodGet {
		f.mu.Lock()
		f.originReads[p]++
		f.mu.Unlock()
	}
	sum := sha256.Sum256(data)
	w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:8])+`"`)
	http.ServeContent(w, r, path.Base(p), time.Unix(1700000000, 0), bytes.NewReader(data))
}

// originAllows checks a token for a private namespace: the origin
// issuer's, with a scope under the namespace as base path.
func (f *Federation) originAllows(tok string, n *Namespace, p string) bool {
	if tok == "" {
		return false
	}
	now := time.Now()
	c, err := verifyES256(tok, map[string]*ecdsa.PublicKey{"origin": &f.orgKey.PublicKey}, now)
	if err != nil || c.Iss != f.IssuerURL() {
		return false
	}
	for _, s := range strings.Fields(c.Scope) {
		if sp, ok := strings.CutPrefix(s, "storage.read:"); ok {
			base := path.Join(n.Path, sp)
			if p == base || strings.HasPrefix(p, strings.TrimRight(base, "/")+"/") {
				return true
			}
		}
	}
	return false
}

// servers is director_ui.go listServers for the caches that advertised
// (their newest ad each).
func (f *Federation) servers() []any {
	f.mu.Lock()
	defer f.mu.Unlock()
	last := map[string]Ad{}
	var order []string
	for _, a := range f.ads {
		k, _ := a.Body["registry-prefix"].(string)
		if _, ok := last[k]; !ok {
			order = append(order, k)
		}
		last[k] = a
	}
	health := f.health
	if health == "" {
		health = "Unknown"
	}
	out := []any{}
	for _, k := range order {
		b := last[k].Body
		var ns []string
		if l, ok := b["namespaces"].([]any); ok {
			for _, n := range l {
				if m, ok := n.(map[string]any); ok {
					if p, ok := m["path"].(string); ok {
						ns = append(ns, p)
					}
				}
			}
		}
		// As the director lists a server a downtime of its own filters
		// (director_ui.go, cache_ads.go filterType.String).
		filtered, ft := activeDowntime(b, time.Now()), ""
		if filtered {
			ft = "Temporarily disabled by the server admin"
		}
		downtimes, _ := b["downtimes"].([]any)
		out = append(out, map[string]any{"name": b["name"], "serverId": b["serverId"], "url": b["data-url"], "webUrl": b["web-url"],
			"type": "Cache", "healthStatus": health, "serverStatus": b["status"], "registryPrefix": k, "version": b["version"], "namespacePrefixes": ns,
			"filtered": filtered, "filteredType": ft, "downtimes": downtimes})
	}
	return out
}
