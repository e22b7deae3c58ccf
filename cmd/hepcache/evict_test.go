package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestEvictUncached: evicting a file the cache does not hold says so (the
// issue: it said "inspect /store/f.root: not in the cache"), exit status 1,
// on an empty cache directory and on one that was never used.
func TestEvictUncached(t *testing.T) {
	bin := hepcacheBin(t)
	used := t.TempDir()
	os.MkdirAll(used+"/meta/root/origin:1094", 0o755)
	for _, dir := range []string{used, t.TempDir()} {
		out, err := exec.Command(bin, "evict", "--cache-dir", dir, "/store/f.root").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "/store/f.root is not in the cache "+dir+": nothing to evict") || strings.Contains(string(out), "inspect") {
			t.Errorf("evict of an uncached file in %s: %v\n%s", dir, err, out)
		}
	}
}
