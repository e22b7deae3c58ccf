package security

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/auth/authtest"
	"github.com/hepcache/hepcache/internal/cache"
	httpfront "github.com/hepcache/hepcache/internal/frontend/http"
	xrdfront "github.com/hepcache/hepcache/internal/frontend/xrootd"
	"github.com/hepcache/hepcache/internal/realclient"
)

// readPastExpiry is a Python client (the XRootD bindings) that opens
// argv[1], reads its first 64 KiB, waits until the Unix time argv[2] (past
// the expiry of its credential), then reads 64 KiB at 192 KiB (kXR_read)
// and 1000 bytes at 128 KiB (kXR_readv) on the same open file; it prints
// each outcome.
const readPastExpiry = `
import sys, time
from XRootD import client
f = client.File()
st, _ = f.open(sys.argv[1])
if not st.ok: sys.exit("open: " + st.message)
st, data = f.read(0, 65536)
if not st.ok or len(data) != 65536: sys.exit("read before expiry: " + st.message)
print("before: ok", flush=True)
time.sleep(max(0, float(sys.argv[2]) - time.time()))
st, data = f.read(196608, 65536)
print("read: ok" if st.ok else "read: " + st.message.replace("\n", " "), flush=True)
st, _ = f.vector_read([(131072, 1000)])
print("readv: ok" if st.ok else "readv: " + st.message.replace("\n", " "), flush=True)
f.close()
`

// TestOpenFileReadsEndWithCredential (issue 27, item 5): a client that
// opened a file with a credential that then expires (a gsi proxy, a ztn
// token, a token in the open's ?authz=) has its later reads of that open
// file refused with kXR_NotAuthorized naming the expiry, and the cache
// fetches nothing more for it from the origin. Before, stat and open were
// refused after the expiry but kXR_read and kXR_readv of a file opened
// before went on, the cache fetching from the origin for them. The real
// Python bindings read; each credential lives a few seconds (the client
// must open and read once within them).
func TestOpenFileReadsEndWithCredential(t *testing.T) {
	py := realclient.Python(t, realclient.DebianPython, "XRootD.client")
	s, p := gsiStack(t, func(c *Config) { c.ClockSkew = time.Millisecond },
		func(c *cache.Config) { c.BlockSize, c.PieceSize = 64<<10, 16<<10 })
	// The offsets the origin is asked for, per path.
	var mu sync.Mutex
	asked := map[string][]int64{}
	s.mem.OnRead(func(_ context.Context, path string, off int64, _ int) error {
		mu.Lock()
		asked[path] = append(asked[path], off)
		mu.Unlock()
		return nil
	})
	roots := strings.Replace(s.root, "root://", "roots://", 1)
	user := p.ca.User(t, "alice", 0)
	const life = 6 * time.Second
	vomsAC := func() []byte {
		return authtest.VOMSExtension(p.voms.AC(t, user.Cert, authtest.ACOpts{FQANs: []string{"/cms/Role=production/Capability=NULL"}}))
	}
	shortToken := func(end time.Time) string {
		return p.issuer.Sign(t, "RS256", authtest.Claims{"sub": "alice", "aud": testAud, "scope": "storage.read:/store", "exp": end.Unix()})
	}
	cases := []struct {
		name string
		run  func(t *testing.T, end time.Time) (env []string, url string)
	}{
		{"gsi proxy", func(t *testing.T, end time.Time) ([]string, string) {
			proxy := user.Proxy(t, authtest.ProxyOpts{Key: authtest.RSAKey(t, 4), VOMS: vomsAC(),
				Mutate: func(c *x509.Certificate) { c.NotAfter = end }}).WriteProxyFile(t, t.TempDir(), "x509up")
			return s.gsiEnv(t, proxy), s.root + "//store/mc/f.root"
		}},
		{"ztn token", func(t *testing.T, end time.Time) ([]string, string) {
			realclient.RequireFile(t, "/usr/lib/x86_64-linux-gnu/libXrdSecztn-5.so")
			return s.xrdEnv(t, "BEARER_TOKEN="+shortToken(end), "XrdSecPROTOCOL=ztn,unix"), roots + "//store/mc/g.root"
		}},
		{"token in the open's authz", func(t *testing.T, end time.Time) ([]string, string) {
			return s.xrdEnv(t, "XrdSecPROTOCOL=unix"), roots + "//store/data/h.root?authz=" + url.QueryEscape("Bearer "+shortToken(end))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()                                      // each waits for its credential to expire
			end := time.Now().Add(life).Truncate(time.Second) // a token's exp has whole seconds
			env, u := tc.run(t, end)
			path := u[strings.Index(u, "//store")+1:]
			if i := strings.IndexByte(path, '?'); i >= 0 {
				path = path[:i]
			}
			r := realclient.RunPython(t, env, py, readPastExpiry, u, strconv.FormatFloat(float64(end.Add(300*time.Millisecond).UnixNano())/1e9, 'f', 3, 64))
			out := string(r.Stdout)
			if !strings.Contains(out, "before: ok") {
				t.Fatalf("the read before the expiry failed (a slow machine: the credential lives %v): %s\nserver log:\n%s", life, r, s.log)
			}
			for _, op := range []string{"read", "readv"} {
				line := ""
				for _, l := range strings.Split(out, "\n") {
					if strings.HasPrefix(l, op+": ") {
						line = l
					}
				}
				if line == op+": ok" || !strings.Contains(line, "3010") || !strings.Contains(line, "expired") && !strings.Contains(line, "ended") {
					t.Errorf("%s of %s after its credential expired: %q, want kXR_NotAuthorized (3010) naming the expiry\n%s", op, path, line, r)
				}
			}
			// Only the first block came from the origin.
			mu.Lock()
			offs := asked[path]
			mu.Unlock()
			if len(offs) != 1 || offs[0] != 0 {
				t.Errorf("the origin was asked for %s at offsets %v, want [0] (the one read before the expiry)", path, offs)
			}
		})
	}
	t.Cleanup(func() {
		if !strings.Contains(s.log.String(), "op=read") {
			t.Errorf("the refused reads are not logged as denials:\n%s", s.log)
		}
	})
}

// TestTokensOverPlainConnections (issue 27, item 5): a bearer token sent
// over an unencrypted connection (in ?authz= over plain root://, or to
// plain http://) does not count: the client is anonymous, and the denial
// says why. Before, plain root:// accepted the token although the
// documentation says plain root:// clients are anonymous. A site that
// terminates TLS elsewhere sets allow_tokens_without_tls.
func TestTokensOverPlainConnections(t *testing.T) {
	p := newPKI(t)
	plainHTTP := func(xc *xrdfront.Config, hc *httpfront.Config) { hc.TLSConfig = nil }
	const f = "/store/mc/f.root"
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprintf("allow_tokens_without_tls=%v", allow), func(t *testing.T) {
			s := newStack(t, p, func(c *Config) { c.AllowTokensWithoutTLS = allow }, plainHTTP)
			tok := s.token(t, "storage.read:/store")
			u := s.root + "/" + f + "?authz=" + url.QueryEscape("Bearer "+tok)
			got, r := s.xrdcp(t, s.xrdEnv(t), u)
			if allow {
				if r.Err != nil || !bytes.Equal(got, s.data[f]) {
					t.Fatalf("xrdcp with ?authz= over root:// allowed by the site: %s", r)
				}
			} else if out := r.String(); r.Err == nil || !strings.Contains(out, "3010") || !strings.Contains(out, "unencrypted root://") {
				t.Fatalf("xrdcp with ?authz= over plain root://: want kXR_NotAuthorized saying the token came unencrypted: %s", r)
			}

			realclient.Require(t, "curl")
			httpURL := strings.Replace(s.https, "https://", "http://", 1) + f
			dst := filepath.Join(t.TempDir(), "body")
			c := realclient.Run(t, realclient.Env(), "curl", "-sS", "-o", dst, "-w", "%{http_code}", "-H", "Authorization: Bearer "+tok, httpURL)
			body, _ := os.ReadFile(dst)
			code, _ := strconv.Atoi(strings.TrimSpace(string(c.Stdout)))
			if allow {
				if code != http.StatusOK || !bytes.Equal(body, s.data[f]) {
					t.Fatalf("curl with a token over http:// allowed by the site: %d %s", code, c)
				}
			} else if code != http.StatusForbidden || !strings.Contains(string(body), "unencrypted http://") {
				t.Fatalf("curl with a token over plain http://: %d %q, want 403 saying the token came unencrypted", code, body)
			}
		})
	}
}
