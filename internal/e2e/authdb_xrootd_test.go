package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/auth/authtest"
	"github.com/hepcache/hepcache/internal/auth/x509proxy"
	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/xrdproc"
	"github.com/hepcache/hepcache/internal/xrdtest"
)

// pyOpens opens each URL given and prints 1 for each it could open and
// read, 0 for each it could not, on one line: one process (one
// identity) decides many paths.
const pyOpens = `
import sys
from XRootD import client
out = []
for url in sys.argv[1:]:
    f = client.File()
    st, _ = f.open(url)
    ok = st.ok
    if ok:
        st, _ = f.read(0, 16)
        ok = st.ok
        f.close()
    out.append("1" if ok else "0")
print(" ".join(out))
`

// TestAuthdbAgainstXRootD decides each authdb case against the real XRootD
// 5.5.3: an XCache with gsi (a grid map naming alice and bob; carol's
// proxy unmapped) and unix (anonymous) and the authdb, then `hepcache
// serve` on its `from-xcache` translation, read by the same clients with
// the same proxies (the Debian Python bindings); every answer must be
// XCache's. An authdb xrootd refuses (a duplicate id) makes it exit at
// start, and the translation fail.
func TestAuthdbAgainstXRootD(t *testing.T) {
	realclient.RequireFile(t, "/usr/lib/x86_64-linux-gnu/libXrdSecgsi-5.so")
	py := realclient.Python(t, realclient.DebianPython, "XRootD.client")
	dir := t.TempDir()
	ca := authtest.NewCA(t, "hepcache authdb e2e CA")
	caDir := filepath.Join(dir, "certificates")
	authtest.RequireCADir(t, caDir, ca)
	hc, hk := ca.HostKey(t, authtest.RSAKey(t, 3), "localhost").WriteFiles(t, dir, "xrdhost")

	data := filepath.Join(dir, "origin")
	paths := []string{"/store/f", "/store/test/f", "/store2/f", "/data/f", "/ospool/PROTECTED/f", "/other/f"}
	for _, p := range paths {
		os.MkdirAll(filepath.Join(data, filepath.Dir(p)), 0o755)
		writePattern(t, filepath.Join(data, p), 1000)
	}
	origin := xrdtest.StartOrigin(t, data)

	env := map[string][]string{"anonymous": realclient.Env("XrdSecPROTOCOL=unix")}
	gridmap := ""
	for i, name := range []string{"alice", "bob", "carol"} {
		user := ca.User(t, name, 1+i)
		proxy := user.Proxy(t, authtest.ProxyOpts{Key: authtest.RSAKey(t, 6)}).WriteProxyFile(t, dir, "x509up_"+name)
		env[name] = realclient.Env("XrdSecPROTOCOL=gsi", "X509_USER_PROXY="+proxy, "X509_CERT_DIR="+caDir,
			"X509_USER_CERT=/nonexistent", "X509_USER_KEY=/nonexistent")
		if name != "carol" {
			gridmap += fmt.Sprintf("%q %s\n", x509proxy.MustDN(user.Cert.RawSubject), name)
		}
	}
	conf := filepath.Join(dir, "etc")
	os.MkdirAll(conf, 0o755)
	gridmapFile := filepath.Join(conf, "grid-mapfile")
	os.WriteFile(gridmapFile, []byte(gridmap), 0o644)
	xrdtest.Chown(t, caDir, hc, hk, conf)

	// reads returns, per identity, which paths a server let it read.
	reads := func(t *testing.T, url string) map[string]string {
		t.Helper()
		got := map[string]string{}
		for who, e := range env {
			var urls []string
			for _, p := range paths {
				urls = append(urls, url+"/"+p)
			}
			got[who] = strings.TrimSpace(string(realclient.MustRunPython(t, e, py, pyOpens, urls...).Stdout))
		}
		return got
	}
	for i, tc := range []struct{ name, authdb string }{
		// Issue 34's bans: the everyone line, then the users' and a
		// group's (the group needs VOMS attributes, which XRootD 5.5.3
		// from Debian cannot extract: it decides nothing here).
		{"bans", "u * /store/test rl /store rl\nu alice /store -rl\ng /cms/escms /store -rl\nu bob /store rl\n"},
		// Issue 36's a-r, a path taken from everyone below an open one,
		// and the first capability of a line deciding.
		{"negative rights", "u * /store a-r /ospool/PROTECTED -rl / rl\nu alice /data -r /data rl\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			authdb := filepath.Join(conf, fmt.Sprintf("authdb%d", i))
			os.WriteFile(authdb, []byte(tc.authdb), 0o644)
			xcDir := filepath.Join(dir, fmt.Sprintf("xcache%d", i))
			cfg := filepath.Join(conf, fmt.Sprintf("xcache%d.cfg", i))
			os.WriteFile(cfg, []byte(`all.export /
ofs.osslib libXrdPss.so
pss.cachelib libXrdPfc.so
pss.origin `+origin.Addr+`
oss.localroot `+xcDir+`
pfc.ram 1g
xrootd.seclib libXrdSec.so
sec.protocol gsi -certdir:`+caDir+` -cert:`+hc+` -key:`+hk+` -gridmap:`+gridmapFile+` -crl:0
sec.protocol unix
ofs.authorize 1
acc.authdb `+authdb+`
`), 0o644)
			xrdtest.Chown(t, conf)
			xc := xrdtest.StartConfigFile(t, "xcache", xcDir, cfg)
			want := reads(t, "root://localhost:"+fmt.Sprint(xc.Port)+"/")
			xc.Stop()

			hcCfg := filepath.Join(dir, fmt.Sprintf("hepcache%d.toml", i))
			if out, err := exec.Command(hepcacheBin, "from-xcache", "-o", hcCfg, cfg).CombinedOutput(); err != nil {
				t.Fatalf("from-xcache: %v\n%s", err, out)
			}
			p := startProc(t, "--config", hcCfg, "--cache-dir", filepath.Join(dir, fmt.Sprintf("hc%d", i)))
			got := reads(t, "root://localhost:"+strings.TrimPrefix(p.addr, "127.0.0.1:")+"/")
			for who := range env {
				if got[who] != want[who] {
					toml, _ := os.ReadFile(hcCfg)
					t.Errorf("%s reading %v: XCache %s, hepcache %s\n%s", who, paths, want[who], got[who], toml)
				}
			}
			t.Logf("answers (1 = read) for %v: %v", paths, want)
		})
	}

	// Two lines for everyone: xrootd refuses the authdb and does not start;
	// the translation fails.
	authdb := filepath.Join(conf, "authdb-dup")
	os.WriteFile(authdb, []byte("u * /store rl\nu alice /store -rl\nu * /store/test rl\n"), 0o644)
	cfg := filepath.Join(conf, "xcache-dup.cfg")
	os.WriteFile(cfg, []byte("all.export /\nofs.authorize 1\nacc.authdb "+authdb+"\n"), 0o644)
	xrdtest.Chown(t, conf)
	if s, err := xrdproc.StartConfigFile("dup", filepath.Join(dir, "dup"), cfg); err == nil {
		s.Remove()
		t.Error("xrootd started with two u * lines in its authdb")
	}
	if out, err := exec.Command(hepcacheBin, "from-xcache", "-o", filepath.Join(dir, "dup.toml"), cfg).CombinedOutput(); err == nil || !strings.Contains(string(out), "duplicate") {
		t.Errorf("from-xcache of an authdb xrootd refuses: %v\n%s", err, out)
	}
}
