package e2e

import (
	"crypto/sha256"
	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/internal/xrdtest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/realclient"
)

// pyReadHead reads the first argv[2] bytes of argv[1] with the Python
// bindings (a job that reads a little of a file) and writes them to
// stdout.
const pyReadHead = `
import sys
from XRootD import client
f = client.File()
st, _ = f.open(sys.argv[1])
assert st.ok, st.message
st, data = f.read(0, int(sys.argv[2]))
assert st.ok, st.message
f.close()
sys.stdout.buffer.write(data)
`

// TestReplacedOriginFile: a file partly cached (its first MiB, read with
// the Python bindings) is replaced at the real C++ xrootd origin by one of
// the same size with new content and a new modification time. A read of
// the whole file through hepcache never returns a mix of the two with
// success: xrdcp either fails with an I/O error or gets the new file, and
// the next xrdcp gets the new file byte for byte.
func TestReplacedOriginFile(t *testing.T) {
	data := t.TempDir()
	const size = 8 * mib
	writeFile(t, data, "store/v/f.root", size, 70)
	s := startStack(t, data, func(c *config.Config) { c.Cache.Prefetch = 0 })
	env := realclient.Env()
	py := realclient.Python(t, realclient.DebianPython, "XRootD.client")
	url := s.url + "//store/v/f.root"
	realclient.MustRunPython(t, env, py, pyReadHead, url, "1048576")
	s.originBytes()

	newSum := writeFile(t, data, "store/v/f.root", size, 71)
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(data, "store/v/f.root"), later, later); err != nil {
		t.Fatal(err)
	}
	r := realclient.Run(t, env, "xrdcp", "-s", "-f", url, "-")
	if r.Err == nil {
		if sha256.Sum256(r.Stdout) != newSum {
			t.Fatal("xrdcp succeeded with bytes that are not the new file (a mix of versions)")
		}
		t.Log("xrdcp across the replacement got the new file")
	} else if strings.Contains(r.String(), "changed at the origin") {
		t.Log("xrdcp across the replacement failed with the I/O error")
	} else {
		t.Fatalf("xrdcp across the replacement failed without saying why: %s", r)
	}
	if got := xrdcpSum(t, env, url); got != newSum {
		t.Fatalf("after the replacement: sha256 %s, want the new file", hex(got))
	}
}

// TestPlantedLinkInCacheDir: the data file of a cached file is replaced by
// a symbolic link to a file outside the cache; xrdcp and curl still get
// the origin's bytes, the outside file is neither served nor written, and
// /metrics reports the link.
func TestPlantedLinkInCacheDir(t *testing.T) {
	data := t.TempDir()
	sum := writeFile(t, data, "store/l/f.root", 2*mib+3, 72)
	s := startStack(t, data, withHTTP)
	env := realclient.Env()
	url := s.url + "//store/l/f.root"
	xrdcpSum(t, env, url)
	s.originBytes()
	infos, err := cache.Inspect(s.cfg.Cache.Dir, "", "/store/l/f.root")
	if err != nil || len(infos) != 1 {
		t.Fatalf("inspect: %v", err)
	}
	dataPath := cache.DataPath(s.cfg.Cache.Dir, cache.Key{Origin: infos[0].Origin, Path: infos[0].Path})
	outside := filepath.Join(t.TempDir(), "outside")
	os.WriteFile(outside, []byte("not a cached file"), 0o644)
	os.Remove(dataPath)
	if err := os.Symlink(outside, dataPath); err != nil {
		t.Fatal(err)
	}
	if got := xrdcpSum(t, env, url); got != sum {
		t.Fatalf("xrdcp with a planted link: sha256 %s", hex(got))
	}
	if got := curlSum(t, s.httpURL()+"/store/l/f.root"); got != sum {
		t.Fatalf("curl with a planted link: sha256 %s", hex(got))
	}
	if b, _ := os.ReadFile(outside); string(b) != "not a cached file" {
		t.Fatalf("the outside file was written through the link: %q", b)
	}
	if fi, err := os.Lstat(dataPath); err != nil || fi.Mode()&os.ModeSymlink != 0 {
		t.Fatalf("the link is still there: %v", err)
	}
	if n := s.scrape(t)["hepcache_links_refused_total"]; n < 1 {
		t.Fatalf("hepcache_links_refused_total = %v", n)
	}
}

// TestCorruptBlockAtRest: a byte of a cached file rots on disk while the
// server is down. `hepcache verify` finds the block (exit 1); the restarted
// server checks the block when xrdcp reads it, fetches it again from the
// real origin and serves the right bytes; verify then finds nothing.
func TestCorruptBlockAtRest(t *testing.T) {
	data := t.TempDir()
	sum := writeFile(t, data, "store/r/f.root", 4*mib+3, 73)
	o := xrdtest.StartOrigin(t, data)
	dir := t.TempDir()
	args := []string{"--cache-dir", dir, "--origin", "root://" + o.Addr}
	p := startProc(t, args...)
	env := realclient.Env()
	url := "root://" + p.addr + "//store/r/f.root"
	if got := xrdcpSum(t, env, url); got != sum {
		t.Fatalf("cold read: sha256 %s", hex(got))
	}
	eventually.True(t, func() bool { return complete(dir, "/store/r/f.root") }, "the file complete on disk")
	p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.done

	infos, _ := cache.Inspect(dir, "", "/store/r/f.root")
	dp := cache.DataPath(dir, cache.Key{Origin: infos[0].Origin, Path: infos[0].Path})
	f, err := os.OpenFile(dp, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b [1]byte
	f.ReadAt(b[:], 2*mib+100)
	f.WriteAt([]byte{b[0] ^ 0x55}, 2*mib+100)
	f.Close()

	out, err := exec.Command(hepcacheBin, "verify", "--cache-dir", dir).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "bad blocks [2]") {
		t.Fatalf("verify of a rotten block: %v\n%s", err, out)
	}

	p = startProc(t, args...)
	url = "root://" + p.addr + "//store/r/f.root"
	if got := xrdcpSum(t, env, url); got != sum {
		t.Fatalf("read after the rot: sha256 %s, the bad block was served", hex(got))
	}
	eventually.True(t, func() bool { return complete(dir, "/store/r/f.root") }, "the block fetched again and recorded")
	p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.done
	out, err = exec.Command(hepcacheBin, "verify", "--cache-dir", dir, "/store/r/f.root").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "5 of 5 blocks checked") {
		t.Fatalf("verify after the repair by the server: %v\n%s", err, out)
	}
	if !strings.Contains(p.log.String(), "failed its CRC32C check") {
		t.Fatalf("the server did not report the bad block:\n%s", p.log)
	}
}
