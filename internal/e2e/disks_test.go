package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/realclient"
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
	out, err := exec.Command(hepcacheBin, "disk", "init", "--cache-dir", cacheDir, disk).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "data dir "+disk+": wrote a new marker") {
		t.Fatalf("disk init on a new cache dir: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(cacheDir, "disks.json")); err != nil {
		t.Fatalf("no disk record: %v", err)
	}
}
