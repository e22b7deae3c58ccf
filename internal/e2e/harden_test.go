package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/wan"
	"github.com/hepcache/hepcache/internal/xrdtest"
)

// TestShutdownBehindStuckOriginRead (issue 21, S2): SIGTERM while a client's
// read waits for an origin that stopped answering (SIGSTOP) ends the process
// within server.shutdown_timeout, not when origin.timeout (10 minutes here)
// would end the read.
func TestShutdownBehindStuckOriginRead(t *testing.T) {
	realclient.Require(t, "xrdcp")
	data := t.TempDir()
	const size = 32 << 20
	writeFile(t, data, "store/stuck.root", size, 21)
	origin := xrdtest.StartOrigin(t, data)
	link, err := wan.New(&wan.Config{Target: origin.Addr, RTT: 10 * time.Millisecond, Bandwidth: 8e6})
	if err != nil {
		t.Fatal(err)
	}
	defer link.Close()
	cacheDir := t.TempDir()
	cfgFile := filepath.Join(t.TempDir(), "hepcache.toml")
	os.WriteFile(cfgFile, []byte(fmt.Sprintf("[server]\nshutdown_timeout = \"1s\"\n[cache]\ndir = %q\n[origin]\ndefault = \"root://%s\"\ntimeout = \"10m\"\n",
		cacheDir, link.Addr())), 0o644)
	p := startProc(t, "--config", cfgFile)
	go realclient.Run(t, realclient.Env("XRD_REQUESTTIMEOUT=600", "XRD_STREAMTIMEOUT=600"), "xrdcp", "-s", "-f", "root://"+p.addr+"//store/stuck.root", "/dev/null")
	eventually.True(t, func() bool { return link.Stats.BytesDown.Load() >= 1<<20 }, "the read under way")
	// The origin stops answering: every origin read in flight now waits.
	if err := syscall.Kill(origin.PID(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(origin.PID(), syscall.SIGCONT)
	time.Sleep(300 * time.Millisecond) // let what the link held drain into the cache
	p.cmd.Process.Signal(syscall.SIGTERM)
	start := time.Now()
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		// A liveness bound far above the 1 s asked for, below the 60 s
		// that an origin file's close waited before.
		t.Fatal("hepcache still running 30 s after SIGTERM with shutdown_timeout = 1s")
	}
	t.Logf("exit %v after SIGTERM: %v", time.Since(start), p.err)
}

// TestPurgeOnFullDiskBelowCapacity (issue 21, S3): the cache directory is a
// 48 MiB tmpfs and the configured capacity 600M: the disk fills long before
// the capacity, and the purge must follow the disk's real free space.
// Before, nothing was ever evicted and every later miss was a bypass read.
func TestPurgeOnFullDiskBelowCapacity(t *testing.T) {
	small := realclient.Tmpfs(t, "48m")
	data := t.TempDir()
	const files, size = 16, 6 << 20
	sums := make([][32]byte, files)
	for i := range sums {
		sums[i] = writeFile(t, data, fmt.Sprintf("store/fill/f%02d.root", i), size, uint64(300+i))
	}
	s := startStack(t, data, func(c *config.Config) {
		c.Cache.Dir = small
		c.Space.Capacity = config.Size(600 << 20)
	})
	url := func(i int) string { return fmt.Sprintf("%s//store/fill/f%02d.root", s.url, i) }
	for i := range files {
		if got := xrdcpSum(t, realclient.Env(), url(i)); got != sums[i] {
			t.Fatalf("file %d: sha256 %s, want %s", i, hex(got), hex(sums[i]))
		}
		s.originBytes() // closed, so that a purge may evict it
	}
	st := s.srv.Cache().Stats()
	if st.Evictions.Load() == 0 {
		t.Fatalf("%d MiB read through a 48 MiB disk with capacity 600M: no eviction (%d write errors, %d bytes bypassed)",
			files*size>>20, st.WriteErrors.Load(), st.BytesBypassed.Load())
	}
	// The newest file is cached: read again, the origin sends nothing.
	last := files - 1
	eventually.True(t, func() bool { return complete(small, fmt.Sprintf("/store/fill/f%02d.root", last)) }, "the newest file cached complete")
	before := s.originBytes()
	if got := xrdcpSum(t, realclient.Env(), url(last)); got != sums[last] {
		t.Fatalf("hot read of file %d: sha256 %s", last, hex(got))
	}
	if d := s.originBytes() - before; d != 0 {
		t.Fatalf("hot read of the newest file moved %d bytes from the origin", d)
	}
	t.Logf("evictions %d, write errors %d, bypassed %d bytes", st.Evictions.Load(), st.WriteErrors.Load(), st.BytesBypassed.Load())
}

// TestPprofOnMetricsListener (issue 21, minor): with --debug-pprof the
// metrics listener serves a goroutine dump to curl; without it, 404; and
// the flag without a metrics listener is refused at start-up.
func TestPprofOnMetricsListener(t *testing.T) {
	curl := realclient.Require(t, "curl")
	data := t.TempDir()
	origin := xrdtest.StartOrigin(t, data)
	for _, on := range []bool{true, false} {
		metrics := freeAddr(t)
		args := []string{"--cache-dir", t.TempDir(), "--origin", "root://" + origin.Addr, "--metrics-listen", metrics}
		if on {
			args = append(args, "--debug-pprof")
		}
		startProc(t, args...)
		r := realclient.Run(t, realclient.Env(), curl, "-s", "--retry", "20", "--retry-connrefused", "--retry-delay", "1", "-w", "\n%{http_code}", "http://"+metrics+"/debug/pprof/goroutine?debug=2")
		out := string(r.Stdout)
		if on && (!strings.HasSuffix(out, "\n200") || !strings.Contains(out, "hepcache/internal/server")) {
			t.Fatalf("--debug-pprof: no goroutine dump: %s", r)
		}
		if !on && !strings.HasSuffix(out, "\n404") {
			t.Fatalf("/debug/pprof without --debug-pprof answered: %s", r)
		}
	}
	out, err := exec.Command(hepcacheBin, "serve", "--cache-dir", t.TempDir(), "--listen", freeAddr(t), "--debug-pprof").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "server.debug_pprof") {
		t.Fatalf("--debug-pprof without --metrics-listen: err %v, output:\n%s", err, out)
	}
}

// TestPrestageJobsBelongToSubmitter (issue 21, items 1 and 2): alice stages
// with xrdfs and her token (ztn over roots://); an anonymous client can
// neither cancel (xrdfs prepare -a) nor read (query prepare, GET
// /prestage?id=) her job, nor can bob with his token; alice can, over
// root:// and https://. Ids are 128 random bits. A list beyond
// prestage.max_list_memory is refused as busy.
func TestPrestageJobsBelongToSubmitter(t *testing.T) {
	realclient.Require(t, "xrdfs")
	realclient.Require(t, "curl")
	te := newTokenEnv(t, "hepcache prestage CA")
	writeFile(t, te.data, "store/own/f.root", 3<<20, 5)
	cfgFile := te.config(t, "", "[[security.rule]]\npath = \"/\"\nread = [\"anonymous\"]\n", "[prestage]\nmax_list_memory = \"1M\"\n")
	p := startProc(t, "--config", cfgFile)
	is, caDir, httpAddr, env, dir := te.is, te.caDir, te.httpAddr, te.env, te.dir
	aliceTok := is.Token(t, "alice", "storage.read:/store", "https://cache.e2e.test")
	bobTok := is.Token(t, "bob", "storage.read:/store", "https://cache.e2e.test")
	aliceEnv := append(slices.Clip(env), "BEARER_TOKEN="+aliceTok)
	bobEnv := append(slices.Clip(env), "BEARER_TOKEN="+bobTok)
	secure, plain := "roots://"+p.addr, "root://"+p.addr

	r := realclient.MustRun(t, aliceEnv, "xrdfs", secure, "prepare", "-s", "/store/own/f.root")
	id := strings.TrimSpace(string(r.Stdout))
	if !regexp.MustCompile(`^hepcache-[0-9a-f]{32}$`).MatchString(id) {
		t.Fatalf("prepare id %q: want hepcache- and 128 random bits", id)
	}
	refused := func(who string, r realclient.Result) {
		t.Helper()
		if r.Err == nil || !strings.Contains(r.String(), "3010") || !strings.Contains(r.String(), "another identity") {
			t.Fatalf("%s: not refused with kXR_NotAuthorized: %s", who, r)
		}
	}
	refused("anonymous prepare -a", realclient.Run(t, env, "xrdfs", plain, "prepare", "-a", id))
	refused("anonymous query prepare", realclient.Run(t, env, "xrdfs", plain, "query", "prepare", id))
	refused("bob's query prepare", realclient.Run(t, bobEnv, "xrdfs", secure, "query", "prepare", id))
	curl := func(args ...string) string {
		t.Helper()
		r := realclient.Run(t, realclient.Env(), "curl", append([]string{"-s", "-o", "/dev/null", "-w", "%{http_code}",
			"--cacert", filepath.Join(caDir, "caa.pem")}, args...)...)
		return strings.TrimSpace(string(r.Stdout))
	}
	statusURL := "https://" + httpAddr + "/prestage?id=" + id
	if code := curl(statusURL); code != "403" {
		t.Fatalf("anonymous GET /prestage?id=: HTTP %s, want 403", code)
	}
	if code := curl("-H", "Authorization: Bearer "+bobTok, statusURL); code != "403" {
		t.Fatalf("bob's GET /prestage?id=: HTTP %s, want 403", code)
	}
	eventually.True(t, func() bool {
		r := realclient.Run(t, aliceEnv, "xrdfs", secure, "query", "prepare", id)
		return r.Err == nil && strings.Contains(string(r.Stdout), "1 files, 1 done")
	}, "alice's query prepare reports her job done")
	if code := curl("-H", "Authorization: Bearer "+aliceTok, statusURL); code != "200" {
		t.Fatalf("alice's GET /prestage?id=: HTTP %s, want 200", code)
	}
	if r := realclient.Run(t, aliceEnv, "xrdfs", secure, "prepare", "-a", id); r.Err != nil {
		t.Fatalf("alice cancels her own job: %s", r)
	}

	// 1M for lists: 4000 names of 250 bytes (about 2.6 MB in memory) is
	// refused as busy, before anything is queued.
	var list strings.Builder
	for i := range 4000 {
		fmt.Fprintf(&list, "/store/own/%04d/%s\n", i, strings.Repeat("n", 235))
	}
	listFile := filepath.Join(dir, "list")
	os.WriteFile(listFile, []byte(list.String()), 0o644)
	r = realclient.Run(t, realclient.Env(), "curl", "-s", "-w", "\n%{http_code}", "--cacert", filepath.Join(caDir, "caa.pem"),
		"--data-binary", "@"+listFile, "https://"+httpAddr+"/prestage")
	if out := string(r.Stdout); !strings.HasSuffix(out, "\n503") || !strings.Contains(out, "max_list_memory") {
		t.Fatalf("a list beyond prestage.max_list_memory: %s", r)
	}
}

// TestDataDiskUnmountedAcrossRestart (issue 21 item 3, issue 29 items 3
// and 7): `hepcache serve` with two data disks (real file systems) refuses
// to start until `hepcache disk init` took them into service; it serves
// through them; stopped, one disk unmounted, it starts without it: xrdcp
// reads every file (from the other disk and the origin), /metrics says the
// disk is out, /health (curl) is degraded naming it, nothing is written
// into the bare mount point; the disk mounted again, SIGHUP takes it back
// with its files (read again without the origin) and /health is healthy.
func TestDataDiskUnmountedAcrossRestart(t *testing.T) {
	realclient.Require(t, "xrdcp")
	curl := realclient.Require(t, "curl")
	data := t.TempDir()
	sums := map[string][32]byte{}
	for i := range 6 {
		p := fmt.Sprintf("store/disk/f%d.root", i)
		sums[p] = writeFile(t, data, p, 2<<20+i, uint64(31+i))
	}
	origin := xrdtest.StartOrigin(t, data)
	// disk is a tmpfs reached through a bind mount: unmounted, its mount
	// point is bare; mounted again, its files are there.
	store := realclient.Tmpfs(t, "64m")
	disk := t.TempDir()
	mount := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
			t.Fatalf("mount %v: %v %s", args, err, out)
		}
	}
	mount("--bind", store, disk)
	t.Cleanup(func() { exec.Command("umount", "-l", disk).Run() })
	other := realclient.Tmpfs(t, "64m")
	cacheDir := t.TempDir()
	metricsAddr := freeAddr(t)
	cfgFile := filepath.Join(t.TempDir(), "hepcache.toml")
	os.WriteFile(cfgFile, []byte(fmt.Sprintf("[server]\nmetrics_listen = %q\n[cache]\ndir = %q\ndata_dirs = [%q, %q]\n[origin]\ndefault = \"root://%s\"\n",
		metricsAddr, cacheDir, disk, other, origin.Addr)), 0o644)
	serve := func() ([]byte, error) {
		return exec.Command(hepcacheBin, "serve", "--config", cfgFile, "--listen", freeAddr(t)).CombinedOutput()
	}
	if out, err := serve(); err == nil || !strings.Contains(string(out), "hepcache disk init") {
		t.Fatalf("serve with a data dir never initialised: %v\n%s", err, out)
	}
	if out, err := exec.Command(hepcacheBin, "disk", "init", "--config", cfgFile, disk, other).CombinedOutput(); err != nil {
		t.Fatalf("hepcache disk init: %v\n%s", err, out)
	}
	readAll := func(p *proc) {
		t.Helper()
		for f, want := range sums {
			if got := xrdcpSum(t, realclient.Env(), "root://"+p.addr+"//"+f); got != want {
				t.Fatalf("read %s: sha256 %s", f, hex(got))
			}
		}
	}
	health := func() string {
		t.Helper()
		return string(realclient.MustRun(t, nil, curl, "-sS", "http://"+metricsAddr+"/health").Stdout)
	}
	upMetric := `hepcache_disk_up{disk="` + disk + `"} `
	p := startProc(t, "--config", cfgFile)
	readAll(p)
	p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.done
	onDisk := filesUnderDir(filepath.Join(disk, "data"))
	if onDisk == 0 {
		t.Fatal("no data file on the data disk")
	}
	if out, err := exec.Command("umount", disk).CombinedOutput(); err != nil {
		t.Fatalf("umount: %v %s", err, out)
	}

	p = startProc(t, "--config", cfgFile)
	if h := health(); !strings.Contains(h, `"status":"degraded"`) || !strings.Contains(h, "data disk "+disk+" out of service") {
		t.Fatalf("/health with a data disk not mounted: %s", h)
	}
	if m := string(realclient.MustRun(t, nil, curl, "-sS", "http://"+metricsAddr+"/metrics").Stdout); !strings.Contains(m, upMetric+"0") {
		t.Fatalf("/metrics lacks %s0", upMetric)
	}
	readAll(p)
	if ents, _ := os.ReadDir(disk); len(ents) != 0 {
		t.Fatalf("hepcache wrote into the bare mount point: %v", ents)
	}
	if !strings.Contains(p.log.String(), "data disk out of service from the start") {
		t.Fatalf("no log line for the disk out of service:\n%s", p.log.String())
	}

	mount("--bind", store, disk)
	p.cmd.Process.Signal(syscall.SIGHUP)
	eventually.True(t, func() bool { return strings.Contains(p.log.String(), "data disk back in service") }, "SIGHUP to take the disk back")
	if h := health(); !strings.Contains(h, `"status":"healthy"`) {
		t.Fatalf("/health with the disk back: %s", h)
	}
	if m := string(realclient.MustRun(t, nil, curl, "-sS", "http://"+metricsAddr+"/metrics").Stdout); !strings.Contains(m, upMetric+"1") {
		t.Fatalf("/metrics lacks %s1", upMetric)
	}
	fetched := func() string {
		t.Helper()
		m := string(realclient.MustRun(t, nil, curl, "-sS", "http://"+metricsAddr+"/metrics").Stdout)
		for _, l := range strings.Split(m, "\n") {
			if strings.HasPrefix(l, "hepcache_origin_fetched_bytes_total ") {
				return l
			}
		}
		t.Fatal("no hepcache_origin_fetched_bytes_total in /metrics")
		return ""
	}
	before := fetched()
	readAll(p)
	if after := fetched(); after != before {
		t.Fatalf("files on the disks were fetched again: %s, then %s", before, after)
	}
}

// filesUnderDir counts the regular files under dir.
func filesUnderDir(dir string) int {
	n := 0
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return nil
	})
	return n
}

// TestSighupRefusesWhatStartRefuses (issue 21, item 8): a configuration
// with an unknown rule principal, which `serve` refuses at start-up, is
// refused by SIGHUP too ("reload ... failed", never "reloaded"), and the
// server keeps serving with what it had.
func TestSighupRefusesWhatStartRefuses(t *testing.T) {
	realclient.Require(t, "xrdcp")
	data := t.TempDir()
	want := writeFile(t, data, "store/hup/f.root", 1<<20, 8)
	origin := xrdtest.StartOrigin(t, data)
	cfgFile := filepath.Join(t.TempDir(), "hepcache.toml")
	writeCfg := func(principal string) {
		os.WriteFile(cfgFile, []byte(fmt.Sprintf("[cache]\ndir = %q\n[origin]\ndefault = \"root://%s\"\n[[security.rule]]\npath = \"/\"\nread = [%q]\n",
			filepath.Join(filepath.Dir(cfgFile), "cache"), origin.Addr, principal)), 0o644)
	}
	writeCfg("anonymous")
	p := startProc(t, "--config", cfgFile)
	writeCfg("wizard:merlin")
	out, err := exec.Command(hepcacheBin, "serve", "--config", cfgFile, "--listen", freeAddr(t), "--cache-dir", t.TempDir()).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "wizard") {
		t.Fatalf("serve with an unknown principal: %v\n%s", err, out)
	}
	p.cmd.Process.Signal(syscall.SIGHUP)
	eventually.True(t, func() bool { return strings.Contains(p.log.String(), "reload on SIGHUP failed") }, "SIGHUP to refuse the configuration")
	if log := p.log.String(); strings.Contains(log, "reloaded on SIGHUP") || !strings.Contains(log, "wizard") {
		t.Fatalf("SIGHUP with a configuration serve refuses:\n%s", log)
	}
	if got := xrdcpSum(t, realclient.Env(), "root://"+p.addr+"//store/hup/f.root"); got != want {
		t.Fatalf("read after the refused reload: sha256 %s", hex(got))
	}
}

// TestClientErrorsDoNotFloodTheLog (issue 21, item 9): 2000 HEADs of a
// missing 3000-byte path from one curl connection, each an origin error,
// write a few lines of bounded size, the last one saying how many were
// suppressed, instead of one long line each.
func TestClientErrorsDoNotFloodTheLog(t *testing.T) {
	curl := realclient.Require(t, "curl")
	data := t.TempDir()
	httpAddr := freeAddr(t)
	metrics := freeAddr(t)
	p := startProc(t, "--cache-dir", t.TempDir(), "--origin", "file://"+data, "--http-listen", httpAddr, "--metrics-listen", metrics)
	eventually.True(t, func() bool {
		c, err := net.Dial("tcp", httpAddr)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, "the HTTP listener")
	long := "/store/" + strings.Repeat("x", 3000) // ENAMETOOLONG at the origin: a 502 each
	var cfg strings.Builder
	for range 2000 {
		fmt.Fprintf(&cfg, "url = \"http://%s%s\"\noutput = \"/dev/null\"\n", httpAddr, long)
	}
	cfgFile := filepath.Join(t.TempDir(), "curl.cfg")
	os.WriteFile(cfgFile, []byte(cfg.String()), 0o644)
	start := time.Now()
	realclient.Run(t, realclient.Env(), curl, "-s", "-I", "-K", cfgFile) // fails: the last answer is a 502
	took := time.Since(start)
	time.Sleep(time.Second) // the next allowed line carries the count
	realclient.Run(t, realclient.Env(), curl, "-s", "-I", "http://"+httpAddr+long)
	log := p.log.String()
	lines := strings.Count(log, "http request failed")
	// 20 at once, then 5 a second (logbound's defaults), plus the last.
	if max := 20 + int(5*(took+time.Second).Seconds()) + 2; lines > max || lines == 0 {
		t.Fatalf("%d 'http request failed' lines for 2001 failed requests in %v, want at most %d", lines, took, max)
	}
	for _, l := range strings.Split(log, "\n") {
		if len(l) > 4096 {
			t.Fatalf("a log line of %d bytes: %.300s...", len(l), l)
		}
	}
	if !strings.Contains(log, "suppressed=") {
		t.Fatalf("no line reports the suppressed count:\n%.3000s", log)
	}
	r := realclient.MustRun(t, realclient.Env(), curl, "-s", "http://"+metrics+"/metrics")
	if !strings.Contains(string(r.Stdout), "hepcache_log_suppressed_total ") || strings.Contains(string(r.Stdout), "hepcache_log_suppressed_total 0\n") {
		t.Fatalf("hepcache_log_suppressed_total missing or 0")
	}
	t.Logf("%d lines for 2001 failures in %v; log %d bytes", lines, took, len(log))
}

// TestPrestageIntoPinnedNamespaceBounded (issue 21, item 10): an anonymous
// xrdfs prepare of 52 MB into a pinned namespace of a 40 MB cache pins at
// most space.pin_share (half) of it, says so in /metrics, and a file read
// afterwards stays cached (its second read sends nothing from the origin).
func TestPrestageIntoPinnedNamespaceBounded(t *testing.T) {
	data := t.TempDir()
	var paths []string
	for i := range 13 {
		p := fmt.Sprintf("/store/pin/f%02d.root", i)
		writeFile(t, data, p[1:], 4<<20, uint64(500+i))
		paths = append(paths, p)
	}
	other := writeFile(t, data, "store/other/f.root", 4<<20, 600)
	s := startStack(t, data, func(c *config.Config) {
		withHTTP(c)
		c.Space.Capacity = config.Size(40 << 20)
		c.Space.Pin = []string{"/store/pin"}
	})
	env := realclient.Env()
	realclient.MustRun(t, env, "xrdfs", append([]string{s.url, "prepare", "-s"}, paths...)...)
	eventually.True(t, func() bool {
		m := s.scrape(t)
		return m["hepcache_prestage_done_files_total"]+m["hepcache_prestage_failed_files_total"] == 13
	}, "the 13 files staged")
	m := s.scrape(t)
	if pinned := m["hepcache_pinned_bytes"]; pinned > 20<<20 || m["hepcache_pins_refused_total"] == 0 {
		t.Fatalf("52 MB prestaged into a pinned namespace of a 40 MB cache: %v bytes pinned (share 0.5: at most %d), %v pins refused",
			pinned, 20<<20, m["hepcache_pins_refused_total"])
	}
	if got := xrdcpSum(t, env, s.url+"//store/other/f.root"); got != other {
		t.Fatalf("cold read: sha256 %s", hex(got))
	}
	before := s.originBytes()
	if got := xrdcpSum(t, env, s.url+"//store/other/f.root"); got != other {
		t.Fatalf("hot read: sha256 %s", hex(got))
	}
	if d := s.originBytes() - before; d != 0 {
		t.Fatalf("a file read after the pinned prestage was not kept: its second read moved %d origin bytes", d)
	}
	t.Logf("pinned %v bytes, %v pins refused", m["hepcache_pinned_bytes"], m["hepcache_pins_refused_total"])
}
