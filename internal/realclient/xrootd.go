package realclient

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Xrootd is a real C++ xrootd (Debian's xrootd-server) serving a directory
// on 127.0.0.1, started by StartXrootd and stopped when the test ends.
type Xrootd struct {
	// Addr is "127.0.0.1:port".
	Addr string
	// URL is "root://127.0.0.1:port".
	URL string
	// LogFile is the server's log, worth reading when a test fails.
	LogFile string

	cmd *exec.Cmd
}

// StartXrootd starts xrootd exporting dataDir (read-only use; the files
// must be readable by "nobody" when the tests run as root, so StartXrootd
// opens up the permissions of dataDir's temporary parents). extraConfig
// lines are appended to the configuration, e.g. "xrootd.async off".
func StartXrootd(tb testing.TB, dataDir string, extraConfig ...string) *Xrootd {
	tb.Helper()
	bin := Require(tb, "xrootd")
	work, err := os.MkdirTemp("", "hepcache-xrootd-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(work) })

	asRoot := os.Geteuid() == 0
	if asRoot {
		// xrootd refuses to run as root; as nobody it must reach its work
		// directory and the data.
		openUp(tb, dataDir)
		if err := filepath.Walk(work, func(p string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Chown(p, 65534, 65534)
		}); err != nil {
			tb.Fatal(err)
		}
		if err := os.Chmod(work, 0o755); err != nil {
			tb.Fatal(err)
		}
	}

	port := freePort(tb)
	cfg := []string{
		fmt.Sprintf("xrd.port %d", port),
		"xrd.network nodnr",
		"all.export /",
		"oss.localroot " + dataDir,
		"all.adminpath " + work,
		"all.pidpath " + work,
		"xrootd.chksum adler32",
	}
	cfg = append(cfg, extraConfig...)
	cfgFile := filepath.Join(work, "xrootd.cfg")
	if err := os.WriteFile(cfgFile, []byte(strings.Join(cfg, "\n")+"\n"), 0o644); err != nil {
		tb.Fatal(err)
	}
	x := &Xrootd{
		Addr:    fmt.Sprintf("127.0.0.1:%d", port),
		URL:     fmt.Sprintf("root://127.0.0.1:%d", port),
		LogFile: filepath.Join(work, "xrootd.log"),
	}
	args := []string{"-c", cfgFile, "-l", x.LogFile, "-n", "hepcache-test"}
	if asRoot {
		args = append([]string{"-R", "nobody"}, args...)
	}
	x.cmd = exec.Command(bin, args...)
	x.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := x.cmd.Start(); err != nil {
		tb.Fatalf("start xrootd: %v", err)
	}
	exited := make(chan struct{}) // closed when the process has exited
	var waitErr error
	go func() { waitErr = x.cmd.Wait(); close(exited) }()
	tb.Cleanup(func() {
		syscall.Kill(-x.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			syscall.Kill(-x.cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", x.Addr, time.Second)
		if err == nil {
			c.Close()
			return x
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(x.LogFile)
			tb.Fatalf("xrootd exited: %v\n%s", waitErr, log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(x.LogFile)
			tb.Fatalf("xrootd did not listen on %s: %v\n%s", x.Addr, err, log)
		}
	}
}

// openUp makes dir and its parents inside the temporary directory
// traversable and readable for everyone, so that xrootd running as nobody
// can serve the files a root test wrote into t.TempDir() (created 0700).
func openUp(tb testing.TB, dir string) {
	tb.Helper()
	tmp := filepath.Clean(os.TempDir())
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.IsDir() {
			return os.Chmod(p, fi.Mode().Perm()|0o755)
		}
		return os.Chmod(p, fi.Mode().Perm()|0o444)
	})
	if err != nil {
		tb.Fatal(err)
	}
	for p := filepath.Dir(filepath.Clean(dir)); strings.HasPrefix(p, tmp+"/"); p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.Chmod(p, fi.Mode().Perm()|0o755); err != nil {
			tb.Fatal(err)
		}
	}
}

// freePort returns a TCP port that was free on 127.0.0.1 a moment ago.
func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
