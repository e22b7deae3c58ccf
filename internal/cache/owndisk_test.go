package cache

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/realclient"
)

// TestCheckOwnDisk: a data directory on the cache directory's file system,
// or on /, is refused (issue 34: an empty mount point was recorded as the
// disk); one on a file system of its own is not. Neither needs to exist.
func TestCheckOwnDisk(t *testing.T) {
	cacheDir := filepath.Join(t.TempDir(), "cache")
	bare := filepath.Join(filepath.Dir(cacheDir), "jbod", "data04", "xcache", ".hepcache")
	if err := CheckOwnDisk(cacheDir, bare); err == nil || !strings.Contains(err.Error(), "--same-filesystem") {
		t.Fatalf("a directory on the cache directory's file system: %v", err)
	}
	if err := CheckOwnDisk(cacheDir, "/nonexistent-mount/xcache/.hepcache"); err == nil || !strings.Contains(err.Error(), "--same-filesystem") {
		t.Fatalf("a directory on /: %v", err)
	}
	// /proc is a file system of its own wherever the tests run.
	if d, _, _ := deviceOfNearest(cacheDir); d == 0 {
		realclient.Missing(t, "no device for the temporary directory")
	}
	if err := CheckOwnDisk(cacheDir, "/proc/hepcache-test/.hepcache"); err != nil {
		t.Fatalf("a directory on a file system of its own: %v", err)
	}
}
