package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hepcache/hepcache/internal/auth/authtest"
	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/xrdtest"
)

// TestServeGSI runs `hepcache serve` with gsi on both sides: in front of a
// real C++ xrootd that admits only gsi (the cache presents its own proxy,
// origin_cert), clients authenticate with their proxies (xrdcp, the Debian
// and PyPI Python bindings) and a rule needing the CMS VO is honoured;
// SIGHUP makes new handshakes present a renewed gsi host certificate.
func TestServeGSI(t *testing.T) {
	realclient.Require(t, "xrdcp")
	realclient.RequireFile(t, "/usr/lib/x86_64-linux-gnu/libXrdSecgsi-5.so")
	dir := t.TempDir()
	ca := authtest.NewCA(t, "hepcache gsi e2e CA")
	caDir := filepath.Join(dir, "certificates")
	authtest.RequireCADir(t, caDir, ca)
	vomsdir := filepath.Join(dir, "vomsdir")
	voms := ca.VOMSServer(t, "cms", "voms.cms.test", 2)
	voms.WriteLSC(t, vomsdir)

	// The origin: a C++ xrootd with its own RSA host certificate, gsi only.
	data := filepath.Join(dir, "data")
	os.MkdirAll(filepath.Join(data, "store"), 0o755)
	want := bytes.Repeat([]byte("hepcache gsi e2e "), 200000)
	os.WriteFile(filepath.Join(data, "store", "f.root"), want, 0o644)
	xc, xk := ca.HostKey(t, authtest.RSAKey(t, 3), "localhost").WriteFiles(t, dir, "xrdhost")
	srv := xrdtest.StartGSIOrigin(t, data, xrdtest.GSIOptions{CertDir: caDir, CertFile: xc, KeyFile: xk})

	// The cache: its own proxy towards the origin, a gsi host certificate
	// for its clients.
	robot := ca.User(t, "hepcache-robot", 0).Proxy(t, authtest.ProxyOpts{Key: authtest.RSAKey(t, 4)}).WriteProxyFile(t, dir, "x509up_cache")
	gc, gk := ca.HostKey(t, authtest.RSAKey(t, 5), "localhost").WriteFiles(t, dir, "gsihost")
	mon := newMonitorCollector(t)
	cfg := `
[cache]
dir = "` + filepath.Join(dir, "cache") + `"
[origin]
default = "root://localhost:` + strings.TrimPrefix(srv.Addr, "127.0.0.1:") + `"
[security]
gsi = true
gsi_cert = "` + gc + `"
gsi_key = "` + gk + `"
ca_paths = ["` + caDir + `"]
vomsdir = "` + vomsdir + `"
origin_cert = "` + robot + `"
origin_key = "` + robot + `"
origin_ca_paths = ["` + caDir + `"]
[[security.rule]]
path = "/"
read = ["vo:cms"]
[monitor]
fstream = "` + mon.addr + `"
fstream_flush = "1s"
`
	cfgFile := filepath.Join(dir, "hepcache.toml")
	os.WriteFile(cfgFile, []byte(cfg), 0o644)
	p := startProc(t, "--config", cfgFile)
	url := "root://localhost:" + strings.TrimPrefix(p.addr, "127.0.0.1:") + "//store/f.root"

	user := ca.User(t, "alice", 1)
	ac := voms.AC(t, user.Cert, authtest.ACOpts{FQANs: []string{"/cms/uscms/Role=production/Capability=NULL"}})
	cms := user.Proxy(t, authtest.ProxyOpts{Key: authtest.RSAKey(t, 6), VOMS: authtest.VOMSExtension(ac)}).WriteProxyFile(t, dir, "x509up_cms")
	plain := user.Proxy(t, authtest.ProxyOpts{Key: authtest.RSAKey(t, 6)}).WriteProxyFile(t, dir, "x509up_plain")
	env := func(proxy, certDir string) []string {
		return realclient.Env("XrdSecPROTOCOL=gsi", "X509_USER_PROXY="+proxy, "X509_CERT_DIR="+certDir,
			"X509_USER_CERT=/nonexistent", "X509_USER_KEY=/nonexistent", "XRD_LOGLEVEL=Info")
	}
	xrdcp := func(t *testing.T, e []string) ([]byte, realclient.Result) {
		t.Helper()
		out := filepath.Join(t.TempDir(), "out")
		r := realclient.Run(t, e, "xrdcp", "-f", "-N", url, out)
		b, _ := os.ReadFile(out)
		return b, r
	}

	t.Run("xrdcp with a CMS VOMS proxy", func(t *testing.T) {
		if got, r := xrdcp(t, env(cms, caDir)); r.Err != nil || !bytes.Equal(got, want) {
			t.Fatalf("xrdcp through the cache: %s", r)
		}
		// The f-stream's user record carries the VO, role and group of
		// the proxy's VOMS attributes, as XRootD's does (they were empty).
		eventually.True(t, func() bool {
			f := mon.Files()
			return len(f) == 1 && f[0].Closed
		}, "the read on the f-stream")
		if u := mon.Files()[0].User; !strings.Contains(u.Info, "&p=gsi&") || !strings.Contains(u.Info, "&o=cms&r=production&g=/cms/uscms&") {
			t.Errorf("f-stream user record: %+v", u)
		}
	})
	t.Run("xrdcp with a proxy without VO", func(t *testing.T) {
		if _, r := xrdcp(t, env(plain, caDir)); r.Err == nil || !strings.Contains(string(r.Stdout)+string(r.Stderr), "3010") {
			t.Fatalf("a proxy without the CMS VO read: %s", r)
		}
	})
	for _, py := range []struct{ name, bin string }{
		{"debian-5.5.3", realclient.DebianPython},
		{"pypi-venv", realclient.VenvPython()},
	} {
		t.Run("python "+py.name, func(t *testing.T) {
			bin := realclient.Python(t, py.bin, "XRootD.client")
			r := realclient.RunPython(t, env(cms, caDir), bin, pyReadHead, url, "10000000")
			if r.Err != nil || !bytes.Equal(r.Stdout, want) {
				t.Fatalf("python bindings through gsi: %s", r)
			}
		})
	}

	// A renewed host certificate from another CA: after SIGHUP a client
	// trusting only that CA for the server verifies the cache.
	ca2 := authtest.NewCA(t, "hepcache gsi e2e CA 2")
	both := filepath.Join(dir, "certificates2")
	authtest.WriteCADir(t, both, ca, ca2)
	ca2.HostKey(t, authtest.RSAKey(t, 7), "localhost").WriteFiles(t, dir, "gsihost")
	p.cmd.Process.Signal(syscall.SIGHUP)
	eventually.True(t, func() bool { return strings.Contains(p.log.String(), "reloaded gsi host certificate") }, "SIGHUP to reload the gsi certificate")
	if got, r := xrdcp(t, env(cms, both)); r.Err != nil || !bytes.Equal(got, want) {
		t.Fatalf("xrdcp after the reload: %s", r)
	}
	if _, r := xrdcp(t, env(cms, caDir)); r.Err == nil {
		t.Fatalf("a client not trusting the renewed certificate's CA still verified the cache: %s", r)
	}
}
