package e2e

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/xrdtest"
)

// TestReloadAppliesAuthorization (issue 34 item 4): a ban written into the
// rules and an allow_hosts list apply on SIGHUP, without a restart (the
// reload said "security.rule needs a restart" and the ban did not apply):
// xrdcp reads, then is refused with 3010, then cannot connect at all; a
// file opened before the ban keeps reading.
func TestReloadAppliesAuthorization(t *testing.T) {
	realclient.Require(t, "xrdcp")
	py := realclient.Python(t, realclient.DebianPython, "XRootD.client")
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	os.MkdirAll(filepath.Join(data, "store"), 0o755)
	writePattern(t, filepath.Join(data, "store/f.root"), 1<<20)
	origin := xrdtest.StartOrigin(t, data)
	cfg := filepath.Join(dir, "hepcache.toml")
	write := func(security string) {
		os.WriteFile(cfg, []byte("[origin]\ndefault = \"root://"+origin.Addr+"\"\n[security]\n"+security), 0o644)
	}
	write("[[security.rule]]\npath = \"/\"\nread = [\"anonymous\"]\n")
	p := startProc(t, "--config", cfg, "--cache-dir", filepath.Join(dir, "cache"))
	url := "root://" + p.addr + "//store/f.root"
	got := filepath.Join(dir, "got")
	env := realclient.Env()
	realclient.MustRun(t, env, "xrdcp", "-f", "-s", url, got)

	// A client holding the file open across the reload.
	held := startHeld(t, env, py, `
import sys
from XRootD import client
f = client.File()
st, _ = f.open(sys.argv[1])
assert st.ok, st
print("open", flush=True)
sys.stdin.readline()
st, d = f.read(0, 1<<20)
assert st.ok and len(d) == 1<<20, st
print("read", flush=True)
`, url)
	held.waitLine(t, "open")

	reloads := 0
	hup := func() {
		t.Helper()
		reloads++
		p.cmd.Process.Signal(syscall.SIGHUP)
		// "reloaded on SIGHUP", or "reload on SIGHUP failed".
		eventually.True(t, func() bool { return strings.Count(p.log.String(), " on SIGHUP") >= reloads }, "the reload")
	}
	write("[[security.rule]]\npath = \"/\"\nread = [\"anonymous\"]\ndeny = [\"anonymous\"]\n")
	hup()
	if r := realclient.Run(t, env, "xrdcp", "-f", "-s", url, got); r.Err == nil || !strings.Contains(string(r.Stderr), "3010") {
		t.Errorf("read after the ban was reloaded: %v", r)
	}
	if strings.Contains(p.log.String(), "needs a restart") {
		t.Errorf("the reload asked for a restart:\n%s", p.log.String())
	}
	held.in.Write([]byte("\n"))
	held.waitLine(t, "read")

	write("allow_hosts = [\"192.0.2.1\"]\n[[security.rule]]\npath = \"/\"\nread = [\"anonymous\"]\n")
	hup()
	if r := realclient.Run(t, realclient.Env("XRD_CONNECTIONRETRY=1", "XRD_REQUESTTIMEOUT=10"), "xrdcp", "-f", "-s", url, got); r.Err == nil {
		t.Errorf("a client outside the reloaded allow_hosts read: %v", r)
	}
	write("allow_hosts = [\"127.0.0.1\"]\n[[security.rule]]\npath = \"/\"\nread = [\"anonymous\"]\n")
	hup()
	realclient.MustRun(t, env, "xrdcp", "-f", "-s", url, got)
}

// held is a Python client the test drives line by line.
type held struct {
	in  io.WriteCloser
	out *bufio.Scanner
}

func startHeld(t *testing.T, env []string, py, script string, args ...string) *held {
	t.Helper()
	cmd := exec.Command(py, append([]string{"-c", script}, args...)...)
	cmd.Env = env
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	return &held{in: in, out: bufio.NewScanner(out)}
}

func (h *held) waitLine(t *testing.T, want string) {
	t.Helper()
	if !h.out.Scan() || h.out.Text() != want {
		t.Fatalf("held client: got %q (%v), want %q", h.out.Text(), h.out.Err(), want)
	}
}
