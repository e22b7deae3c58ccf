package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/xrdpfc"
	"github.com/hepcache/hepcache/internal/xrdtest"
)

// TestAdoptXCache fills a real XCache 5.5.3 (128k blocks, no prefetch) with
// two complete files and two partial ones, stops it, adopts its directory
// into a hepcache cache (hard links, no copy), then serves: the complete
// files are read hot with the origin stopped (SIGSTOP), the partial ones,
// once the origin runs again, resume: exactly the blocks XCache held are
// hits, the rest comes from the origin, and every byte is the origin's.
func TestAdoptXCache(t *testing.T) {
	realclient.Require(t, "xrdcp")
	py := realclient.Python(t, realclient.DebianPython, "XRootD.client")
	dir := t.TempDir()
	data := filepath.Join(dir, "origin")
	os.MkdirAll(filepath.Join(data, "store"), 0o755)
	files := map[string]int{"/store/full1.root": 3000017, "/store/full2.root": 10 << 20, "/store/part1.root": 8 << 20, "/store/part2.root": 3<<20 + 4321}
	for p, n := range files {
		writePattern(t, filepath.Join(data, p), n)
	}
	origin := xrdtest.StartOrigin(t, data)
	xcDir := filepath.Join(dir, "xcache")
	xc := xrdtest.StartXCache(t, origin.Addr, xcDir, xrdtest.XCacheOptions{RAM: "1g", BlockSize: "128k", Prefetch: -1})
	env := realclient.Env()
	for _, p := range []string{"/store/full1.root", "/store/full2.root"} {
		realclient.MustRun(t, env, "xrdcp", "-f", "-s", xc.URL+"/"+p, filepath.Join(dir, "warm"))
	}
	// part1: hepcache blocks 0 and 5 (XCache blocks 0-7 and 40-47); part2:
	// its short last block, and one 128k XCache block that covers no whole
	// hepcache block.
	realclient.MustRunPython(t, env, py, `
import sys
from XRootD import client
for url, ranges in ((sys.argv[1], ((0, 1<<20), (5<<20, 1<<20))), (sys.argv[2], ((3<<20, 4321), ((1<<20)+100, 100)))):
    f = client.File()
    st, _ = f.open(url)
    assert st.ok, st
    for off, n in ranges:
        st, d = f.read(off, n)
        assert st.ok and len(d) == n, (st, len(d))
    f.close()
`, xc.URL+"//store/part1.root", xc.URL+"//store/part2.root")
	synced := func(p string) int {
		b, err := os.ReadFile(filepath.Join(xcDir, p) + xrdpfc.Ext)
		if err != nil {
			return -1
		}
		in, err := xrdpfc.Parse(b)
		if err != nil {
			return -1
		}
		return in.Synced.Count()
	}
	eventually.True(t, func() bool {
		return synced("store/full1.root") == 23 && synced("store/full2.root") == 80 && synced("store/part1.root") == 16 && synced("store/part2.root") == 2
	}, "XCache's .cinfo files to record the blocks read")
	xc.Stop()

	// The cache directory belongs to the service user, here XCache's own
	// (nobody): adoption, run as root, drops to that user before touching
	// the tree, and leaves the lock to it.
	hc := filepath.Join(dir, "hepcache")
	os.Mkdir(hc, 0o755)
	os.Chown(hc, 65534, 65534)
	out, err := exec.Command(hepcacheBin, "adopt-xcache", "--cache-dir", hc, "--origin", origin.URL, xcDir).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "adopted 2 complete and 2 partial files") {
		t.Fatalf("adopt-xcache: %v\n%s", err, out)
	}
	for _, p := range []string{filepath.Join(hc, "lock"), filepath.Join(hc, "meta")} {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil || st.Uid != 65534 {
			t.Fatalf("%s after adoption: owner %d, %v; want the service user's", p, st.Uid, err)
		}
	}
	if _, err := os.Stat(filepath.Join(xcDir, "store", "full1.root")); !os.IsNotExist(err) {
		t.Fatalf("XCache's name of an adopted file is still there: %v", err)
	}
	// Linked, not copied: one inode under two names until XCache's went.
	if out, err := exec.Command(hepcacheBin, "verify", "--cache-dir", hc).CombinedOutput(); err != nil || !strings.Contains(string(out), "0 bad") {
		t.Fatalf("verify after adoption: %v\n%s", err, out)
	}

	inspectBlocks(t, hc, "/store/full1.root", "3 of 3 (100.0% complete)")
	inspectBlocks(t, hc, "/store/full2.root", "10 of 10 (100.0% complete)")
	inspectBlocks(t, hc, "/store/part1.root", "2 of 8 (25.0% complete)")
	inspectBlocks(t, hc, "/store/part2.root", "1 of 4 (25.0% complete)")

	cfg := filepath.Join(dir, "hepcache.toml")
	// No read-ahead: with the origin stopped, a read ahead would wait for it.
	os.WriteFile(cfg, []byte("[cache]\nprefetch = 0\n[origin]\ntimeout = \"5s\"\n"), 0o644)
	p := startProc(t, "--config", cfg, "--cache-dir", hc, "--origin", origin.URL)
	if err := syscall.Kill(origin.PID(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	defer func() {
		if stopped {
			syscall.Kill(origin.PID(), syscall.SIGCONT)
		}
	}()
	read := func(path string) {
		t.Helper()
		got := filepath.Join(dir, "got")
		realclient.MustRun(t, env, "xrdcp", "-f", "-s", "root://"+p.addr+"/"+path, got)
		a, _ := os.ReadFile(got)
		b, _ := os.ReadFile(filepath.Join(data, path))
		if !bytes.Equal(a, b) {
			t.Fatalf("%s: read %d bytes that differ from the origin's %d", path, len(a), len(b))
		}
	}
	read("/store/full1.root")
	read("/store/full2.root")
	// The blocks XCache held of the partial files are served without the
	// origin too.
	realclient.MustRunPython(t, env, py, `
import sys
from XRootD import client
for url, ref, ranges in ((sys.argv[1], sys.argv[2], ((0, 1<<20), (5<<20, 1<<20))), (sys.argv[3], sys.argv[4], ((3<<20, 4321),))):
    want = open(ref, "rb").read()
    f = client.File()
    st, _ = f.open(url)
    assert st.ok, st
    for off, n in ranges:
        st, d = f.read(off, n)
        assert st.ok and d == want[off:off+n], (url, off, st, len(d))
    f.close()
`, "root://"+p.addr+"//store/part1.root", filepath.Join(data, "store/part1.root"), "root://"+p.addr+"//store/part2.root", filepath.Join(data, "store/part2.root"))
	syscall.Kill(origin.PID(), syscall.SIGCONT)
	stopped = false
	read("/store/part1.root")
	read("/store/part2.root")

	for p := range files {
		inspectBlocks(t, hc, p, "100.0% complete")
	}
}

// inspectBlocks checks what `hepcache inspect` says of path's blocks.
// inspectBlocks checks what `hepcache inspect` says of path: what the
// sidecar on disk records, which a running server updates at its next
// group sync (within cache.sync_interval).
func inspectBlocks(tb testing.TB, cacheDir, path, want string) {
	tb.Helper()
	var out []byte
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out, err = exec.Command(hepcacheBin, "inspect", "--cache-dir", cacheDir, path).CombinedOutput()
		if err == nil && strings.Contains(string(out), want) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || !strings.Contains(string(out), want) {
		tb.Fatalf("inspect %s: want %q: %v\n%s", path, want, err, out)
	}
}

func writePattern(tb testing.TB, path string, n int) {
	tb.Helper()
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>11)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		tb.Fatal(err)
	}
}
