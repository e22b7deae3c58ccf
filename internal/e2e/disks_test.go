package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/syncbuf"
	"github.com/hepcache/hepcache/internal/xrdtest"
)

// TestDataDisksFailAndServe: a node with three data disks (real tmpfs
// file systems) spreads its files over them; one disk is remounted
// read-only and another unmounted under it; both are taken out (their
// files forgotten, /metrics says which and why) and every file is still
// read byte-exact with xrdcp, curl and the Python bindings, from the disk
// left or the origin.
func TestDataDisksFailAndServe(t *testing.T) {
	data := t.TempDir()
	sums := map[string][32]byte{}
	for i := range 6 {
		p := fmt.Sprintf("/store/jbod/f%d.root", i)
		sums[p] = writeFile(t, data, p[1:], 3*mib+i, uint64(60+i))
	}
	disks := []string{realclient.Tmpfs(t, "64m"), realclient.Tmpfs(t, "64m"), realclient.Tmpfs(t, "64m")}
	s := startStack(t, data, func(c *config.Config) {
		withHTTP(c)
		c.Cache.DataDirs = disks
		for _, d := range disks {
			if _, err := cache.InitDataDir(c.Cache.Dir, d); err != nil {
				t.Fatal(err)
			}
		}
	})
	env := realclient.Env()
	readAll := func(how string) {
		t.Helper()
		py := realclient.Python(t, realclient.DebianPython, "XRootD.client")
		for p, want := range sums {
			var got [32]byte
			switch how {
			case "xrdcp":
				got = xrdcpSum(t, env, s.url+"/"+p)
			case "curl":
				got = curlSum(t, s.httpURL()+p)
			case "python":
				r := realclient.MustRunPython(t, env, py, pyReadAll, s.url+"/"+p)
				if strings.TrimSpace(string(r.Stdout)) != fmt.Sprintf("%x", want) {
					t.Fatalf("python read of %s: %s", p, r.Stdout)
				}
				continue
			}
			if got != want {
				t.Fatalf("%s read of %s: sha256 %s", how, p, hex(got))
			}
		}
	}
	readAll("xrdcp")
	s.originBytes()
	m := s.scrape(t)
	for _, d := range disks {
		if m[`hepcache_disk_files{disk="`+d+`"}`] == 0 || m[`hepcache_disk_up{disk="`+d+`"}`] != 1 {
			t.Fatalf("disk %s: files %v, up %v", d, m[`hepcache_disk_files{disk="`+d+`"}`], m[`hepcache_disk_up{disk="`+d+`"}`])
		}
	}

	if out, err := exec.Command("mount", "-o", "remount,ro", disks[0]).CombinedOutput(); err != nil {
		t.Fatalf("remount ro: %v %s", err, out)
	}
	if out, err := exec.Command("umount", "-l", disks[1]).CombinedOutput(); err != nil {
		t.Fatalf("umount: %v %s", err, out)
	}
	s.srv.Cache().CheckDisks() // the server also does so every 5 s
	m = s.scrape(t)
	for _, d := range disks[:2] {
		if m[`hepcache_disk_up{disk="`+d+`"}`] != 0 || m[`hepcache_disk_files{disk="`+d+`"}`] != 0 {
			t.Fatalf("failed disk %s still counted: up %v files %v", d, m[`hepcache_disk_up{disk="`+d+`"}`], m[`hepcache_disk_files{disk="`+d+`"}`])
		}
	}
	readAll("curl")
	readAll("python")
	readAll("xrdcp")
	s.originBytes()
	if n := s.scrape(t)[`hepcache_disk_files{disk="`+disks[2]+`"}`]; n != 6 {
		t.Fatalf("the disk left holds %v files, want all 6", n)
	}
	r := realclient.MustRun(t, env, "curl", "-sS", "--fail", s.httpURL()+"/api/stats")
	if !strings.Contains(string(r.Stdout), `"up":false`) || !strings.Contains(string(r.Stdout), disks[2]) {
		t.Fatalf("dashboard data lacks the disks:\n%.2000s", r.Stdout)
	}
}

// TestDiskInitCreatesCacheDir (issue 29 item 3): `hepcache disk init
// --cache-dir DIR` on a cache directory that does not exist yet creates it
// and records the disk (it failed with "lock cache dir: ... no such file").
func TestDiskInitCreatesCacheDir(t *testing.T) {
	cacheDir := filepath.Join(t.TempDir(), "not", "yet")
	disk := t.TempDir()
	out, err := exec.Command(hepcacheBin, "disk", "init", "--same-filesystem", "--cache-dir", cacheDir, disk).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "data dir "+disk+": wrote a new marker") {
		t.Fatalf("disk init on a new cache dir: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(cacheDir, "disks.json")); err != nil {
		t.Fatalf("no disk record: %v", err)
	}
}

// TestDiskInitAsRootForServiceUser (issue 29 items 3, 4, 8): root takes a
// data disk into service for the service user (--user nobody, as the
// migration guide has it for the packaged hepcache user), on a cache
// directory that does not exist yet: what it creates is nobody's, `check
// --user nobody` says OK, and serve as nobody starts and reads a file
// through the disk with xrdcp.
func TestDiskInitAsRootForServiceUser(t *testing.T) {
	realclient.RequireRoot(t, "disk init as root, serve as nobody")
	setpriv := realclient.Require(t, "setpriv")
	top, bin := crossableTop(t, "hepcache-diskinit-")
	data := t.TempDir()
	want := writeFile(t, data, "store/init/f.root", 1<<20, 12)
	origin := xrdtest.StartOrigin(t, data)
	disk := realclient.Tmpfs(t, "16m")
	os.Chmod(disk, 0o755)
	dataDir := filepath.Join(disk, "xcache", ".hepcache")
	cacheDir := filepath.Join(top, "srv", "cache")
	addr := freeAddr(t)
	cfg := filepath.Join(top, "hepcache.toml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("[server]\nlisten = %q\n[cache]\ndir = %q\ndata_dirs = [%q]\n[origin]\ndefault = \"root://%s\"\n", addr, cacheDir, dataDir, origin.Addr)), 0o644)
	os.MkdirAll(filepath.Join(top, "srv"), 0o755)
	os.MkdirAll(filepath.Join(disk, "xcache"), 0o755)
	if out, err := exec.Command(bin, "disk", "init", "--user", "nobody", "--config", cfg, dataDir).CombinedOutput(); err != nil {
		t.Fatalf("disk init: %v\n%s", err, out)
	}
	for _, p := range []string{cacheDir, filepath.Join(cacheDir, "lock"), filepath.Join(cacheDir, "disks.json"), dataDir, filepath.Join(dataDir, "data"), filepath.Join(dataDir, ".hepcache-disk")} {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil || st.Uid != 65534 {
			t.Errorf("%s: uid %d %v, want nobody's", p, st.Uid, err)
		}
	}
	if out, err := exec.Command(bin, "check", "--user", "nobody", "--config", cfg).CombinedOutput(); err != nil || !strings.Contains(string(out), "checked as nobody") {
		t.Fatalf("check --user nobody: %v\n%s", err, out)
	}
	svc := exec.Command(setpriv, "--reuid", "nobody", "--regid", "nogroup", "--clear-groups", bin, "serve", "--config", cfg)
	var log syncbuf.Buffer
	svc.Stdout, svc.Stderr = &log, &log
	if err := svc.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { svc.Process.Kill(); svc.Wait() }()
	waitListen(t, addr)
	if got := xrdcpSum(t, realclient.Env(), "root://"+addr+"//store/init/f.root"); got != want {
		t.Fatalf("read through the disk: sha256 %s\n%s", hex(got), log.String())
	}
	if filesUnderDir(filepath.Join(dataDir, "data")) == 0 {
		t.Fatalf("nothing cached on the disk:\n%s", log.String())
	}
}
