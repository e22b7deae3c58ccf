package e2e

import (
	"fmt"
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

// TestReloadSpaceTimeoutsAndLogrotate: the reproductions of a
// partial reload. A reload applies space.capacity (a smaller one purges at
// once) and origin.timeout (a read from a stopped origin fails at the new
// bound), and names a key it cannot apply by its full key (cache.ram),
// not its section. The packaged logrotate file, run by the real logrotate
// where no systemd runs, rotates the access log and log.file (the server
// log) and its postrotate (`hepcache reload`) makes the server write to
// the new files.
func TestReloadSpaceTimeoutsAndLogrotate(t *testing.T) {
	realclient.Require(t, "xrdcp")
	logrotate := realclient.Require(t, "logrotate")
	data := t.TempDir()
	for i := range 5 {
		writeFile(t, data, fmt.Sprintf("store/r/f%d.root", i), mib, uint64(70+i))
	}
	org := xrdtest.StartOrigin(t, data)
	dir := t.TempDir()
	cacheDir, logDir := filepath.Join(dir, "cache"), filepath.Join(dir, "log")
	os.Mkdir(logDir, 0o755)
	alog, slog := filepath.Join(logDir, "access.log"), filepath.Join(logDir, "hepcache.log")
	cfgPath := filepath.Join(dir, "hepcache.toml")
	writeCfg := func(cacheExtra, originExtra string) {
		t.Helper()
		body := fmt.Sprintf("[cache]\ndir = %q\n%s\n[origin]\ndefault = \"root://%s\"\n%s\n[log]\naccess_log = %q\nfile = %q\n",
			cacheDir, cacheExtra, org.Addr, originExtra, alog, slog)
		if err := os.WriteFile(cfgPath, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	read := func(f string) []byte { b, _ := os.ReadFile(f); return b }
	writeCfg("", "")
	p := startProc(t, "--config", cfgPath)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log.file:\n%s", read(slog))
		}
	})
	url := "root://" + p.addr
	for i := range 4 {
		xrdcpSum(t, realclient.Env(), url+fmt.Sprintf("//store/r/f%d.root", i))
	}
	cached := func() int {
		n := 0
		for i := range 5 {
			n += cachedCount(cacheDir, fmt.Sprintf("/store/r/f%d.root", i))
		}
		return n
	}
	eventually.True(t, func() bool { return cached() == 4 }, "4 files cached")
	if len(read(slog)) == 0 || len(p.log.String()) > 0 {
		t.Fatalf("the server log is not in log.file: %d bytes there, stderr:\n%s", len(read(slog)), p.log.String())
	}

	// capacity 3 MiB (high 2.85 MiB): the purge leaves at most 2 files.
	writeCfg("ram = \"64M\"\n[space]\ncapacity = \"3M\"", "timeout = \"2s\"")
	p.cmd.Process.Signal(syscall.SIGHUP)
	eventually.True(t, func() bool { return strings.Contains(string(read(slog)), "reloaded on SIGHUP") }, "the reload")
	eventually.True(t, func() bool { return cached() <= 2 }, "the new capacity to purge the cache to 2 files")
	if l := string(read(slog)); !strings.Contains(l, "reload: cache.ram needs a restart") || strings.Contains(l, "space needs") || strings.Contains(l, "origin needs") {
		t.Errorf("the restart warning does not name cache.ram alone:\n%s", l)
	}
	// A stopped origin: the next miss fails at the reloaded 2 s, not the
	// hour the server started with (xrdcp would give up first).
	syscall.Kill(org.PID(), syscall.SIGSTOP)
	defer syscall.Kill(org.PID(), syscall.SIGCONT)
	r := realclient.Run(t, realclient.Env(), "xrdcp", "-f", "-N", url+"//store/r/f4.root", "/dev/null")
	if r.Err == nil || !strings.Contains(string(r.Stderr), "deadline") {
		t.Errorf("a read from the stopped origin after origin.timeout = 2s: %s", r)
	}
	syscall.Kill(org.PID(), syscall.SIGCONT)

	// The packaged logrotate file, pointed at this server's files.
	conf, err := os.ReadFile("../../packaging/logrotate")
	if err != nil {
		t.Fatal(err)
	}
	c := strings.NewReplacer("/var/log/hepcache", logDir, "/usr/bin/hepcache", hepcacheBin, "/etc/hepcache/hepcache.toml", cfgPath,
		"su hepcache hepcache", "", "create 0640 hepcache hepcache", "create 0640", "notifempty", "").Replace(string(conf))
	if !strings.Contains(c, hepcacheBin+" reload") {
		t.Fatalf("the packaged postrotate does not run hepcache reload:\n%s", conf)
	}
	lrConf := filepath.Join(dir, "logrotate.conf")
	os.WriteFile(lrConf, []byte(c), 0o644)
	before := len(read(alog))
	if out, err := exec.Command(logrotate, "-f", "-s", filepath.Join(dir, "logrotate.state"), lrConf).CombinedOutput(); err != nil {
		t.Fatalf("logrotate: %v\n%s", err, out)
	}
	if n := len(read(alog + ".1")); n != before || n == 0 {
		t.Fatalf("access.log.1 has %d bytes, want the %d of access.log", n, before)
	}
	eventually.True(t, func() bool { return strings.Contains(string(read(slog)), "reloaded by hepcache reload") }, "logrotate's postrotate to reload the server into the new log.file")
	xrdcpSum(t, realclient.Env(), url+"//store/r/f0.root")
	eventually.True(t, func() bool { return strings.Contains(string(read(alog)), "/store/r/f0.root") }, "the next access record in the new access.log")
	if strings.Contains(string(read(slog+".1")), "reloaded by hepcache reload") {
		t.Errorf("the reload was logged to the rotated server log")
	}
}
