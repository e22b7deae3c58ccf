package xrootd

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/realclient"
)

// proxyEnv is the client setup of seed 000: XrdCl's proxy plugin sends
// root://site//path to root://cache//root://site//path. The 5.5.3 plugin
// has no pgread, hence XRD_CPUSEPGWRTRD=0.
func proxyEnv(t *testing.T, ts *testServer) []string {
	realclient.RequireFile(t, realclient.ProxyPlugin)
	return realclient.Env(
		"XRD_PLUGIN="+realclient.ProxyPlugin,
		"XROOT_PROXY="+ts.url+"//",
		"XRD_CPUSEPGWRTRD=0",
	)
}

func TestProxyPlugin(t *testing.T) {
	xrdcp := realclient.Require(t, "xrdcp")
	ts := startServer(t, "", func(c *Config, r *recorder) {
		r.forbid = map[string]bool{"root://evil.example:1094": true}
	})
	want := writeRandom(t, ts.dir, "store/f.root", 2_345_678)
	env := proxyEnv(t, ts)

	t.Run("xrdcp", func(t *testing.T) {
		r := realclient.MustRun(t, env, xrdcp, "-s", "root://site.example:1094//store/f.root", "-")
		if got := sha256hex(r.Stdout); got != want {
			t.Fatalf("xrdcp through the proxy plugin: %d bytes, sha256 %s, want %s", len(r.Stdout), got, want)
		}
		seen := false
		for _, req := range ts.rec.requests() {
			if req.Origin == "root://site.example:1094" && req.Path == "/store/f.root" {
				seen = true
			}
			if req.Origin == "" {
				t.Fatalf("a request lost its origin: %+v", req)
			}
		}
		if !seen {
			t.Fatalf("the backend never saw origin root://site.example:1094: %+v", ts.rec.requests())
		}
	})
	t.Run("python", func(t *testing.T) {
		python := realclient.Python(t, realclient.DebianPython, "XRootD.client")
		script := `
import hashlib, sys
from XRootD import client
f = client.File()
st, _ = f.open(sys.argv[1])
if not st.ok: raise SystemExit(st.message)
st, data = f.read()
if not st.ok: raise SystemExit(st.message)
st, vr = f.vector_read([(0, 100), (1000000, 5000)])
if not st.ok: raise SystemExit(st.message)
print(hashlib.sha256(data).hexdigest(), len(vr.chunks))
`
		r := realclient.MustRunPython(t, env, python, script, "root://site.example//store/f.root")
		if got := strings.TrimSpace(string(r.Stdout)); got != want+" 2" {
			t.Fatalf("python through the proxy plugin printed %q", got)
		}
	})
	t.Run("forbidden origin", func(t *testing.T) {
		r := realclient.Run(t, env, xrdcp, "-s", "root://evil.example//store/f.root", "-")
		stderr := string(r.Stderr)
		if r.Err == nil || !strings.Contains(stderr, "[3010]") || !strings.Contains(stderr, "allow-list") {
			t.Fatalf("forwarding to a forbidden origin: %v", r)
		}
	})
}

func TestXrdcpErrors(t *testing.T) {
	xrdcp := realclient.Require(t, "xrdcp")
	ts := startServer(t, "", nil)
	writeRandom(t, ts.dir, "f", 10)
	local := filepath.Join(t.TempDir(), "local")
	os.WriteFile(local, []byte("hello"), 0o644)
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"missing file", []string{ts.url + "//nope", local + ".out"}, []string{"[3011]", "/nope"}},
		{"upload refused", []string{local, ts.url + "//upload"}, []string{"[3025]", "read-only"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := realclient.Run(t, realclient.Env(), xrdcp, append([]string{"-f"}, tt.args...)...)
			if r.Err == nil {
				t.Fatalf("xrdcp succeeded: %v", r)
			}
			for _, w := range tt.want {
				if !bytes.Contains(r.Stderr, []byte(w)) {
					t.Fatalf("stderr lacks %q: %v", w, r)
				}
			}
		})
	}
	if _, err := os.Stat(filepath.Join(ts.dir, "upload")); err == nil {
		t.Fatal("the refused upload created a file")
	}
}
