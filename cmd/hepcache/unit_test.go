package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/config"
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
	sb, ok := unitSandbox([]string{filepath.Join(t.TempDir(), "none.service"), unit}, []string{dropins})
	if !ok || sb.protect != "strict" || strings.Join(sb.rw, " ") != "/var/cache/hepcache /var/log/hepcache" || !sb.privateTmp || sb.protectHome != "true" {
		t.Fatalf("unit: %v %+v", ok, sb)
	}
	errs := unitProblems(dirs, sb)
	if len(errs) != 2 || !strings.Contains(errs[0].Error(), "ReadWritePaths=/srv/xcache/.hepcache") || !strings.Contains(errs[0].Error(), "systemctl edit hepcache") {
		t.Fatalf("problems: %v", errs)
	}
	os.WriteFile(filepath.Join(dropins, "override.conf"), []byte("[Service]\nReadWritePaths=/srv/xcache/.hepcache -/data01/xcache/.hepcache\n"), 0o644)
	sb, _ = unitSandbox([]string{unit}, []string{dropins})
	if errs := unitProblems(dirs, sb); len(errs) != 0 {
		t.Fatalf("with the drop-in: %v", errs)
	}
	// An empty ReadWritePaths= resets the list.
	os.WriteFile(filepath.Join(dropins, "zz.conf"), []byte("[Service]\nReadWritePaths=\nReadWritePaths=/srv\n"), 0o644)
	sb, _ = unitSandbox([]string{unit}, []string{dropins})
	if errs := unitProblems(dirs, sb); len(errs) != 2 {
		t.Fatalf("after a reset to /srv: %v (%v)", errs, sb.rw)
	}
}

// TestUnitHidesTmp (issue 34 item 8): check of the packaged config warns
// of paths the packaged unit hides from the service: under PrivateTmp= a
// /tmp of its own (a cache dir or a key file in /tmp would be another,
// empty one), under ProtectHome= /home and /root; other paths pass.
func TestUnitHidesTmp(t *testing.T) {
	unit := filepath.Join("..", "..", "packaging", "hepcache.service")
	sb, ok := unitSandbox([]string{unit}, nil)
	if !ok {
		t.Fatal("no packaged unit")
	}
	cfg := config.Default()
	cfg.Cache.Dir = "/tmp/hepcache"
	cfg.Security.TLSKey = "/root/hostkey.pem"
	cfg.Security.TLSCert = "/etc/grid-security/hostcert.pem"
	cfg.Log.File = "/var/tmp/hepcache.log"
	warns := unitWarnings(cfg.LocalPaths(), sb)
	joined := strings.Join(warns, "\n")
	for _, want := range []string{"cache.dir /tmp/hepcache: the service would see another /tmp", "log.file /var/tmp/hepcache.log: the service would see another /tmp",
		"security.tls_key /root/hostkey.pem: the packaged unit's ProtectHome=true hides"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no warning %q in:\n%s", want, joined)
		}
	}
	if len(warns) != 3 {
		t.Errorf("%d warnings, want 3 (none for /etc):\n%s", len(warns), joined)
	}
	sb.privateTmp, sb.protectHome = false, "no"
	if w := unitWarnings(cfg.LocalPaths(), sb); len(w) != 0 {
		t.Errorf("without PrivateTmp and ProtectHome: %v", w)
	}
}
