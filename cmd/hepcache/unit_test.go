package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnitSandbox (issue 29 item 8): check of the packaged config reads
// the packaged unit (ProtectSystem=strict, ReadWritePaths) and names a
// cache directory outside its ReadWritePaths (the migration guide's
// <localroot>/.hepcache) with the drop-in that fixes it; with that
// drop-in, nothing.
func TestUnitSandbox(t *testing.T) {
	unit := filepath.Join("..", "..", "packaging", "hepcache.service")
	dropins := t.TempDir()
	dirs := []string{"/srv/xcache/.hepcache", "/data01/xcache/.hepcache", "/var/log/hepcache"}
	protect, rw, ok := unitSandbox([]string{filepath.Join(t.TempDir(), "none.service"), unit}, []string{dropins})
	if !ok || protect != "strict" || strings.Join(rw, " ") != "/var/cache/hepcache /var/log/hepcache" {
		t.Fatalf("unit: %v %q %v", ok, protect, rw)
	}
	errs := unitProblems(dirs, protect, rw)
	if len(errs) != 2 || !strings.Contains(errs[0].Error(), "ReadWritePaths=/srv/xcache/.hepcache") || !strings.Contains(errs[0].Error(), "systemctl edit hepcache") {
		t.Fatalf("problems: %v", errs)
	}
	os.WriteFile(filepath.Join(dropins, "override.conf"), []byte("[Service]\nReadWritePaths=/srv/xcache/.hepcache -/data01/xcache/.hepcache\n"), 0o644)
	protect, rw, _ = unitSandbox([]string{unit}, []string{dropins})
	if errs := unitProblems(dirs, protect, rw); len(errs) != 0 {
		t.Fatalf("with the drop-in: %v", errs)
	}
	// An empty ReadWritePaths= resets the list.
	os.WriteFile(filepath.Join(dropins, "zz.conf"), []byte("[Service]\nReadWritePaths=\nReadWritePaths=/srv\n"), 0o644)
	protect, rw, _ = unitSandbox([]string{unit}, []string{dropins})
	if errs := unitProblems(dirs, protect, rw); len(errs) != 2 {
		t.Fatalf("after a reset to /srv: %v (%v)", errs, rw)
	}
}
