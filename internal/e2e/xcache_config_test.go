package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/xrdpfc"
	"github.com/hepcache/hepcache/internal/xrdtest"
)

// TestFromXCacheConfig is the migration page's path on a real XCache
// 5.5.3: XCache runs a site configuration (variables, if exec, continue
// into a directory, an export of /store only) and caches a file and part
// of another; `hepcache from-xcache` translates that configuration, `hepcache
// check` accepts the result, `hepcache adopt-xcache --config` takes XCache's
// files, and `hepcache serve --config` serves what XCache served (the
// complete file and the adopted block with the origin stopped) and refuses
// what XCache refused.
func TestFromXCacheConfig(t *testing.T) {
	realclient.Require(t, "xrdcp")
	py := realclient.Python(t, realclient.DebianPython, "XRootD.client")
	dir := t.TempDir()
	data := filepath.Join(dir, "origin")
	for p, n := range map[string]int{"store/a.root": 5 << 20, "store/b.root": 2<<20 + 7, "other/c.root": 1000} {
		os.MkdirAll(filepath.Join(data, filepath.Dir(p)), 0o755)
		writePattern(t, filepath.Join(data, p), n)
	}
	origin := xrdtest.StartOrigin(t, data)
	xcDir := filepath.Join(dir, "xcache")
	conf := filepath.Join(dir, "etc")
	os.MkdirAll(filepath.Join(conf, "site.d"), 0o755)
	cfg := filepath.Join(conf, "xcache.cfg")
	os.WriteFile(cfg, []byte(`# the site's XCache
set cacheroot = `+xcDir+`
set upstream = `+origin.Addr+`
all.export /store
ofs.osslib libXrdPss.so
pss.cachelib libXrdPfc.so
pss.origin $(upstream)
oss.localroot $(cacheroot)
if exec xrootd
  pfc.ram 1g
fi
if exec cmsd
  pfc.ram 2g
fi
pfc.blocksize 512k
pfc.prefetch 0
pfc.diskusage 0.90 0.95 purgeinterval 300s
continue `+filepath.Join(conf, "site.d")+`
`), 0o644)
	os.WriteFile(filepath.Join(conf, "site.d", "10-site.cfg"), []byte("all.sitename TEST_SITE\nxrootd.trace emsg login\n"), 0o644)
	xrdtest.Chown(t, conf)
	xc := xrdtest.StartConfigFile(t, "xcache", xcDir, cfg)
	env := realclient.Env()
	realclient.MustRun(t, env, "xrdcp", "-f", "-s", xc.URL+"//store/a.root", filepath.Join(dir, "warm"))
	realclient.MustRunPython(t, env, py, `
import sys
from XRootD import client
f = client.File()
st, _ = f.open(sys.argv[1])
assert st.ok, st
st, d = f.read(0, 512<<10)
assert st.ok and len(d) == 512<<10, st
f.close()
`, xc.URL+"//store/b.root")
	if r := realclient.Run(t, env, "xrdcp", "-f", "-s", xc.URL+"//other/c.root", filepath.Join(dir, "c")); r.Err == nil {
		t.Fatalf("XCache served a path it does not export")
	}
	eventually.True(t, func() bool {
		n := func(p string) int {
			b, _ := os.ReadFile(filepath.Join(xcDir, p) + xrdpfc.Ext)
			in, err := xrdpfc.Parse(b)
			if err != nil {
				return -1
			}
			return in.Synced.Count()
		}
		return n("store/a.root") == 10 && n("store/b.root") == 1
	}, "XCache's .cinfo files")
	xc.Stop()

	hcCfg := filepath.Join(dir, "hepcache.toml")
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(hepcacheBin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("hepcache %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("from-xcache", "-o", hcCfg, cfg)
	toml, _ := os.ReadFile(hcCfg)
	for _, want := range []string{`block_size = "512K"`, `default = "root://` + origin.Addr + `"`, `dir = "` + filepath.Join(filepath.Dir(xcDir), "hepcache") + `"`, `site = "TEST_SITE"`, `path = "/store"`} {
		if !strings.Contains(string(toml), want) {
			t.Errorf("translated config lacks %s:\n%s", want, toml)
		}
	}
	if out := run("check", "--config", hcCfg); !strings.Contains(out, "configuration OK") {
		t.Fatalf("check: %s", out)
	}
	if out := run("adopt-xcache", "--config", hcCfg, xcDir); !strings.Contains(out, "adopted 1 complete and 1 partial files") {
		t.Fatalf("adopt-xcache: %s", out)
	}

	p := startProc(t, "--config", hcCfg)
	if err := syscall.Kill(origin.PID(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(origin.PID(), syscall.SIGCONT)
	url := "root://" + p.addr + "/"
	got := filepath.Join(dir, "got")
	realclient.MustRun(t, env, "xrdcp", "-f", "-s", url+"/store/a.root", got)
	sameFile(t, got, filepath.Join(data, "store/a.root"))
	realclient.MustRunPython(t, env, py, `
import sys
from XRootD import client
f = client.File()
st, _ = f.open(sys.argv[1])
assert st.ok, st
st, d = f.read(0, 512<<10)
assert st.ok and d == open(sys.argv[2], "rb").read(512<<10), st
f.close()
`, url+"/store/b.root", filepath.Join(data, "store/b.root"))
	syscall.Kill(origin.PID(), syscall.SIGCONT)
	realclient.MustRun(t, env, "xrdcp", "-f", "-s", url+"/store/b.root", got)
	sameFile(t, got, filepath.Join(data, "store/b.root"))
	if r := realclient.Run(t, env, "xrdcp", "-f", "-s", url+"/other/c.root", got); r.Err == nil || !strings.Contains(string(r.Stderr), "3010") {
		t.Fatalf("hepcache served a path XCache does not export: %v", r)
	}
}

func sameFile(tb testing.TB, a, b string) {
	tb.Helper()
	x, _ := os.ReadFile(a)
	y, _ := os.ReadFile(b)
	if string(x) != string(y) {
		tb.Fatalf("%s (%d bytes) differs from %s (%d bytes)", a, len(x), b, len(y))
	}
}
