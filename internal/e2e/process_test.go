package e2e

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"github.com/hepcache/hepcache/internal/eventually"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/wan"
	"github.com/hepcache/hepcache/internal/xrdtest"
)

// proc is a hepcache server running as a separate process.
type proc struct {
	cmd  *exec.Cmd
	addr string
	log  *bytes.Buffer
	// done is closed when the process has exited; err is then its exit.
	done chan struct{}
	err  error
}

// startProc runs `hepcache serve` with args on a free port and waits until it
// accepts connections.
func startProc(tb testing.TB, args ...string) *proc {
	tb.Helper()
	return startProcIn(tb, "", args...)
}

// startProcIn is startProc with the process put into the cgroup whose
// cgroup.procs file is procs first ("" for none).
func startProcIn(tb testing.TB, procs string, args ...string) *proc {
	tb.Helper()
	if procs == "" {
		return startProcUnder(tb, nil, args...)
	}
	return startProcUnder(tb, []string{"/bin/sh", "-c", `echo $$ > "$0" && exec "$@"`, procs}, args...)
}

// startProcUnder is startProc with hepcache run by the command wrap, which
// execs its arguments ("prlimit --nofile=1024:1024 --"; nil: none).
func startProcUnder(tb testing.TB, wrap []string, args ...string) *proc {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	p := &proc{addr: addr, log: &bytes.Buffer{}, done: make(chan struct{})}
	argv := append(append(append([]string(nil), wrap...), hepcacheBin, "serve", "--listen", addr), args...)
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	tb.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
		if tb.Failed() {
			tb.Logf("hepcache log:\n%s", p.log.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			return p
		}
		select {
		case <-p.done:
			tb.Fatalf("hepcache exited at start: %v\n%s", p.err, p.log.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	tb.Fatalf("hepcache did not listen on %s:\n%s", addr, p.log.String())
	return nil
}

// TestCrashDuringDownloadsThenRestart kills the cache with SIGKILL in the
// middle of 50 concurrent downloads, restarts it on the same directory, and
// checks that every later read is byte-exact and that partial files resume.
func TestCrashDuringDownloadsThenRestart(t *testing.T) {
	realclient.Require(t, "xrdcp")
	data := t.TempDir()
	const files, size = 50, 6 << 20
	sums := make([][32]byte, files)
	for i := range sums {
		sums[i] = writeFile(t, data, fmt.Sprintf("store/crash/f%02d.root", i), size, uint64(100+i))
	}
	origin := xrdtest.StartOrigin(t, data)
	// A slow link keeps the downloads in progress when the kill comes.
	link, err := wan.New(&wan.Config{Target: origin.Addr, RTT: 20 * time.Millisecond, Bandwidth: 40e6})
	if err != nil {
		t.Fatal(err)
	}
	defer link.Close()
	cacheDir := t.TempDir()
	cfgFile := filepath.Join(t.TempDir(), "hepcache.toml")
	os.WriteFile(cfgFile, []byte(fmt.Sprintf("[cache]\ndir = %q\nsync_interval = \"100ms\"\n[origin]\ndefault = \"root://%s\"\n", cacheDir, link.Addr())), 0o644)

	p := startProc(t, "--config", cfgFile)
	url := func(p *proc, i int) string { return fmt.Sprintf("root://%s//store/crash/f%02d.root", p.addr, i) }
	var wg sync.WaitGroup
	for i := 0; i < files; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			// Fails when the server dies; that is the point.
			realclient.Run(t, realclient.Env(), "xrdcp", "-s", "-f", url(p, i), "/dev/null")
		}(i)
	}
	// Kill once a good part, but not all, of the data has crossed the link.
	eventually.True(t, func() bool { return link.Stats.BytesDown.Load() >= files*size/3 }, "a third of the data across the link")
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
	wg.Wait()
	crossed := link.Stats.BytesDown.Load()
	if crossed >= files*size {
		t.Fatalf("all data crossed before the kill (%d bytes); the test proves nothing", crossed)
	}

	s, err := cache.Summarize(cacheDir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if s.Corrupt != 0 {
		t.Fatalf("%d unreadable sidecars after the crash", s.Corrupt)
	}
	t.Logf("after kill -9: %d files, %d complete, %d partial, %d bytes recorded durable, %d bytes had crossed the link",
		s.Files, s.Complete, s.Partial, s.Bytes, crossed)

	p2 := startProc(t, "--config", cfgFile)
	before := link.Stats.BytesDown.Load()
	for i := 0; i < files; i++ {
		r := realclient.MustRun(t, realclient.Env(), "xrdcp", "-s", "-f", url(p2, i), "-")
		if got := sha256.Sum256(r.Stdout); got != sums[i] {
			t.Fatalf("file %d after restart: sha256 %s, want %s", i, hex(got), hex(sums[i]))
		}
	}
	refetched := link.Stats.BytesDown.Load() - before
	if s.Bytes > 0 && refetched >= files*size {
		t.Fatalf("restart refetched %d bytes of %d: partial files did not resume", refetched, files*size)
	}
	t.Logf("after restart: refetched %d of %d bytes (resumed %d recorded bytes)", refetched, files*size, s.Bytes)
	// And again, now all from the cache (once the origin has answered the
	// closes and checksum queries of the reads above).
	before = link.Quiet(500 * time.Millisecond)
	for i := 0; i < files; i += 7 {
		r := realclient.MustRun(t, realclient.Env(), "xrdcp", "-s", "-f", url(p2, i), "-")
		if got := sha256.Sum256(r.Stdout); got != sums[i] {
			t.Fatalf("hot file %d: sha256 %s", i, hex(got))
		}
	}
	if d := link.Stats.BytesDown.Load() - before; d != 0 {
		t.Fatalf("hot reads after restart moved %d bytes from the origin", d)
	}
}

// TestGracefulShutdown sends SIGTERM during a slow read: the read completes,
// the process exits cleanly, and the file is recorded complete.
func TestGracefulShutdown(t *testing.T) {
	realclient.Require(t, "xrdcp")
	data := t.TempDir()
	const size = 8 << 20
	want := writeFile(t, data, "store/slow.root", size, 77)
	origin := xrdtest.StartOrigin(t, data)
	link, err := wan.New(&wan.Config{Target: origin.Addr, RTT: 10 * time.Millisecond, Bandwidth: 8e6})
	if err != nil {
		t.Fatal(err)
	}
	defer link.Close()
	cacheDir := t.TempDir()
	p := startProc(t, "--cache-dir", cacheDir, "--origin", "root://"+link.Addr().String())
	type result struct {
		r   realclient.Result
		sum [32]byte
	}
	res := make(chan result, 1)
	go func() {
		r := realclient.Run(t, realclient.Env(), "xrdcp", "-s", "-f", "root://"+p.addr+"//store/slow.root", "-")
		res <- result{r, sha256.Sum256(r.Stdout)}
	}()
	eventually.True(t, func() bool { return link.Stats.BytesDown.Load() >= size/4 }, "a quarter of the file across the link")
	p.cmd.Process.Signal(syscall.SIGTERM)
	got := <-res
	if got.r.Err != nil || got.sum != want {
		t.Fatalf("read during graceful shutdown failed: %s", got.r)
	}
	select {
	case <-p.done:
		if p.err != nil {
			t.Fatalf("hepcache exit after SIGTERM: %v", p.err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("hepcache did not exit after SIGTERM")
	}
	infos, err := cache.Inspect(cacheDir, "", "/store/slow.root")
	if err != nil || len(infos) != 1 || !infos[0].Complete() {
		t.Fatalf("after graceful shutdown the file is not recorded complete: %v %v", infos, err)
	}
	sc := bufio.NewScanner(strings.NewReader(p.log.String()))
	for sc.Scan() {
		if strings.Contains(sc.Text(), "level=ERROR") {
			t.Errorf("error logged during shutdown: %s", sc.Text())
		}
	}
}

// TestInspectAndEvictWhileServing runs the operator commands against a live
// server: inspect shows the cached file, evict removes it through the
// server's admin socket, and the next read fetches it again.
func TestInspectAndEvictWhileServing(t *testing.T) {
	realclient.Require(t, "xrdcp")
	data := t.TempDir()
	const size = 3<<20 + 5
	want := writeFile(t, data, "store/ops/f.root", size, 55)
	origin := xrdtest.StartOrigin(t, data)
	cacheDir := t.TempDir()
	p := startProc(t, "--cache-dir", cacheDir, "--origin", "root://"+origin.Addr)
	url := "root://" + p.addr + "//store/ops/f.root"
	if got := xrdcpSum(t, realclient.Env(), url); got != want {
		t.Fatalf("read: sha256 %s", hex(got))
	}
	var info []byte
	eventually.True(t, func() bool {
		out, err := exec.Command(hepcacheBin, "inspect", "--cache-dir", cacheDir, "/store/ops/f.root").CombinedOutput()
		if err != nil {
			t.Fatalf("inspect: %v\n%s", err, out)
		}
		info = out
		return strings.Contains(string(out), "(100.0% complete)") && strings.Contains(string(out), "verified")
	}, "inspect to show the file complete and verified")
	for _, want := range []string{"root://" + origin.Addr, fmt.Sprintf("size          %d", size), "4 of 4 (100.0% complete)", "checksum      verified adler32="} {
		if !strings.Contains(string(info), want) {
			t.Fatalf("inspect output lacks %q:\n%s", want, info)
		}
	}
	out, err := exec.Command(hepcacheBin, "inspect", "--cache-dir", cacheDir, "--summary").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "1 (1 complete, 0 partial") {
		t.Fatalf("inspect --summary: %v\n%s", err, out)
	}
	out, err = exec.Command(hepcacheBin, "evict", "--cache-dir", cacheDir, "/store/ops/f.root").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "evicted root://") {
		t.Fatalf("evict while serving: %v\n%s\n%s", err, out, info)
	}
	if _, err := cache.Inspect(cacheDir, "", "/store/ops/f.root"); err == nil {
		t.Fatal("file still in the cache after evict")
	}
	if got := xrdcpSum(t, realclient.Env(), url); got != want {
		t.Fatalf("read after evict: sha256 %s", hex(got))
	}
	out, err = exec.Command(hepcacheBin, "evict", "--cache-dir", cacheDir, "/store/ops/missing.root").CombinedOutput()
	if err == nil {
		t.Fatalf("evict of a file not in the cache succeeded:\n%s", out)
	}
}

// TestBadConfigFailsAtStartup checks that a bad value stops `hepcache serve`
// with the key, the value and what is allowed.
func TestBadConfigFailsAtStartup(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "bad.toml")
	os.WriteFile(cfg, []byte("[cache]\ndir = \"/tmp/x\"\nblock_size = \"3000\"\nprefetch = -1\n[origin]\ndefault = \"root://o:1094\"\n"), 0o644)
	out, err := exec.Command(hepcacheBin, "serve", "--config", cfg).CombinedOutput()
	if err == nil {
		t.Fatalf("serve with a bad config started:\n%s", out)
	}
	for _, want := range []string{"cache.block_size = 3000", "multiple of the piece size", "cache.prefetch = -1", "0 (off) to 1024"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("error does not mention %q:\n%s", want, out)
		}
	}
}
