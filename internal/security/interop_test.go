package security

import (
	"bytes"
	"context"
	"errors"
	"github.com/hepcache/hepcache/internal/authz"
	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/eventually"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/auth/authtest"
	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/config"
	xrdfront "github.com/hepcache/hepcache/internal/frontend/xrootd"
	"github.com/hepcache/hepcache/internal/realclient"
)

// TestXrdcpBearerToken drives the real xrdcp over roots:// with the ztn
// security protocol: a token with the right scope reads, no token, a token
// for another path and a token of an untrusted issuer do not.
func TestXrdcpBearerToken(t *testing.T) {
	p := newPKI(t)
	s := newStack(t, p, nil)
	roots := strings.Replace(s.root, "root://", "roots://", 1)
	want := s.data["/store/mc/f.root"]

	t.Run("BEARER_TOKEN", func(t *testing.T) {
		got, r := s.xrdcp(t, s.xrdEnv(t, "BEARER_TOKEN="+s.token(t, "storage.read:/store/mc")), roots+"//store/mc/f.root")
		if r.Err != nil || !bytes.Equal(got, want) {
			t.Fatalf("xrdcp with a token: %s\nserver log:\n%s", r, s.log)
		}
		if !strings.Contains(s.log.String(), "ztn authenticated") {
			t.Errorf("server did not log a ztn authentication")
		}
	})
	t.Run("BEARER_TOKEN_FILE", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "tok")
		os.WriteFile(f, []byte(s.token(t, "storage.read:/store")+"\n"), 0o600)
		got, r := s.xrdcp(t, s.xrdEnv(t, "BEARER_TOKEN_FILE="+f), roots+"//store/mc/f.root")
		if r.Err != nil || !bytes.Equal(got, want) {
			t.Fatalf("xrdcp with a token file: %s", r)
		}
	})
	t.Run("xrdfs stat and ls", func(t *testing.T) {
		realclient.Require(t, "xrdfs")
		env := s.xrdEnv(t, "BEARER_TOKEN="+s.token(t, "storage.read:/store"))
		host := strings.TrimPrefix(roots, "roots://")
		r := realclient.Run(t, env, "xrdfs", "roots://"+host, "stat", "/store/mc/f.root")
		if r.Err != nil || !strings.Contains(string(r.Stdout), "Size:   "+strconv.Itoa(len(want))) {
			t.Fatalf("xrdfs stat with a token: %s", r)
		}
		r = realclient.Run(t, env, "xrdfs", "roots://"+host, "ls", "/store/mc")
		if r.Err != nil || !strings.Contains(string(r.Stdout), "/store/mc/f.root") {
			t.Fatalf("xrdfs ls with a token: %s", r)
		}
		r = realclient.Run(t, s.xrdEnv(t), "xrdfs", "roots://"+host, "stat", "/store/mc/f.root")
		if r.Err == nil || !strings.Contains(string(r.Stdout)+string(r.Stderr), "3010") {
			t.Fatalf("xrdfs stat without a token: %s", r)
		}
	})
	t.Run("WLCG groups instead of scopes", func(t *testing.T) {
		tok := p.issuer.Sign(t, "ES256", authtest.Claims{"sub": "bob", "aud": testAud, "wlcg.groups": []string{"/cms"}})
		got, r := s.xrdcp(t, s.xrdEnv(t, "BEARER_TOKEN="+tok), roots+"//store/mc/f.root")
		if r.Err != nil || !bytes.Equal(got, want) {
			t.Fatalf("xrdcp with a /cms group token: %s", r)
		}
	})
	denied := []struct {
		name, env, path, want string
	}{
		{"no token", "", "/store/mc/f.root", "anonymous client may not read /store/mc/f.root"},
		{"scope for another path", "BEARER_TOKEN=" + s.token(t, "storage.read:/store/data"), "/store/mc/f.root", "may not read /store/mc/f.root"},
		{"outside every namespace", "BEARER_TOKEN=" + s.token(t, "storage.read:/"), "/etc/passwd", "may not read /etc/passwd"},
		{"untrusted issuer", "BEARER_TOKEN=" + authtest.NewIssuer(t, "https://evil.test", 1).Token(t, "mallory", "storage.read:/", testAud), "/store/mc/f.root", "anonymous client may not read"},
	}
	for _, tc := range denied {
		t.Run(tc.name, func(t *testing.T) {
			var extra []string
			if tc.env != "" {
				extra = append(extra, tc.env)
			}
			got, r := s.xrdcp(t, s.xrdEnv(t, extra...), roots+"/"+tc.path)
			if r.Err == nil {
				t.Fatalf("xrdcp succeeded (%d bytes)", len(got))
			}
			if out := string(r.Stdout) + string(r.Stderr); !strings.Contains(out, tc.want) || !strings.Contains(out, "3010") {
				t.Fatalf("xrdcp output lacks kXR_NotAuthorized (3010) and %q: %s", tc.want, r)
			}
		})
	}
	if !strings.Contains(s.log.String(), "authz: denied") || !strings.Contains(s.log.String(), "ztn token refused") {
		t.Errorf("denials and the refused token are not logged:\n%s", s.log)
	}
	if s.mem.Reads.Load() == 0 {
		t.Fatal("the allowed reads never reached the origin?")
	}
}

// TestRequireTLSAndAuth: with require_tls, root:// logins are refused;
// with require_auth, roots:// clients without a token cannot log in.
func TestRequireTLSAndAuth(t *testing.T) {
	p := newPKI(t)
	s := newStack(t, p, func(c *Config) { c.RequireTLS, c.RequireAuth = true, true })
	roots := strings.Replace(s.root, "root://", "roots://", 1)
	tok := s.token(t, "storage.read:/store")
	if got, r := s.xrdcp(t, s.xrdEnv(t, "BEARER_TOKEN="+tok), roots+"//store/data/h.root"); r.Err != nil || !bytes.Equal(got, s.data["/store/data/h.root"]) {
		t.Fatalf("roots:// with a token: %s", r)
	}
	// root:// against a server requiring TLS: XrdCl is told to switch to
	// TLS (kXR_gotoTLS) and then authenticates with the token.
	if got, r := s.xrdcp(t, s.xrdEnv(t, "BEARER_TOKEN="+tok), s.root+"//store/data/h.root"); r.Err != nil || !bytes.Equal(got, s.data["/store/data/h.root"]) {
		t.Fatalf("root:// upgraded to TLS with a token: %s", r)
	}
	if _, r := s.xrdcp(t, s.xrdEnv(t), roots+"//public/a.root"); r.Err == nil {
		t.Fatalf("roots:// without a token logged in although auth is required: %s", r)
	}
}

// TestXrdcpPlainRootIsAnonymous: over root:// without TLS a token is not
// sent (ztn needs TLS), so the client is anonymous.
func TestXrdcpPlainRootIsAnonymous(t *testing.T) {
	p := newPKI(t)
	s := newStack(t, p, nil)
	s.fill(t, "/public/a.root")
	env := s.xrdEnv(t, "BEARER_TOKEN="+s.token(t, "storage.read:/store"))
	if got, r := s.xrdcp(t, env, s.root+"//public/a.root"); r.Err != nil || !bytes.Equal(got, s.data["/public/a.root"]) {
		t.Fatalf("anonymous root:// read of a cached public file: %s", r)
	}
	if _, r := s.xrdcp(t, env, s.root+"//store/mc/f.root"); r.Err == nil {
		t.Fatal("root:// without TLS read /store")
	}
}

// TestReadCachedOnly: anonymous clients may read /public only once an
// authenticated client has made the cache download it; until then they get
// kXR_NotAuthorized / 403 and the origin sees nothing.
func TestReadCachedOnly(t *testing.T) {
	p := newPKI(t)
	s := newStack(t, p, nil)
	roots := strings.Replace(s.root, "root://", "roots://", 1)

	if _, r := s.xrdcp(t, s.xrdEnv(t), roots+"//public/a.root"); r.Err == nil || !strings.Contains(string(r.Stdout)+string(r.Stderr), "may only read cached data") {
		t.Fatalf("anonymous xrdcp of an uncached file: %s", r)
	}
	if code, body := s.curl(t, "/public/b.root"); code != http.StatusForbidden || !strings.Contains(body, "may only read cached data") {
		t.Fatalf("anonymous curl of an uncached file: %d %s", code, body)
	}
	if n := s.mem.Reads.Load(); n != 0 {
		t.Fatalf("denied requests made the origin serve %d reads", n)
	}

	// An authenticated client downloads; then anonymous clients read.
	got, r := s.xrdcp(t, s.xrdEnv(t, "BEARER_TOKEN="+s.token(t, "storage.read:/public")), roots+"//public/a.root")
	if r.Err != nil || !bytes.Equal(got, s.data["/public/a.root"]) {
		t.Fatalf("token xrdcp: %s", r)
	}
	s.fill(t, "/public/b.root")
	waitClosed(t, s)
	before := s.mem.BytesRead.Load()
	if got, r := s.xrdcp(t, s.xrdEnv(t), roots+"//public/a.root"); r.Err != nil || !bytes.Equal(got, s.data["/public/a.root"]) {
		t.Fatalf("anonymous xrdcp of a cached file: %s", r)
	}
	if code, body := s.curl(t, "/public/b.root"); code != http.StatusOK || body != string(s.data["/public/b.root"]) {
		t.Fatalf("anonymous curl of a cached file: %d", code)
	}
	if after := s.mem.BytesRead.Load(); after != before {
		t.Fatalf("cached reads fetched %d bytes from the origin", after-before)
	}
}

// waitClosed waits until the cache has finished with the files clients
// closed (their blocks recorded).
func waitClosed(t *testing.T, s *stack) {
	t.Helper()
	eventually.True(t, func() bool { return s.cache.Stats().OpenFiles.Load() == 0 }, "the cache to close every file")
}

// TestCurlTokens drives curl with Authorization: Bearer over HTTPS.
func TestCurlTokens(t *testing.T) {
	p := newPKI(t)
	s := newStack(t, p, nil)
	if code, body := s.curl(t, "/store/mc/f.root", "-H", "Authorization: Bearer "+s.token(t, "storage.read:/store/mc")); code != 200 || body != string(s.data["/store/mc/f.root"]) {
		t.Fatalf("curl with a token: %d", code)
	}
	cases := []struct {
		name string
		args []string
		path string
		want string
	}{
		{"no token", nil, "/store/mc/f.root", "anonymous client may not read"},
		{"scope elsewhere", []string{"-H", "Authorization: Bearer " + s.token(t, "storage.read:/store/data")}, "/store/mc/f.root", "may not read"},
		{"expired token", []string{"-H", "Authorization: Bearer " + p.issuer.Sign(t, "RS256", authtest.Claims{"sub": "a", "aud": testAud, "scope": "storage.read:/", "exp": time.Now().Add(-time.Hour).Unix()})}, "/store/mc/f.root", "expired"},
		{"wrong audience", []string{"-H", "Authorization: Bearer " + p.issuer.Token(t, "a", "storage.read:/", "https://other.service")}, "/store/mc/f.root", "audience"},
		{"garbage", []string{"-H", "Authorization: Bearer abc.def.ghi"}, "/store/mc/f.root", "bearer token refused"},
		{"basic auth", []string{"-u", "alice:secret"}, "/store/mc/f.root", "only Bearer"},
		{"dot-dot", []string{"--path-as-is", "-H", "Authorization: Bearer " + s.token(t, "storage.read:/store/mc")}, "/store/mc/../data/h.root", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := s.curl(t, tc.path, tc.args...)
			if code != http.StatusForbidden && code != http.StatusBadRequest {
				t.Fatalf("status %d, want 403 or 400: %.200s", code, body)
			}
			if !strings.Contains(body, tc.want) {
				t.Fatalf("body %q lacks %q", body, tc.want)
			}
		})
	}
}

// TestCurlProxyCertificates drives curl with RFC 3820 proxies, with and
// without VOMS attributes, over HTTPS.
func TestCurlProxyCertificates(t *testing.T) {
	p := newPKI(t)
	s := newStack(t, p, nil)
	user := p.ca.User(t, "alice", 0)
	dir := t.TempDir()
	proxyFile := func(name string, o authtest.ProxyOpts) string {
		return user.Proxy(t, o).WriteProxyFile(t, dir, name)
	}
	cert := func(f string) []string { return []string{"--cert", f, "--key", f} }
	member := proxyFile("member", authtest.ProxyOpts{VOMS: authtest.VOMSExtension(p.voms.AC(t, user.Cert, authtest.ACOpts{}))})
	prod := proxyFile("prod", authtest.ProxyOpts{VOMS: authtest.VOMSExtension(p.voms.AC(t, user.Cert, authtest.ACOpts{
		FQANs: []string{"/cms/Role=production/Capability=NULL", "/cms/Role=NULL/Capability=NULL"}}))})
	plain := proxyFile("plain", authtest.ProxyOpts{})
	expired := proxyFile("expired", authtest.ProxyOpts{Lifetime: -time.Minute, VOMS: authtest.VOMSExtension(p.voms.AC(t, user.Cert, authtest.ACOpts{}))})
	rogueUser := p.rogue.User(t, "mallory", 1)
	rogue := rogueUser.Proxy(t, authtest.ProxyOpts{}).WriteProxyFile(t, dir, "rogue")
	badAC := proxyFile("badac", authtest.ProxyOpts{VOMS: authtest.VOMSExtension(p.voms.AC(t, user.Cert, authtest.ACOpts{CorruptSignature: true}))})

	// A CMS member without the production role may read only cached data.
	if code, body := s.curl(t, "/store/mc/g.root", cert(member)...); code != http.StatusForbidden || !strings.Contains(body, "may only read cached data") {
		t.Fatalf("VOMS member, uncached: %d %s\n%s", code, body, s.log)
	}
	// The production role may download.
	if code, body := s.curl(t, "/store/mc/g.root", cert(prod)...); code != http.StatusOK || body != string(s.data["/store/mc/g.root"]) {
		t.Fatalf("VOMS production role: %d %.300s\n%s", code, body, s.log)
	}
	waitClosed(t, s)
	if code, body := s.curl(t, "/store/mc/g.root", cert(member)...); code != http.StatusOK || body != string(s.data["/store/mc/g.root"]) {
		t.Fatalf("VOMS member, cached: %d %.300s", code, body)
	}
	if !strings.Contains(s.log.String(), "/DC=org/DC=hepcache-test/OU=Users/CN=alice") {
		t.Error("the client's DN is not in the log")
	}
	for _, tc := range []struct{ name, file, want string }{
		{"proxy without VOMS", plain, "certificate /DC=org/DC=hepcache-test/OU=Users/CN=alice may not read"},
		{"expired proxy", expired, "expired"},
		{"unknown CA", rogue, "unknown authority"},
		{"bad AC signature", badAC, "signature"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := s.curl(t, "/store/mc/g.root", cert(tc.file)...)
			if code != http.StatusForbidden || !strings.Contains(body, tc.want) {
				t.Fatalf("%d %q, want 403 with %q", code, body, tc.want)
			}
		})
	}
	// A plain user certificate (no proxy) identifies too: dn rules.
	certFile, keyFile := user.WriteFiles(t, dir, "usercert")
	if code, body := s.curl(t, "/public/a.root", "--cert", certFile, "--key", keyFile); code != http.StatusOK || body != string(s.data["/public/a.root"]) {
		t.Fatalf("user certificate on /public: %d %.200s", code, body)
	}
}

// TestFromConfig builds the security layer from a parsed [security]
// section and checks that its rules apply.
func TestFromConfig(t *testing.T) {
	p := newPKI(t)
	c, err := config.Parse([]byte(`
[security]
tls_cert = "` + p.certFile + `"
tls_key = "` + p.keyFile + `"
ca_paths = ["` + p.caDir + `"]
vomsdir = "` + p.vomsdir + `"
audiences = ["` + testAud + `"]
[[security.issuer]]
issuer = "` + p.issuer.URL + `"
jwks_file = "` + p.jwks + `"
[[security.rule]]
path = "/"
read = ["scope"]
`))
	if err != nil {
		t.Fatal(err)
	}
	sec, err := New(FromConfig(&c.Security, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer sec.Close()
	if sec.TLSConfig() == nil || sec.XRootDAuthenticator() == nil {
		t.Fatal("TLS or tokens not configured")
	}
	req := &backend.Request{Path: "/store/f"}
	err = sec.XRootDAuthorizer().(xrdfront.RequestAuthorizer).AuthorizeRequest(context.Background(), xrdfront.OpOpen, req)
	if !errors.Is(err, backend.ErrForbidden) {
		t.Fatalf("anonymous request under read = [scope]: %v", err)
	}
	if err := sec.Reload(); err != nil {
		t.Fatalf("reload: %v", err)
	}
}

// TestReadOnlyClientStartsNoDownload: with read-ahead on, a client that may
// read only cached data (no fetch rule) reads the cached part of a partial
// file with xrdcp over plain root:// (sendfile), the Python bindings and
// curl, and is refused the rest; the origin sends nothing for it, not even
// read-ahead, on any read path.
func TestReadOnlyClientStartsNoDownload(t *testing.T) {
	p := newPKI(t)
	s := newStack(t, p, nil, func(c *cache.Config) { c.Prefetch, c.BlockSize, c.PieceSize = 4, 64<<10, 16<<10 })
	roots := strings.Replace(s.root, "root://", "roots://", 1)
	const f = "/public/a.root" // 300 KiB: 5 blocks of 64 KiB
	py := realclient.Python(t, realclient.DebianPython, "XRootD.client")
	readRange := `
import sys
from XRootD import client
f = client.File()
st, _ = f.open(sys.argv[1])
if not st.ok: sys.exit(st.message)
st, data = f.read(0, int(sys.argv[2]))
if not st.ok: sys.exit(st.message)
sys.stdout.buffer.write(data)
f.close()
`
	// An authenticated client caches the first block; the origin holds
	// back the rest, so its read-ahead ends with its close.
	s.mem.OnRead(func(ctx context.Context, _ string, off int64, _ int) error {
		if off >= 65536 {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	tok := s.xrdEnv(t, "BEARER_TOKEN="+s.token(t, "storage.read:/public"))
	r := realclient.MustRunPython(t, tok, py, readRange, roots+"/"+f, "65536")
	if !bytes.Equal(r.Stdout, s.data[f][:65536]) {
		t.Fatal("authenticated read of the first block: wrong bytes")
	}
	waitClosed(t, s)
	s.mem.OnRead(nil)
	before := s.mem.BytesRead.Load()

	anon := s.xrdEnv(t)
	r = realclient.MustRunPython(t, anon, py, readRange, s.root+"/"+f, "65536")
	if !bytes.Equal(r.Stdout, s.data[f][:65536]) {
		t.Fatal("read-only python read of the cached block: wrong bytes")
	}
	if code, body := s.curl(t, f, "-r", "0-65535"); code != http.StatusPartialContent || body != string(s.data[f][:65536]) {
		t.Fatalf("read-only curl of the cached block: %d", code)
	}
	if _, r := s.xrdcp(t, anon, s.root+"/"+f); r.Err == nil {
		t.Fatal("read-only xrdcp of the whole partial file succeeded")
	}
	waitClosed(t, s)
	if after := s.mem.BytesRead.Load(); after != before {
		t.Fatalf("read-only clients made the origin send %d bytes", after-before)
	}
}

// TestGridMapAndClientAuth: user:NAME grants follow the grid map, a
// certificate it does not name is refused with gridmap_required (as
// XrdHttp's "http.gridmap FILE required"), and with client certificates
// off (http.tlsclientauth off) a certificate grants nothing over HTTPS.
func TestGridMapAndClientAuth(t *testing.T) {
	p := newPKI(t)
	dir := t.TempDir()
	alice, bob := p.ca.User(t, "alice", 0), p.ca.User(t, "bob", 1)
	aliceCert, aliceKey := alice.WriteFiles(t, dir, "alice")
	bobCert, bobKey := bob.WriteFiles(t, dir, "bob")
	gm := filepath.Join(dir, "grid-mapfile")
	os.WriteFile(gm, []byte(`"/DC=org/DC=hepcache-test/OU=Users/CN=alice" alice`+"\n"), 0o644)
	rules := append([]authz.Rule{{Path: "/store/data", Read: []string{"user:alice"}}}, defaultRules...)
	s := newStack(t, p, func(c *Config) { c.Rules, c.GridMap, c.GridMapRequired = rules, gm, true })
	if code, body := s.curl(t, "/store/data/h.root", "--cert", aliceCert, "--key", aliceKey); code != http.StatusOK || body != string(s.data["/store/data/h.root"]) {
		t.Fatalf("alice, mapped: %d %.200s", code, body)
	}
	if code, body := s.curl(t, "/public/a.root", "--cert", bobCert, "--key", bobKey); code != http.StatusForbidden || !strings.Contains(body, "grid map") {
		t.Fatalf("bob, not in the required grid map: %d %.200s", code, body)
	}
	s.fill(t, "/public/a.root")
	if code, _ := s.curl(t, "/public/a.root"); code != http.StatusOK {
		t.Fatalf("no certificate, cached public file: %d", code)
	}

	off := newStack(t, p, func(c *Config) { c.Rules, c.GridMap, c.NoHTTPClientCerts = rules, gm, true })
	if code, _ := off.curl(t, "/store/data/h.root", "--cert", aliceCert, "--key", aliceKey); code != http.StatusForbidden {
		t.Fatalf("client certificates off, yet alice's granted: %d", code)
	}
}
