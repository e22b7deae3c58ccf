package xrootd

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/metrics"
	"github.com/hepcache/hepcache/internal/realclient"
)

// localServer serves dir with a backend that redirects every open a client
// can follow to file://localhost + local(path), as the cache does for
// complete files with cache.local_redirect.
func localServer(tb testing.TB, local func(path string) string) *testServer {
	tb.Helper()
	return startServer(tb, "", func(c *Config, r *recorder) {
		c.Manager = true // as internal/server sets it with local redirects
		r.openErr = func(req backend.Request) error {
			if !req.FollowsFileRedirect {
				return nil
			}
			return &backend.RedirectError{URL: "file://localhost" + local(req.Path)}
		}
	})
}

// pyLocalRead opens a file with the Python bindings, reads it whole and with
// a vector read, and prints the sha256 of both.
const pyLocalRead = `
import hashlib, sys
from XRootD import client
from XRootD.client.flags import OpenFlags
f = client.File()
st, _ = f.open(sys.argv[1], OpenFlags.READ)
assert st.ok, st.message
st, info = f.stat(); assert st.ok, st.message
st, data = f.read(0, info.size); assert st.ok, st.message
st, vr = f.vector_read([(0, 100), (info.size - 100, 100)]); assert st.ok, st.message
f.close()
print(hashlib.sha256(data).hexdigest(), hashlib.sha256(b"".join(c.buffer for c in vr.chunks)).hexdigest())
`

// TestLocalRedirectRealClients: xrdcp (pgread and plain reads) and both
// Python bindings follow a kXR_redirect to file://localhost/... and read the
// local file without the server sending a byte; a client that cannot open
// the local file (no mount) comes back with tried= and is served here.
func TestLocalRedirectRealClients(t *testing.T) {
	xrdcp := realclient.Require(t, "xrdcp")
	mount := t.TempDir() // what the client sees of the cache space
	missing := filepath.Join(t.TempDir(), "not-mounted")
	ts := localServer(t, func(p string) string {
		if strings.HasPrefix(p, "/store/") {
			return filepath.Join(mount, p)
		}
		return filepath.Join(missing, p)
	})
	const size = 3<<20 + 77
	want := writeRandom(t, ts.dir, "store/f.root", size)
	// The client's copy is the same file, as in a shared cache space.
	if err := os.MkdirAll(filepath.Join(mount, "store"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(ts.dir, "store/f.root"))
	if err := os.WriteFile(filepath.Join(mount, "store/f.root"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	writeRandom(t, ts.dir, "nomount/f.root", size)
	nomountWant := fileSHA(t, filepath.Join(ts.dir, "nomount/f.root"))
	vrWant := sha256hex(append(append([]byte(nil), b[:100]...), b[len(b)-100:]...))

	type reader struct {
		name string
		read func(t *testing.T, url string) string // sha256 of the file
	}
	readers := []reader{
		{"xrdcp pgread", func(t *testing.T, url string) string {
			r := realclient.MustRun(t, realclient.Env(), xrdcp, "-d", "2", "-s", "-f", url, "-")
			if strings.Contains(url, "/store/") && !strings.Contains(string(r.Stderr), "Handling local redirect") {
				t.Errorf("xrdcp -d 2 does not show the local redirect:\n%.2000s", r.Stderr)
			}
			return sha256hex(r.Stdout)
		}},
		{"xrdcp plain read", func(t *testing.T, url string) string {
			return sha256hex(realclient.MustRun(t, realclient.Env("XRD_CPUSEPGWRTRD=0"), xrdcp, "-s", "-f", url, "-").Stdout)
		}},
	}
	for _, py := range []struct{ name, bin string }{
		{"python debian-5.5.3", realclient.DebianPython},
		{"python pypi-venv", realclient.VenvPython()},
	} {
		readers = append(readers, reader{py.name, func(t *testing.T, url string) string {
			bin := realclient.Python(t, py.bin, "XRootD.client")
			r := realclient.MustRunPython(t, realclient.Env(), bin, pyLocalRead, url)
			sha, vr, _ := strings.Cut(strings.TrimSpace(string(r.Stdout)), " ")
			if strings.Contains(url, "/store/") && vr != vrWant {
				t.Errorf("vector_read of the local file: sha256 %s, want %s", vr, vrWant)
			}
			return sha
		}})
	}
	st := ts.srv.Stats()
	for _, rd := range readers {
		t.Run(rd.name, func(t *testing.T) {
			t.Run("mounted", func(t *testing.T) {
				sent, locals, reqs := st.BytesSent.Load(), st.LocalRedirects.Load(), len(ts.rec.requests())
				if got := rd.read(t, ts.url+"//store/f.root"); got != want {
					t.Fatalf("sha256 %s, want %s", got, want)
				}
				if st.BytesSent.Load() != sent || st.LocalRedirects.Load() != locals+1 {
					t.Fatalf("server sent %d file bytes and %d local redirects; want 0 and 1",
						st.BytesSent.Load()-sent, st.LocalRedirects.Load()-locals)
				}
				for _, req := range ts.rec.requests()[reqs:] {
					if req.Path == "/store/f.root" && !req.FollowsFileRedirect {
						t.Fatalf("the file was also opened through the server: %+v", req)
					}
				}
			})
			t.Run("not mounted", func(t *testing.T) {
				sent, fallbacks, reqs := st.BytesSent.Load(), st.LocalFallbacks.Load(), len(ts.rec.requests())
				if got := rd.read(t, ts.url+"//nomount/f.root"); got != nomountWant {
					t.Fatalf("sha256 %s, want %s", got, nomountWant)
				}
				if st.LocalFallbacks.Load() != fallbacks+1 || st.BytesSent.Load() == sent {
					t.Fatalf("fallbacks %d, bytes sent %d; want 1 and the file", st.LocalFallbacks.Load()-fallbacks, st.BytesSent.Load()-sent)
				}
				var served bool
				for _, req := range ts.rec.requests()[reqs:] {
					served = served || req.Path == "/nomount/f.root" && !req.FollowsFileRedirect
				}
				if !served {
					t.Fatalf("the fallback open did not name the original path: %+v", ts.rec.requests()[reqs:])
				}
			})
		})
	}
}

// TestLocalFallback: an open with tried= is never redirected to a local
// file, and one of the local path of a redirect sent on the connection
// (XrdCl 5.5.3 retries with it) is an open of the original path.
func TestLocalFallback(t *testing.T) {
	ts := localServer(t, func(p string) string { return "/nonexistent" + p })
	c := &conn{srv: ts.srv, log: ts.srv.log}
	c.noteLocalRedirect(&backend.RedirectError{URL: "file://localhost/mnt/data/root/o/store/a"}, "/store/a?x=1")
	c.noteLocalRedirect(&backend.RedirectError{URL: "file://localhost/mnt/data/root/o/store/c"}, "/store/c")
	c.noteLocalRedirect(&backend.RedirectError{URL: "root://h:1//store/b", Host: "h", Port: 1}, "/store/b")
	for _, tc := range []struct {
		name, raw, want string
		retry           bool
		fallbacks       int64 // counted LocalFallbacks
	}{
		{"own open of a local path", "/mnt/data/root/o/store/a", "/mnt/data/root/o/store/a", false, 0},
		{"tried= elsewhere", "/store/b?tried=h", "/store/b?tried=h", true, 0},
		{"5.5.3 retry", "/mnt/data/root/o/store/a?tried=127.0.0.1&triedrc=srverr", "/store/a?x=1", true, 1},
		{"5.5.3 retry again (forgotten)", "/mnt/data/root/o/store/a?tried=127.0.0.1&triedrc=srverr", "/mnt/data/root/o/store/a?tried=127.0.0.1&triedrc=srverr", true, 0},
		{"6.x retry", "/store/c?tried=127.0.0.1&triedrc=enoent", "/store/c?tried=127.0.0.1&triedrc=enoent", true, 1},
	} {
		before := ts.srv.Stats().LocalFallbacks.Load()
		got, retry := c.localFallback(tc.raw)
		if got != tc.want || retry != tc.retry {
			t.Errorf("%s: localFallback(%q) = %q, %v; want %q, %v", tc.name, tc.raw, got, retry, tc.want, tc.retry)
		}
		if n := ts.srv.Stats().LocalFallbacks.Load() - before; n != tc.fallbacks {
			t.Errorf("%s: counted %d fallbacks, want %d", tc.name, n, tc.fallbacks)
		}
	}
	for i := 0; i < 2*maxLocalRedirects; i++ {
		c.noteLocalRedirect(&backend.RedirectError{URL: "file://localhost/x"}, "/y")
	}
	if len(c.local) != maxLocalRedirects {
		t.Fatalf("remembered %d redirects, want at most %d", len(c.local), maxLocalRedirects)
	}
}

// TestMetricsFromRealClients: xrdcp and xrdfs traffic shows up in the
// registry per protocol, operation and outcome, and connected clients are
// listed while connected.
func TestMetricsFromRealClients(t *testing.T) {
	xrdcp := realclient.Require(t, "xrdcp")
	xrdfs := realclient.Require(t, "xrdfs")
	reg, err := metrics.New(&metrics.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, "", func(c *Config, r *recorder) { c.Metrics = reg })
	want := writeRandom(t, ts.dir, "store/m.root", 1<<20+3)
	r := realclient.MustRun(t, realclient.Env(), xrdcp, "-s", "-f", ts.url+"//store/m.root", "-")
	if sha256hex(r.Stdout) != want {
		t.Fatal("xrdcp copy differs")
	}
	realclient.MustRun(t, realclient.Env(), xrdfs, ts.url, "stat", "/store/m.root")
	realclient.MustRun(t, realclient.Env(), xrdfs, ts.url, "ls", "/store")
	if r := realclient.Run(t, realclient.Env(), xrdfs, ts.url, "stat", "/store/missing"); r.Err == nil {
		t.Fatal("xrdfs stat of a missing file succeeded")
	}
	var out bytes.Buffer
	reg.WriteTo(&out)
	for _, line := range []string{
		`hepcache_requests_total{protocol="root",operation="open",outcome="ok"} 1`,
		`hepcache_requests_total{protocol="root",operation="close",outcome="ok"} 1`,
		`hepcache_requests_total{protocol="root",operation="stat",outcome="ok"}`,
		`hepcache_requests_total{protocol="root",operation="stat",outcome="not_found"} 1`,
		`hepcache_requests_total{protocol="root",operation="dirlist",outcome="ok"} 1`,
		`hepcache_requests_total{protocol="root",operation="locate",outcome="ok"}`,
		`hepcache_requests_total{protocol="root",operation="pgread",outcome="ok"}`,
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("metrics lack %s", line)
		}
	}
	if t.Failed() {
		t.Fatalf("metrics:\n%s", out.String())
	}

	// A logged-in connection is a client until it closes.
	rc := dialRaw(t, ts.addr, true)
	if cl := reg.Clients().List(); len(cl) != 1 || cl[0].Protocol != "root" {
		t.Fatalf("clients while connected: %+v", cl)
	}
	rc.nc.Close()
	ts.srv.Close() // waits for every connection to finish
	if n := reg.Clients().Len(); n != 0 {
		t.Fatalf("%d clients left after the connections closed", n)
	}
}
