package e2e

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/syncbuf"
	"github.com/hepcache/hepcache/internal/xrdtest"
)

// TestRootRunThenServiceUser: the reproduction. `serve` run as
// root on directories of the service user (here nobody) warns, naming
// each directory and the chown that repairs it; the root-owned files it
// leaves (the access log) then stop the service user's start with an
// error that names the file, its owner and the fix, not a bare
// "permission denied".
func TestRootRunThenServiceUser(t *testing.T) {
	realclient.RequireRoot(t, "serve runs as root and then as nobody")
	setpriv := realclient.Require(t, "setpriv")
	// A directory nobody can reach, holding a copy of the binary nobody
	// can run (the test's temporary directories are root's, mode 0700).
	top, err := os.MkdirTemp("", "hepcache-owner-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	bin := filepath.Join(top, "hepcache")
	copyFile(t, hepcacheBin, bin, 0o755)
	cacheDir, logDir := filepath.Join(top, "cache"), filepath.Join(top, "log")
	for _, d := range []string{cacheDir, logDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(top, 0o755)
	addr := freeAddr(t)
	cfg := filepath.Join(top, "hepcache.toml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("[server]\nlisten = %q\n[cache]\ndir = %q\n[origin]\ndefault = \"root://127.0.0.1:1\"\n[log]\naccess_log = %q\n",
		addr, cacheDir, filepath.Join(logDir, "access.log"))), 0o644)

	// As root: serves, but warns for both directories.
	root := exec.Command(bin, "serve", "--config", cfg)
	var rootLog syncbuf.Buffer
	root.Stdout, root.Stderr = &rootLog, &rootLog
	if err := root.Start(); err != nil {
		t.Fatal(err)
	}
	waitListen(t, addr)
	root.Process.Kill()
	root.Wait()
	for _, d := range []string{cacheDir, logDir} {
		if want := "fix=\"chown -R nobody:nogroup " + d + "\""; !strings.Contains(rootLog.String(), want) {
			t.Errorf("serve as root did not warn with %s:\n%s", want, rootLog.String())
		}
	}
	if _, err := os.Stat(filepath.Join(logDir, "access.log")); err != nil {
		t.Fatalf("the root run left no access log: %v", err)
	}

	// The cache directory repaired, the root-owned access log left: the
	// service user's start fails and says why and how to repair it.
	if out, err := exec.Command("chown", "-R", "nobody:nogroup", cacheDir).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v: %s", err, out)
	}
	out, err := exec.Command(setpriv, "--reuid", "nobody", "--regid", "nogroup", "--clear-groups",
		bin, "serve", "--config", cfg).CombinedOutput()
	if err == nil {
		t.Fatalf("serve as nobody on a root-owned access log started:\n%s", out)
	}
	for _, want := range []string{
		filepath.Join(logDir, "access.log") + " belongs to root:root",
		"runs as nobody",
		"chown -R nobody:nogroup " + logDir,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the error lacks %q:\n%s", want, out)
		}
	}
	// The fix it names works.
	exec.Command("chown", "-R", "nobody:nogroup", logDir).Run()
	svc := exec.Command(setpriv, "--reuid", "nobody", "--regid", "nogroup", "--clear-groups", bin, "serve", "--config", cfg)
	var svcLog syncbuf.Buffer
	svc.Stdout, svc.Stderr = &svcLog, &svcLog
	if err := svc.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { svc.Process.Kill(); svc.Wait() }()
	waitListen(t, addr)
	if strings.Contains(svcLog.String(), "another user") {
		t.Errorf("serve as the owner warned:\n%s", svcLog.String())
	}
}

// copyFile copies src to dst with mode.
// crossableTop returns a new directory any user may cross (0755, removed
// with the test), outside the test's own 0700 directories, and there a
// copy of the hepcache binary any user may run: for tests that run
// hepcache or its children as another user.
func crossableTop(tb testing.TB, prefix string) (top, bin string) {
	tb.Helper()
	top, err := os.MkdirTemp("", prefix)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(top) })
	os.Chmod(top, 0o755)
	bin = filepath.Join(top, "hepcache")
	copyFile(tb, hepcacheBin, bin, 0o755)
	return top, bin
}

func copyFile(tb testing.TB, src, dst string, mode os.FileMode) {
	tb.Helper()
	in, err := os.Open(src)
	if err != nil {
		tb.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		tb.Fatal(err)
	}
	if err := out.Close(); err != nil {
		tb.Fatal(err)
	}
}

// waitListen waits until addr accepts connections.
func waitListen(tb testing.TB, addr string) {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	tb.Fatalf("nothing listens on %s", addr)
}

// TestOwnershipFixIsNarrow (issue 29 items 6 and 11, issue 36 item 2): the
// cache directory of a migrated XCache site, below XCache's own 0700
// directory (here daemon's). XCache's user could swap the cache directory,
// so serve as the service user (nobody) refuses it, naming the one
// directory to give to root, never a chown -R of the directories above.
// Once it is root's, the permission problem left is named with a fix that
// touches only the cache directory and lets nobody cross XCache's
// directory, and prints the directory's mode as a directory's
// (drwx------); the fixes named work.
func TestOwnershipFixIsNarrow(t *testing.T) {
	realclient.RequireRoot(t, "serve runs as nobody below a directory of daemon")
	setpriv := realclient.Require(t, "setpriv")
	top, bin := crossableTop(t, "hepcache-narrow-")
	xc := filepath.Join(top, "xcache")
	if err := os.Mkdir(xc, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chown(xc, 1, 1) // daemon:daemon
	cacheDir := filepath.Join(xc, ".hepcache")
	addr := freeAddr(t)
	cfg := filepath.Join(top, "hepcache.toml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("[server]\nlisten = %q\n[cache]\ndir = %q\n[origin]\ndefault = \"root://127.0.0.1:1\"\n", addr, cacheDir)), 0o644)
	asNobody := func(args ...string) *exec.Cmd {
		return exec.Command(setpriv, append([]string{"--reuid", "nobody", "--regid", "nogroup", "--clear-groups", bin}, args...)...)
	}
	out, err := asNobody("serve", "--config", cfg).CombinedOutput()
	if err == nil {
		t.Fatalf("serve as nobody below daemon's 0700 directory started:\n%s", out)
	}
	for _, want := range []string{xc + " belongs to daemon: another user could replace it", "chown root: " + xc} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the refusal lacks %q:\n%s", want, out)
		}
	}
	if out, err := exec.Command("chown", "root:root", xc).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v %s", err, out)
	}
	out, err = asNobody("serve", "--config", cfg).CombinedOutput()
	if err == nil {
		t.Fatalf("serve as nobody below root's 0700 directory started:\n%s", out)
	}
	for _, want := range []string{
		xc + " belongs to root:root (mode drwx------)",
		"install -d -o nobody -g nogroup " + cacheDir,
		"setfacl -m u:nobody:x " + xc,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the error lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range []string{"chown -R nobody:nogroup " + top, "-rwx------"} {
		if strings.Contains(string(out), bad) {
			t.Errorf("the error says %q:\n%s", bad, out)
		}
	}
	// The fix named (with chmod o+x, as no setfacl is installed here).
	for _, c := range [][]string{{"install", "-d", "-o", "nobody", "-g", "nogroup", cacheDir}, {"chmod", "o+x", xc}} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v %s", c, err, out)
		}
	}
	svc := asNobody("serve", "--config", cfg)
	var svcLog syncbuf.Buffer
	svc.Stdout, svc.Stderr = &svcLog, &svcLog
	if err := svc.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { svc.Process.Kill(); svc.Wait() }()
	waitListen(t, addr)
}

// TestReadOnlyUnderSystemdNamesDropIn (issue 29 item 8): under systemd
// (INVOCATION_ID set, as the unit sets it) a cache directory the unit's
// ProtectSystem=strict leaves read-only (here a read-only bind mount, the
// same EROFS) stops serve and check with the drop-in that adds it to the
// unit's ReadWritePaths, not a bare "read-only file system".
func TestReadOnlyUnderSystemdNamesDropIn(t *testing.T) {
	realclient.RequireRoot(t, "a read-only bind mount")
	srv := t.TempDir()
	if out, err := exec.Command("mount", "--bind", "-o", "ro", srv, srv).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", srv).Run() })
	cacheDir := filepath.Join(srv, "xcache", ".hepcache")
	env := append(os.Environ(), "INVOCATION_ID=0123456789abcdef")
	for _, args := range [][]string{{"serve"}, {"check"}} {
		cmd := exec.Command(hepcacheBin, append(args, "--cache-dir", cacheDir, "--origin", "root://127.0.0.1:1", "--listen", freeAddr(t))...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("%s on a read-only file system: accepted\n%s", args[0], out)
		}
		for _, want := range []string{"read-only file system", "systemctl edit hepcache", "ReadWritePaths=" + cacheDir} {
			if !strings.Contains(string(out), want) {
				t.Errorf("%s: the error lacks %q:\n%s", args[0], want, out)
			}
		}
	}
}

// TestRootLeftoversFetchedAgain (issue 29 item 5): the service stopped,
// `hepcache serve` run by hand as root reads part of a file (its data
// file, sidecar and directories are root's); restarted as the service user
// (nobody), the start-up names the files it cannot write, and xrdcp and
// the Python bindings read that file byte-exact: fetched again or read
// past the cache, never "create cache file ... permission denied".
func TestRootLeftoversFetchedAgain(t *testing.T) {
	realclient.RequireRoot(t, "serve as root, then as nobody")
	setpriv := realclient.Require(t, "setpriv")
	py := realclient.Python(t, realclient.DebianPython, "XRootD.client")
	top, bin := crossableTop(t, "hepcache-leftover-")
	data := t.TempDir()
	want := writeFile(t, data, "store/root/f.root", 4<<20+5, 77)
	origin := xrdtest.StartOrigin(t, data)
	cacheDir := filepath.Join(top, "cache")
	os.Mkdir(cacheDir, 0o755)
	os.Chown(cacheDir, 65534, 65534)
	addr := freeAddr(t)
	cfg := filepath.Join(top, "hepcache.toml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("[server]\nlisten = %q\n[cache]\ndir = %q\n[origin]\ndefault = \"root://%s\"\n", addr, cacheDir, origin.Addr)), 0o644)
	url := "root://" + addr + "//store/root/f.root"
	start := func(asNobody bool) (*exec.Cmd, *syncbuf.Buffer) {
		t.Helper()
		args := []string{bin, "serve", "--config", cfg}
		if asNobody {
			args = append([]string{setpriv, "--reuid", "nobody", "--regid", "nogroup", "--clear-groups"}, args...)
		}
		cmd := exec.Command(args[0], args[1:]...)
		var log syncbuf.Buffer
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		waitListen(t, addr)
		return cmd, &log
	}
	// The service ran before (the cache's directories are nobody's).
	svc, _ := start(true)
	writeFile(t, data, "store/other.root", 1<<20, 78)
	xrdcpSum(t, realclient.Env(), "root://"+addr+"//store/other.root")
	svc.Process.Signal(syscall.SIGTERM)
	svc.Wait()
	root, _ := start(false)
	realclient.MustRunPython(t, realclient.Env(), py, pyReadHead, url, "1048576")
	root.Process.Signal(syscall.SIGTERM)
	root.Wait()
	var leftovers int
	filepath.WalkDir(cacheDir, func(p string, d os.DirEntry, err error) error {
		var st syscall.Stat_t
		if err == nil && d.Type().IsRegular() && syscall.Stat(p, &st) == nil && st.Uid == 0 && strings.HasSuffix(p, "f.root") {
			leftovers++
		}
		return nil
	})
	if leftovers == 0 {
		t.Fatal("the root run left no root-owned data file")
	}

	_, log := start(true)
	if !strings.Contains(log.String(), "left by a run as root") || !strings.Contains(log.String(), "f.root") {
		t.Errorf("the start-up does not name the file left by root:\n%s", log.String())
	}
	for i := 0; i < 2; i++ {
		if got := xrdcpSum(t, realclient.Env(), url); got != want {
			t.Fatalf("xrdcp read %d: sha256 %s\n%s", i, hex(got), log.String())
		}
	}
	r := realclient.MustRunPython(t, realclient.Env(), py, pyReadAll, url)
	if strings.TrimSpace(string(r.Stdout)) != fmt.Sprintf("%x", want) {
		t.Fatalf("python read: %s", r.Stdout)
	}
	if strings.Contains(log.String(), "permission denied") && strings.Contains(log.String(), "level=ERROR") {
		t.Logf("log:\n%s", log.String())
	}
}
