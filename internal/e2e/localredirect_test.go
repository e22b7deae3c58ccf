package e2e

import (
	"crypto/sha256"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/realclient"
)

// TestLocalRedirect is seed 000's shared cache space: the clients mount the
// cache directory (here: the same path), and root:// opens of files that
// are complete in the cache are redirected to the local file, which XrdCl
// reads itself. The bytes are right and the cache serves none of them; the
// origin is not asked either. HTTP clients are served as before.
func TestLocalRedirect(t *testing.T) {
	realclient.Require(t, "curl")
	data := t.TempDir()
	const size = 6<<20 + 4321
	want := writeFile(t, data, "store/mc/f.root", size, 41)
	s := startStack(t, data, func(c *config.Config) {
		withHTTP(c)
		c.Cache.LocalRedirect = filepath.Join(c.Cache.Dir, "data")
		c.Origin.ForwardAllow = []string{"127.0.0.1"}
	})
	if got := xrdcpSum(t, realclient.Env(), s.url+"//store/mc/f.root"); got != want {
		t.Fatalf("cold xrdcp: sha256 %s, want %s", hex(got), hex(want))
	}
	st := s.srv.Cache().Stats()
	if st.LocalRedirects.Load() != 0 || st.Misses.Load() != 1 {
		t.Fatalf("cold read: %d local redirects, %d misses; want 0 and 1", st.LocalRedirects.Load(), st.Misses.Load())
	}
	s.waitComplete(t, "/store/mc/f.root")

	served := func() int64 { return st.BytesHit.Load() + st.BytesMissed.Load() + st.BytesBypassed.Load() }
	clients := []struct {
		name string
		read func(t *testing.T)
	}{
		{"xrdcp", func(t *testing.T) {
			r := realclient.MustRun(t, realclient.Env(), "xrdcp", "-d", "2", "-s", "-f", s.url+"//store/mc/f.root", "-")
			if got := sha(r.Stdout); got != want {
				t.Fatalf("sha256 %s, want %s", hex(got), hex(want))
			}
			local := "Handling local redirect"
			if !strings.Contains(string(r.Stderr), local) || !strings.Contains(string(r.Stderr), "file: "+s.cfg.Cache.LocalRedirect+"/") {
				t.Fatalf("xrdcp -d 2 shows no local redirect to %s:\n%.3000s", s.cfg.Cache.LocalRedirect, r.Stderr)
			}
		}},
		{"xrdcp plain reads", func(t *testing.T) {
			if got := xrdcpSum(t, realclient.Env("XRD_CPUSEPGWRTRD=0"), s.url+"//store/mc/f.root"); got != want {
				t.Fatalf("sha256 %s, want %s", hex(got), hex(want))
			}
		}},
	}
	for _, py := range []struct{ name, bin string }{
		{"python debian-5.5.3", realclient.DebianPython},
		{"python pypi-venv", realclient.VenvPython()},
	} {
		clients = append(clients, struct {
			name string
			read func(t *testing.T)
		}{py.name, func(t *testing.T) {
			bin := realclient.Python(t, py.bin, "XRootD.client")
			// read, vector_read, stat of the file and of the path.
			r := realclient.MustRunPython(t, realclient.Env(), bin, bindingsScript, s.url+"//store/mc/f.root", filepath.Join(data, "store/mc/f.root"))
			if !strings.HasPrefix(string(r.Stdout), "OK 4") {
				t.Fatalf("bindings: %s", r)
			}
		}})
	}
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			m0 := s.scrape(t)
			srv0, redirects, origin0 := served(), st.LocalRedirects.Load(), s.originBytes()
			c.read(t)
			if got := served() - srv0; got != 0 {
				t.Errorf("the cache served %d bytes of a redirected file", got)
			}
			if got := st.LocalRedirects.Load() - redirects; got != 1 {
				t.Errorf("%d local redirects, want 1", got)
			}
			if got := s.originBytes() - origin0; got != 0 {
				t.Errorf("the origin sent %d bytes", got)
			}
			m1 := s.scrape(t)
			for _, name := range []string{
				"hepcache_local_redirects_total",
				`hepcache_requests_total{protocol="root",operation="open",outcome="redirect"}`,
			} {
				if m1[name] != m0[name]+1 {
					t.Errorf("%s: %v -> %v, want +1", name, m0[name], m1[name])
				}
			}
			if m1[`hepcache_served_bytes_total{source="hit"}`] != m0[`hepcache_served_bytes_total{source="hit"}`] {
				t.Error("hepcache_served_bytes_total{source=\"hit\"} moved")
			}
		})
	}

	// Seed 000's client setup: the XrdClProxyPlugin sends
	// root://origin//path to the cache as root://cache//root://origin//path.
	t.Run("proxy plugin", func(t *testing.T) {
		realclient.RequireFile(t, realclient.ProxyPlugin)
		fwd := writeFile(t, data, "store/mc/fwd.root", size, 43)
		env := realclient.Env("XRD_PLUGIN="+realclient.ProxyPlugin, "XROOT_PROXY="+s.url+"//", "XRD_CPUSEPGWRTRD=0")
		url := "root://" + s.origin.Addr + "//store/mc/fwd.root"
		if got := xrdcpSum(t, env, url); got != fwd {
			t.Fatalf("cold read through the plugin: sha256 %s, want %s", hex(got), hex(fwd))
		}
		s.waitComplete(t, "/store/mc/fwd.root")
		srv0, redirects := served(), st.LocalRedirects.Load()
		if got := xrdcpSum(t, env, url); got != fwd {
			t.Fatalf("hot read through the plugin: sha256 %s, want %s", hex(got), hex(fwd))
		}
		if served() != srv0 || st.LocalRedirects.Load() != redirects+1 {
			t.Fatalf("hot read through the plugin: cache served %d bytes, %d local redirects; want 0 and 1",
				served()-srv0, st.LocalRedirects.Load()-redirects)
		}
	})

	t.Run("uproot", func(t *testing.T) {
		py := realclient.Python(t, realclient.VenvPython(), "uproot", "fsspec_xrootd", "XRootD.client")
		local := filepath.Join(data, "store", "mc", "tree.root")
		realclient.MustRunPython(t, realclient.Env(), py, uprootWrite, local)
		url := s.url + "//store/mc/tree.root"
		for _, pass := range []string{"cold", "hot"} {
			srv0, redirects := served(), st.LocalRedirects.Load()
			r := realclient.MustRunPython(t, realclient.Env(), py, uprootRead, url, local)
			if !strings.HasPrefix(string(r.Stdout), "OK 20000") {
				t.Fatalf("%s uproot read: %s", pass, r)
			}
			if pass == "cold" {
				s.waitComplete(t, "/store/mc/tree.root")
				continue
			}
			if served() != srv0 || st.LocalRedirects.Load() == redirects {
				t.Fatalf("hot uproot read: cache served %d bytes, %d local redirects; want 0 and at least 1",
					served()-srv0, st.LocalRedirects.Load()-redirects)
			}
		}
	})

	t.Run("http is served", func(t *testing.T) {
		srv0, redirects := served(), st.LocalRedirects.Load()
		if got := curlSum(t, s.httpURL()+"/store/mc/f.root"); got != want {
			t.Fatalf("curl: sha256 %s, want %s", hex(got), hex(want))
		}
		if served()-srv0 != size || st.LocalRedirects.Load() != redirects {
			t.Fatalf("HTTP read: cache served %d bytes and made %d local redirects; want %d and 0",
				served()-srv0, st.LocalRedirects.Load()-redirects, size)
		}
	})

	// The access log has a line per redirect (status "redirect", no bytes
	// read through the cache), for the simulator.
	var redirected int
	for _, r := range s.accessLines(t, 1+len(clients)+1) {
		if r.Status == "redirect" && r.Path == "/store/mc/f.root" {
			redirected++
			if r.Protocol != "root" || r.BytesRead != 0 || r.Size != size {
				t.Errorf("redirect access record %+v", r)
			}
		}
	}
	if redirected != len(clients) {
		t.Errorf("%d access records with status redirect, want %d", redirected, len(clients))
	}
}

// TestLocalRedirectWithoutMount: a client that does not see the cache
// space at the configured path (here: a path that does not exist) fails to
// open the local file, comes back to the cache (tried=) and is served the
// file through the proxy. Reads are right; it just gains nothing.
func TestLocalRedirectWithoutMount(t *testing.T) {
	realclient.Require(t, "curl")
	data := t.TempDir()
	const size = 5<<20 + 1 // bindingsScript reads up to 4 MiB
	want := writeFile(t, data, "store/f.root", size, 42)
	s := startStack(t, data, func(c *config.Config) {
		withHTTP(c)
		c.Cache.LocalRedirect = filepath.Join(t.TempDir(), "not-mounted", "data")
	})
	if got := xrdcpSum(t, realclient.Env(), s.url+"//store/f.root"); got != want {
		t.Fatal("cold xrdcp differs")
	}
	s.waitComplete(t, "/store/f.root")
	st := s.srv.Cache().Stats()
	for _, c := range []struct {
		name string
		read func(t *testing.T) [32]byte
	}{
		{"xrdcp", func(t *testing.T) [32]byte { return xrdcpSum(t, realclient.Env(), s.url+"//store/f.root") }},
		{"python pypi-venv", func(t *testing.T) [32]byte {
			bin := realclient.Python(t, realclient.VenvPython(), "XRootD.client")
			r := realclient.MustRunPython(t, realclient.Env(), bin, bindingsScript, s.url+"//store/f.root", filepath.Join(data, "store/f.root"))
			if !strings.HasPrefix(string(r.Stdout), "OK 4") {
				t.Fatalf("bindings: %s", r)
			}
			return want
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			hit0, redirects := st.BytesHit.Load(), st.LocalRedirects.Load()
			if got := c.read(t); got != want {
				t.Fatalf("sha256 %s, want %s", hex(got), hex(want))
			}
			if st.LocalRedirects.Load() != redirects+1 || st.BytesHit.Load() == hit0 {
				t.Fatalf("%d local redirects, %d bytes served from the cache; want 1 and the file",
					st.LocalRedirects.Load()-redirects, st.BytesHit.Load()-hit0)
			}
		})
	}
}

func sha(b []byte) [32]byte { return sha256.Sum256(b) }
