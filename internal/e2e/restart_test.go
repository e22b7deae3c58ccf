package e2e

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/syncbuf"
	"github.com/hepcache/hepcache/internal/xrdtest"
)

// pyHold opens argv[1], reads its first MiB, says "held" and waits for a
// line on stdin, then reads the rest and prints the sha256 of the whole
// file: a client that holds a file across a restart.
const pyHold = `
import hashlib, sys
from XRootD import client
f = client.File()
st, _ = f.open(sys.argv[1])
assert st.ok, st.message
st, info = f.stat()
assert st.ok, st.message
size = info.size
h = hashlib.sha256()
st, data = f.read(0, 1 << 20)
assert st.ok, st.message
h.update(data)
print("held", flush=True)
sys.stdin.readline()
off = len(data)
while off < size:
    st, data = f.read(off, 4 << 20)
    assert st.ok, st.message
    assert len(data) > 0
    h.update(data)
    off += len(data)
st, _ = f.close()
print(h.hexdigest(), flush=True)
`

// heldClient is a Python client holding a file (pyHold).
type heldClient struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	errs  *syncbuf.Buffer
}

func holdFile(t *testing.T, url string) *heldClient {
	t.Helper()
	py := realclient.Python(t, realclient.DebianPython, "XRootD.client")
	cmd := exec.Command(py, "-c", pyHold, url)
	cmd.Env = realclient.Env()
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	h := &heldClient{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout), errs: &syncbuf.Buffer{}}
	cmd.Stderr = h.errs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if line, err := h.out.ReadString('\n'); err != nil || line != "held\n" {
		t.Fatalf("python client: %q %v\n%s", line, err, h.errs.String())
	}
	return h
}

// finish lets the client read the rest and returns the file's sha256.
func (h *heldClient) finish(t *testing.T) string {
	t.Helper()
	io.WriteString(h.stdin, "go\n")
	line, err := h.out.ReadString('\n')
	if err != nil || h.cmd.Wait() != nil {
		t.Fatalf("python client after the restart: %q %v\n%s", line, err, h.errs.String())
	}
	return strings.TrimSpace(line)
}

// copier runs three xrdcp of url back to back until stop is closed;
// done counts the copies finished, wait returns the outcomes.
func copier(t *testing.T, url string, want [32]byte, stop <-chan struct{}) (done func() int, wait func() (ok int, failures []string)) {
	var mu sync.Mutex
	var ok int
	var fails []string
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				cmd := exec.Command("xrdcp", "-f", "-s", url, "-")
				cmd.Env = realclient.Env()
				var stderr syncbuf.Buffer
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				mu.Lock()
				if err == nil && sha256.Sum256(out) == want {
					ok++
				} else {
					fails = append(fails, fmt.Sprintf("%v %d bytes: %s", err, len(out), stderr.String()))
				}
				mu.Unlock()
			}
		}()
	}
	return func() int {
			mu.Lock()
			defer mu.Unlock()
			return ok + len(fails)
		}, func() (int, []string) {
			wg.Wait()
			mu.Lock()
			defer mu.Unlock()
			return ok, fails
		}
}

// TestUpgradeRefusesNoClient (issue 29 item 9): `hepcache upgrade` hands
// the listening sockets to the binary installed at the server's path: a
// Python client holding a file across it reads the rest byte-exact, xrdcp
// clients copying back to back all the while (XRD_CONNECTIONRETRY=1: a
// refused connection would fail at once) all succeed, the old process
// exits 0 and the new one serves. A new binary that cannot start (here a
// configuration it refuses) leaves the old one serving.
func TestUpgradeRefusesNoClient(t *testing.T) {
	realclient.Require(t, "xrdcp")
	data := t.TempDir()
	want := writeFile(t, data, "store/up/f.root", 9<<20+3, 91)
	origin := xrdtest.StartOrigin(t, data)
	dir := t.TempDir()
	bin := filepath.Join(dir, "hepcache")
	copyFile(t, hepcacheBin, bin, 0o755)
	cacheDir := filepath.Join(dir, "cache")
	cfg := filepath.Join(dir, "hepcache.toml")
	addr := freeAddr(t)
	writeCfg := func(extra string) {
		os.WriteFile(cfg, []byte(fmt.Sprintf("[server]\nlisten = %q\nshutdown_timeout = \"10s\"\n[cache]\ndir = %q\n[origin]\ndefault = \"root://%s\"\n%s",
			addr, cacheDir, origin.Addr, extra)), 0o644)
	}
	writeCfg("")
	old := exec.Command(bin, "serve", "--config", cfg)
	// A file, not a pipe: the new process writes there too, and a pipe
	// would keep old.Wait waiting for it.
	logPath := filepath.Join(dir, "hepcache.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	old.Stdout, old.Stderr = logf, logf
	log := fileText(logPath)
	if err := old.Start(); err != nil {
		t.Fatal(err)
	}
	oldDone := make(chan error, 1)
	go func() { oldDone <- old.Wait() }()
	t.Cleanup(func() {
		old.Process.Kill()
		if t.Failed() {
			t.Logf("hepcache log:\n%s", log.String())
		}
	})
	waitListen(t, addr)
	url := "root://" + addr + "//store/up/f.root"
	held := holdFile(t, url)

	// A new binary refusing the configuration: the old one goes on.
	writeCfg("[[security.rule]]\npath = \"/\"\nread = [\"wizard:merlin\"]\n")
	out, err := exec.Command(bin, "upgrade", "--config", cfg).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "wizard") {
		t.Fatalf("upgrade to a binary refusing the configuration: %v\n%s", err, out)
	}
	if got := xrdcpSum(t, realclient.Env(), url); got != want {
		t.Fatalf("read after the failed upgrade: sha256 %s", hex(got))
	}
	writeCfg("")

	stop := make(chan struct{})
	copies, wait := copier(t, url, want, stop)
	eventually.True(t, func() bool { return copies() >= 3 }, "copies before the upgrade")
	out, err = exec.Command(bin, "upgrade", "--config", cfg).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "handed over to pid") {
		close(stop)
		t.Fatalf("hepcache upgrade: %v\n%s", err, out)
	}
	newPID, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "handed over to pid")))
	t.Cleanup(func() { syscall.Kill(newPID, syscall.SIGKILL) })
	select {
	case err := <-oldDone:
		if err != nil {
			t.Errorf("the old process exited with %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the old process did not exit after the hand-over")
	}
	eventually.True(t, func() bool { return strings.Contains(log.String(), "listening on a socket handed over") }, "the new process to serve")
	after := copies()
	eventually.True(t, func() bool { return copies() >= after+3 }, "copies after the upgrade")
	close(stop)
	ok, fails := wait()
	if len(fails) > 0 || ok == 0 {
		t.Fatalf("xrdcp through the upgrade: %d ok, %d failed: %v", ok, len(fails), fails)
	}
	if got := held.finish(t); got != fmt.Sprintf("%x", want) {
		t.Fatalf("the file held across the upgrade: sha256 %s", got)
	}
	t.Logf("%d copies through the upgrade, all byte-exact; new pid %d", ok, newPID)
	syscall.Kill(newPID, syscall.SIGTERM)
}

// TestSocketActivationRestart (issue 29 item 9): started as systemd starts
// a socket-activated service (LISTEN_FDS, LISTEN_PID), hepcache serves on
// the socket it is given; stopped, the socket stays open (systemd keeps
// it): xrdcp clients that connect while no process serves, and a Python
// client holding a file across the restart, are served byte-exact by the
// next process, none refused (XRD_CONNECTIONRETRY=1).
func TestSocketActivationRestart(t *testing.T) {
	realclient.Require(t, "xrdcp")
	data := t.TempDir()
	want := writeFile(t, data, "store/act/f.root", 6<<20+1, 92)
	origin := xrdtest.StartOrigin(t, data)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	lf, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	addr := ln.Addr().String()
	cacheDir := t.TempDir()
	var log syncbuf.Buffer
	// As systemd: the socket as descriptor 3, LISTEN_PID the service's.
	start := func() (*exec.Cmd, chan error) {
		t.Helper()
		cmd := exec.Command("sh", "-c", `LISTEN_PID=$$ LISTEN_FDS=1 LISTEN_FDNAMES=hepcache.socket exec "$0" "$@"`,
			hepcacheBin, "serve", "--listen", addr, "--cache-dir", cacheDir, "--origin", "root://"+origin.Addr)
		cmd.ExtraFiles = []*os.File{lf}
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		t.Cleanup(func() { cmd.Process.Kill() })
		return cmd, done
	}
	first, firstDone := start()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("hepcache log:\n%s", log.String())
		}
	})
	url := "root://" + addr + "//store/act/f.root"
	if got := xrdcpSum(t, realclient.Env(), url); got != want {
		t.Fatalf("read through the activated socket: sha256 %s", hex(got))
	}
	if !strings.Contains(log.String(), "from=systemd") {
		t.Fatalf("the server did not take the socket from systemd:\n%s", log.String())
	}
	held := holdFile(t, url)
	first.Process.Signal(syscall.SIGTERM)
	if err := <-firstDone; err != nil {
		t.Fatalf("stop: %v", err)
	}
	// No process serves now; the socket is open. Clients connect.
	type result struct {
		sum [32]byte
		err error
		out string
	}
	results := make(chan result, 3)
	for range 3 {
		go func() {
			cmd := exec.Command("xrdcp", "-f", "-s", url, "-")
			cmd.Env = realclient.Env()
			var stderr syncbuf.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			results <- result{sha256.Sum256(out), err, stderr.String()}
		}()
	}
	go io.WriteString(held.stdin, "go\n") // its next read meets the gap too
	// The clients are connected (in the socket's backlog) before the next
	// process starts.
	eventually.True(t, func() bool { return backlog(t, addr) >= 3 }, "the clients to connect while no process serves")
	start()
	for range 3 {
		r := <-results
		if r.err != nil || r.sum != want {
			t.Fatalf("xrdcp connected during the restart: %v sha256 %s\n%s", r.err, hex(r.sum), r.out)
		}
	}
	line, err := held.out.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != fmt.Sprintf("%x", want) {
		t.Fatalf("the file held across the restart: %q %v\n%s", line, err, held.errs.String())
	}
}

// fileText reads a file's text on each String call.
type fileText string

func (f fileText) String() string {
	b, _ := os.ReadFile(string(f))
	return string(b)
}

// backlog is the number of connections waiting to be accepted on the
// listening socket at addr (ss's Recv-Q of a listening socket).
func backlog(t *testing.T, addr string) int {
	out, err := exec.Command("ss", "-ltnH", "src", addr).Output()
	if err != nil {
		t.Fatalf("ss: %v", err)
	}
	f := strings.Fields(string(out))
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// TestReadInFlightAcrossRestart (issue 29 item 9): a Python client's read
// waits for a stopped origin when the server is stopped: at its
// shutdown_timeout the read is answered with kXR_wait (not left
// unanswered), the next process takes the socket (as from systemd), and
// the client's read, sent again, completes byte-exact once the origin is
// back (XRD_CONNECTIONRETRY=1: a refused connection would fail it).
func TestReadInFlightAcrossRestart(t *testing.T) {
	data := t.TempDir()
	want := writeFile(t, data, "store/inflight/f.root", 8<<20+7, 93)
	origin := xrdtest.StartOrigin(t, data)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	lf, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	addr := ln.Addr().String()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hepcache.toml")
	metricsAddr := freeAddr(t)
	os.WriteFile(cfg, []byte(fmt.Sprintf("[server]\nlisten = %q\nmetrics_listen = %q\nshutdown_timeout = \"1s\"\n[cache]\ndir = %q\nprefetch = 0\n[origin]\ndefault = \"root://%s\"\ntimeout = \"2m\"\n",
		addr, metricsAddr, filepath.Join(dir, "cache"), origin.Addr)), 0o644)
	logPath := filepath.Join(dir, "hepcache.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	log := fileText(logPath)
	start := func() (*exec.Cmd, chan error) {
		t.Helper()
		cmd := exec.Command("sh", "-c", `LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" "$@"`, hepcacheBin, "serve", "--config", cfg)
		cmd.ExtraFiles = []*os.File{lf}
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		t.Cleanup(func() { cmd.Process.Kill() })
		return cmd, done
	}
	t.Cleanup(func() {
		syscall.Kill(origin.PID(), syscall.SIGCONT)
		if t.Failed() {
			t.Logf("hepcache log:\n%s", log.String())
		}
	})
	first, firstDone := start()
	url := "root://" + addr + "//store/inflight/f.root"
	held := holdFile(t, url) // its first MiB is read and cached
	syscall.Kill(origin.PID(), syscall.SIGSTOP)
	io.WriteString(held.stdin, "go\n") // the next read waits for the origin
	// Stopped while the read waits for the origin: answered at the
	// deadline.
	eventually.True(t, func() bool {
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return regexp.MustCompile(`(?m)^hepcache_fetch_inflight_bytes [1-9]`).Match(b)
	}, "the read to wait for the stopped origin")
	first.Process.Signal(syscall.SIGTERM)
	if err := <-firstDone; err != nil {
		t.Logf("first process: %v", err)
	}
	if !strings.Contains(log.String(), "answered with kXR_wait") {
		t.Fatalf("no request was in progress at the shutdown deadline:\n%s", log.String())
	}
	syscall.Kill(origin.PID(), syscall.SIGCONT)
	start()
	line, err := held.out.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != fmt.Sprintf("%x", want) {
		t.Fatalf("the read in flight across the restart: %q %v\n%s", line, err, held.errs.String())
	}
}
