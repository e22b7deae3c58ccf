package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/realclient"
)

// bindingsScript reads a file through the XRootD Python bindings with read,
// vector_read and stat, and compares with the local copy.
const bindingsScript = `
import sys
from XRootD import client
from XRootD.client.flags import OpenFlags
url, local = sys.argv[1], sys.argv[2]
data = open(local, "rb").read()
f = client.File()
st, _ = f.open(url, OpenFlags.READ)
assert st.ok, st.message
st, info = f.stat()
assert st.ok, st.message
assert info.size == len(data), (info.size, len(data))
st, buf = f.read(12345, 100000)
assert st.ok, st.message
assert buf == data[12345:112345], "read differs"
chunks = [(0, 10), (1 << 20, 4096), (len(data) - 7, 7), (3 << 20, 1 << 20)]
st, vr = f.vector_read(chunks)
assert st.ok, st.message
for (off, n), c in zip(chunks, vr.chunks):
    assert c.buffer == data[off:off + n], ("vector_read differs", off, n)
f.close()
fs = client.FileSystem(url[:url.index("/", len("root://"))])
st, info = fs.stat(url[url.index("/", len("root://")):])
assert st.ok, st.message
assert info.size == len(data)
print("OK", len(vr.chunks))
`

func TestPythonBindingsThroughCache(t *testing.T) {
	data := t.TempDir()
	writeFile(t, data, "store/py.root", 5<<20+3, 6)
	s := startStack(t, data, nil)
	for _, py := range []struct{ name, bin string }{
		{"debian-5.5.3", realclient.DebianPython},
		{"pypi-venv", realclient.VenvPython()},
	} {
		t.Run(py.name, func(t *testing.T) {
			bin := realclient.Python(t, py.bin, "XRootD.client")
			r := realclient.MustRunPython(t, realclient.Env(), bin, bindingsScript, s.url+"//store/py.root", filepath.Join(data, "store/py.root"))
			if !strings.HasPrefix(string(r.Stdout), "OK 4") {
				t.Fatalf("bindings: %s", r)
			}
		})
	}
}

const uprootWrite = `
import sys, numpy as np, uproot
n = 20000
rng = np.random.default_rng(7)
with uproot.recreate(sys.argv[1]) as f:
    f["events"] = {"nparticles": rng.integers(1, 2000, n).astype(np.int32),
                   "pt": rng.exponential(30.0, n), "eta": rng.normal(0, 2, n)}
`

const uprootRead = `
import sys, uproot, numpy as np
url, local = sys.argv[1], sys.argv[2]
with uproot.open(url) as f:
    t = f["events"]
    remote = t.arrays(["nparticles", "pt", "eta"], library="np")
with uproot.open(local) as f:
    ref = f["events"].arrays(["nparticles", "pt", "eta"], library="np")
for k in ref:
    assert np.array_equal(remote[k], ref[k]), k
print("OK", len(remote["pt"]), float(remote["pt"].sum()))
`

func TestUprootTTreeThroughCache(t *testing.T) {
	py := realclient.Python(t, realclient.VenvPython(), "uproot", "fsspec_xrootd", "XRootD.client")
	data := t.TempDir()
	local := filepath.Join(data, "store", "tree.root")
	os.MkdirAll(filepath.Dir(local), 0o755)
	realclient.MustRunPython(t, realclient.Env(), py, uprootWrite, local)
	s := startStack(t, data, nil)
	for _, pass := range []string{"cold", "hot"} {
		before := s.originBytes()
		r := realclient.MustRunPython(t, realclient.Env(), py, uprootRead, s.url+"//store/tree.root", local)
		if !strings.HasPrefix(string(r.Stdout), "OK 20000") {
			t.Fatalf("%s uproot read: %s", pass, r)
		}
		if pass == "hot" && s.originBytes() != before {
			t.Fatalf("hot uproot read moved %d bytes from the origin", s.originBytes()-before)
		}
	}
}

// TestProxyPluginForwarding is seed 000's client setup: the client keeps its
// URL root://origin//path and the XrdClProxyPlugin sends it to the cache as
// root://cache//root://origin//path; the cache fetches from the origin named
// in the path, only if it is on the allow-list.
func TestProxyPluginForwarding(t *testing.T) {
	realclient.RequireFile(t, realclient.ProxyPlugin)
	data := t.TempDir()
	want := writeFile(t, data, "store/fwd.root", 3<<20+1, 7)
	s := startStack(t, data, func(c *config.Config) {
		c.Origin.Default = ""
		c.Origin.ForwardAllow = []string{"127.0.0.1"}
	})
	// The origin itself, as the client names it (not the counting link).
	originURL := "root://" + s.origin.Addr + "//store/fwd.root"
	env := realclient.Env("XRD_PLUGIN="+realclient.ProxyPlugin, "XROOT_PROXY="+s.url+"//",
		// XrdCl 5.5.3's proxy plugin does not implement pgread.
		"XRD_CPUSEPGWRTRD=0")
	for pass := 0; pass < 2; pass++ {
		if got := xrdcpSum(t, env, originURL); got != want {
			t.Fatalf("pass %d through the proxy plugin: sha256 %s, want %s", pass, hex(got), hex(want))
		}
	}
	st := s.srv.Cache().Stats()
	if st.Misses.Load() != 1 || st.Hits.Load() != 1 {
		t.Fatalf("forwarded reads: %d misses, %d hits; want 1 and 1 (one shared entry)", st.Misses.Load(), st.Hits.Load())
	}
	infos := inspect(t, s.cfg.Cache.Dir, "/store/fwd.root")
	if len(infos) != 1 || infos[0] != "root://"+s.origin.Addr {
		t.Fatalf("cache entry origins %v, want [root://%s]", infos, s.origin.Addr)
	}
}

func TestForwardingRefusedOutsideAllowList(t *testing.T) {
	realclient.RequireFile(t, realclient.ProxyPlugin)
	data := t.TempDir()
	writeFile(t, data, "store/x.root", 1000, 8)
	s := startStack(t, data, func(c *config.Config) {
		c.Origin.Default = ""
		c.Origin.ForwardAllow = []string{"allowed.example.org"}
	})
	env := realclient.Env("XRD_PLUGIN="+realclient.ProxyPlugin, "XROOT_PROXY="+s.url+"//", "XRD_CPUSEPGWRTRD=0")
	r := realclient.Run(t, env, "xrdcp", "-f", "root://"+s.origin.Addr+"//store/x.root", "-")
	if r.Err == nil {
		t.Fatal("forwarding to an origin outside the allow-list succeeded")
	}
	if msg := string(r.Stderr); !strings.Contains(msg, "not allowed") {
		t.Fatalf("xrdcp's error does not say why: %s", msg)
	}
	if got := s.srv.Cache().Stats().BytesFetched.Load(); got != 0 {
		t.Fatalf("refused request fetched %d bytes", got)
	}
}

func inspect(tb testing.TB, dir, p string) []string {
	tb.Helper()
	origins, err := cacheInspect(dir, p)
	if err != nil {
		tb.Fatal(err)
	}
	return origins
}
