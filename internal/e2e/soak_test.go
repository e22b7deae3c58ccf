package e2e

import (
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/realclient"
)

// TestBenchSoak runs `hepcache bench soak` for two minutes, as CI does
// (issue 21): six workers of every real client kind (xrdcp with and
// without pgread, Python ranged reads and readv, curl whole and ranged)
// with a tenth of the operations killed mid-way, through a SIGHUP, a kill
// -9 and restart, the origin stopped and the cache's tmpfs filled to the
// last byte. The command fails on a wrong byte, a stuck read, a resource
// that grows or a bad block; the test also wants every phase to have run
// and some operations cancelled.
func TestBenchSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("a two-minute soak")
	}
	realclient.Require(t, "xrdcp")
	realclient.Require(t, "curl")
	realclient.Python(t, realclient.DebianPython, "XRootD.client")
	realclient.RequireRoot(t, "the soak's full disk phase mounts a tmpfs")
	cmd := exec.Command(hepcacheBin, "bench", "soak", "--dir", t.TempDir(), "--duration", "2m", "--workers", "6",
		"--files", "24", "--min-size", "1M", "--max-size", "8M", "--cancel-share", "0.1",
		"--op-timeout", "90s", "--origin-timeout", "10s", "--python", realclient.DebianPython)
	out, err := cmd.CombinedOutput()
	t.Logf("hepcache bench soak:\n%s", out)
	if err != nil {
		t.Fatalf("hepcache bench soak: %v", err)
	}
	for _, phase := range []string{"steady", "sighup", "kill-9", "origin-stopped", "origin-back", "full-disk", "disk-freed"} {
		if !strings.Contains(string(out), "| "+phase+" | ") {
			t.Errorf("phase %s missing from the report", phase)
		}
	}
	if !strings.Contains(string(out), "ballast of") || !strings.Contains(string(out), "PASS:") {
		t.Errorf("no full disk, or no PASS line")
	}
	m := regexp.MustCompile(`\| all \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatal("no totals row")
	}
	if cancelled, _ := strconv.Atoi(m[4]); cancelled == 0 {
		t.Errorf("no client was killed mid-way: %s", m[0])
	}
}
