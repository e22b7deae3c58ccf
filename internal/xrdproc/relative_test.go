package xrdproc

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/hepcache/hepcache/internal/realclient"
)

// TestRelativeDirs (issue 34, first week 0): a benchmark's default --dir is
// relative ("results/wan"); xrootd runs in a directory of its own, where
// that path names another place. An origin and an XCache given relative
// directories from a scratch working directory serve the file.
func TestRelativeDirs(t *testing.T) {
	realclient.Require(t, "xrootd")
	realclient.Require(t, "xrdcp")
	wd, _ := os.Getwd()
	scratch := t.TempDir()
	if err := os.Chdir(scratch); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	os.MkdirAll(filepath.Join("results", "origin"), 0o755)
	os.WriteFile(filepath.Join("results", "origin", "f.root"), []byte("relative"), 0o644)
	o, err := StartOrigin(filepath.Join("results", "origin"))
	if err != nil {
		t.Fatal(err)
	}
	defer o.Remove()
	x, err := StartXCache(o.Addr, filepath.Join("results", "xcache"), XCacheOptions{RAM: "1g"})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Remove()
	for _, url := range []string{o.URL, x.URL} {
		out, err := exec.Command("xrdcp", "-f", "-s", url+"//f.root", "-").Output()
		if err != nil || string(out) != "relative" {
			t.Errorf("xrdcp %s: %q %v\n%s", url, out, err, o.Log())
		}
	}
}
