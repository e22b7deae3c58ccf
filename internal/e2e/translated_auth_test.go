package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/xrdtest"
)

// TestTranslatedProtectionHolds: an OSDF-style authdb that takes read
// rights away ("u * /ospool/PROTECTED -rl / rl") keeps the protected path
// closed through the translation, over root:// and HTTP, as the real
// XCache does; a missing authdb fails the translation; and an xrd.allow
// that excludes the client keeps it out.
func TestTranslatedProtectionHolds(t *testing.T) {
	realclient.Require(t, "xrdcp")
	curl := realclient.Require(t, "curl")
	dir := t.TempDir()
	data := filepath.Join(dir, "origin")
	for _, p := range []string{"ospool/PROTECTED/secret.root", "ospool/public/open.root"} {
		os.MkdirAll(filepath.Join(data, filepath.Dir(p)), 0o755)
		writePattern(t, filepath.Join(data, p), 100000)
	}
	origin := xrdtest.StartOrigin(t, data)
	conf := filepath.Join(dir, "etc")
	os.MkdirAll(conf, 0o755)
	authdb := filepath.Join(conf, "authdb")
	os.WriteFile(authdb, []byte("u * /ospool/PROTECTED -rl / rl\n"), 0o644)
	xcDir := filepath.Join(dir, "xcache")
	cfg := filepath.Join(conf, "xcache.cfg")
	os.WriteFile(cfg, []byte(`all.export /
ofs.osslib libXrdPss.so
pss.cachelib libXrdPfc.so
pss.origin `+origin.Addr+`
oss.localroot `+xcDir+`
pfc.ram 1g
ofs.authorize 1
acc.authdb `+authdb+`
`), 0o644)
	xrdtest.Chown(t, conf)
	xc := xrdtest.StartConfigFile(t, "xcache", xcDir, cfg)
	env := realclient.Env()
	got := filepath.Join(dir, "got")
	if r := realclient.Run(t, env, "xrdcp", "-f", "-s", xc.URL+"//ospool/PROTECTED/secret.root", got); r.Err == nil {
		t.Fatal("XCache served the protected file: the test's authdb does not protect")
	}
	realclient.MustRun(t, env, "xrdcp", "-f", "-s", xc.URL+"//ospool/public/open.root", got)
	xc.Stop()

	hcCfg := filepath.Join(dir, "hepcache.toml")
	if out, err := exec.Command(hepcacheBin, "from-xcache", "-o", hcCfg, cfg).CombinedOutput(); err != nil {
		t.Fatalf("from-xcache: %v\n%s", err, out)
	}
	if out, err := exec.Command(hepcacheBin, "check", "--config", hcCfg, "--cache-dir", filepath.Join(dir, "hc")).CombinedOutput(); err != nil {
		t.Fatalf("check: %v\n%s", err, out)
	}
	httpAddr := freeAddr(t)
	p := startProc(t, "--config", hcCfg, "--cache-dir", filepath.Join(dir, "hc"), "--http-listen", httpAddr)
	url := "root://" + p.addr + "/"
	if r := realclient.Run(t, env, "xrdcp", "-f", "-s", url+"/ospool/PROTECTED/secret.root", got); r.Err == nil || !strings.Contains(string(r.Stderr), "3010") {
		t.Errorf("root://: the protected file was not refused: %v", r)
	}
	realclient.MustRun(t, env, "xrdcp", "-f", "-s", url+"/ospool/public/open.root", got)
	sameFile(t, got, filepath.Join(data, "ospool/public/open.root"))
	for path, want := range map[string]string{"/ospool/PROTECTED/secret.root": "403", "/ospool/public/open.root": "200"} {
		r := realclient.Run(t, env, curl, "-s", "-o", "/dev/null", "-w", "%{http_code}", "http://"+httpAddr+path)
		if strings.TrimSpace(string(r.Stdout)) != want {
			t.Errorf("curl %s: %s, want %s", path, r.Stdout, want)
		}
	}

	// An authdb that cannot be read: xrootd refuses to start, the
	// translation fails and writes nothing.
	os.Remove(authdb)
	os.Remove(hcCfg)
	if out, err := exec.Command(hepcacheBin, "from-xcache", "-o", hcCfg, cfg).CombinedOutput(); err == nil || !strings.Contains(string(out), authdb) {
		t.Errorf("from-xcache with the authdb missing: %v\n%s", err, out)
	}
	if _, err := os.Stat(hcCfg); err == nil {
		t.Error("from-xcache wrote a config without its authorization")
	}

	// xrd.allow: a client outside the allowed domain is not served.
	os.WriteFile(cfg, []byte("all.export /\nofs.osslib libXrdPss.so\npss.cachelib libXrdPfc.so\npss.origin "+origin.Addr+"\noss.localroot "+xcDir+"\nxrd.allow host *.site.example\n"), 0o644)
	if out, err := exec.Command(hepcacheBin, "from-xcache", "-o", hcCfg, cfg).CombinedOutput(); err != nil {
		t.Fatalf("from-xcache: %v\n%s", err, out)
	}
	p2 := startProc(t, "--config", hcCfg, "--cache-dir", filepath.Join(dir, "hc2"))
	if r := realclient.Run(t, env, "xrdcp", "-f", "-s", "root://"+p2.addr+"//ospool/public/open.root", got); r.Err == nil {
		t.Error("a client outside xrd.allow was served")
	}
}
