package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/xrdtest"
)

const mib = 1 << 20

// cachedCount is how many origins' copies of p the cache directory holds.
func cachedCount(dir, p string) int {
	origins, _ := cacheInspect(dir, p) // not cached: an error and none
	return len(origins)
}

// TestQuotaPinAndDirStats: a quota on /store/user makes room from its own
// least recently used files while /store/mc stays whole; pinned files
// survive a global purge that would otherwise take them first (they are
// the oldest); per-directory statistics match what the clients read, in
// /metrics and in `hepcache inspect --summary` against the running server.
func TestQuotaPinAndDirStats(t *testing.T) {
	data := t.TempDir()
	for i := range 4 {
		writeFile(t, data, fmt.Sprintf("store/user/u%d.root", i), mib, uint64(10+i))
	}
	for i := range 3 {
		writeFile(t, data, fmt.Sprintf("store/mc/m%d.root", i), mib, uint64(20+i))
	}
	calib := writeFile(t, data, "store/calib/c.root", 2*mib, 30)
	s := startStack(t, data, func(c *config.Config) {
		withHTTP(c)
		c.Space.Capacity = 9 * mib // high 8.55 MiB, low 8.1 MiB
		c.Space.Pin = []string{"/store/calib"}
		c.Quota = []config.QuotaRule{{Prefix: "/store/user/", Size: 3 * mib}} // high 2.85 MiB
	})
	env := realclient.Env()
	// Pinned first: the least recently used file of the cache.
	py := realclient.Python(t, realclient.DebianPython, "XRootD.client")
	r := realclient.MustRunPython(t, env, py, pyReadAll, s.url+"//store/calib/c.root")
	if got := strings.TrimSpace(string(r.Stdout)); got != fmt.Sprintf("%x", calib) {
		t.Fatalf("python read of the pinned file: %s", got)
	}
	for i := range 3 {
		curlSum(t, s.httpURL()+fmt.Sprintf("/store/mc/m%d.root", i))
	}
	for i := range 4 {
		xrdcpSum(t, env, s.url+fmt.Sprintf("//store/user/u%d.root", i))
	}
	s.originBytes() // every file closed and synced

	// The quota: 4 MiB > 2.85 MiB high -> its oldest files go until
	// <= 2.7 MiB; nothing outside it was touched.
	eventually.True(t, func() bool {
		m := s.scrape(t)
		return m[`hepcache_quota_used_bytes{quota="/store/user/"}`] <= 2.85*mib
	}, "the /store/user quota to be purged under its high watermark")
	m := s.scrape(t)
	if ev := m[`hepcache_quota_evicted_files_total{quota="/store/user/"}`]; ev < 2 {
		t.Fatalf("quota evicted %v files, want the 2 oldest", ev)
	}
	if cachedCount(s.cfg.Cache.Dir, "/store/user/u3.root") != 1 {
		t.Fatal("the newest /store/user file was evicted")
	}
	if cachedCount(s.cfg.Cache.Dir, "/store/user/u0.root") != 0 {
		t.Fatal("the oldest /store/user file survived its quota's purge")
	}
	if v := m[`hepcache_dir_cached_bytes{dir="/store/mc"}`]; v != 3*mib {
		t.Fatalf("/store/mc holds %v bytes, want all 3 MiB", v)
	}
	if v := m[`hepcache_dir_opens_total{dir="/store/mc",result="miss"}`]; v != 3 {
		t.Fatalf("/store/mc misses %v, want 3", v)
	}
	if v := m[`hepcache_dir_served_bytes_total{dir="/store/mc",source="hit"}`] + m[`hepcache_dir_served_bytes_total{dir="/store/mc",source="miss"}`]; v != 3*mib {
		t.Fatalf("/store/mc served %v bytes, want 3 MiB", v)
	}
	if v := m["hepcache_pinned_bytes"]; v != 2*mib {
		t.Fatalf("pinned bytes %v, want 2 MiB", v)
	}

	// A global purge: 5 more MiB push usage over 8.55 MiB. The pinned
	// file is the least recently used, yet stays.
	for i := range 5 {
		writeFile(t, data, fmt.Sprintf("store/more/x%d.root", i), mib, uint64(40+i))
		xrdcpSum(t, env, s.url+fmt.Sprintf("//store/more/x%d.root", i))
	}
	s.originBytes()
	eventually.True(t, func() bool {
		m := s.scrape(t)
		return m["hepcache_cache_used_bytes"] <= m["hepcache_cache_high_watermark_bytes"]
	}, "the global purge")
	if cachedCount(s.cfg.Cache.Dir, "/store/calib/c.root") != 1 {
		t.Fatal("a pinned file was evicted by the global purge")
	}
	if m := s.scrape(t); m[`hepcache_dir_cached_bytes{dir="/store/mc"}`] == 3*mib {
		t.Fatal("the global purge should have evicted unpinned /store/mc files")
	}

	// The operator's view of the running server.
	out := realclient.MustRun(t, env, hepcacheBin, "inspect", "--summary", "--cache-dir", s.cfg.Cache.Dir)
	for _, want := range []string{"running server", "/store/user/", "/store/calib", "since the server started, by directory"} {
		if !strings.Contains(string(out.Stdout), want) {
			t.Fatalf("inspect --summary lacks %q:\n%s", want, out.Stdout)
		}
	}
}

// pyReadAll reads argv[1] whole with the Python bindings and prints its
// sha256.
const pyReadAll = `
import sys, hashlib
from XRootD import client
f = client.File()
st, _ = f.open(sys.argv[1])
assert st.ok, st
st, data = f.read()
assert st.ok, st
print(hashlib.sha256(data).hexdigest())
`

// TestSighupReloadsSpaceAndLimits: the serve process re-reads its config
// file on SIGHUP: a new quota purges at once, and a new readv limit
// refuses a vector read that passed before; a broken file changes nothing.
func TestSighupReloadsSpaceAndLimits(t *testing.T) {
	realclient.Require(t, "xrdcp")
	data := t.TempDir()
	for i := range 4 {
		writeFile(t, data, fmt.Sprintf("store/vo/f%d.root", i), mib, uint64(50+i))
	}
	o := xrdtest.StartOrigin(t, data).Addr
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "hepcache.toml")
	cacheDir := filepath.Join(dir, "cache")
	alog := filepath.Join(dir, "access.log")
	writeCfg := func(extra string) {
		t.Helper()
		body := fmt.Sprintf("[cache]\ndir = %q\n[origin]\ndefault = %q\n[log]\naccess_log = %q\n%s", cacheDir, "root://"+o, alog, extra)
		if err := os.WriteFile(cfgPath, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeCfg("")
	p := startProc(t, "--config", cfgPath)
	url := "root://" + p.addr
	env := realclient.Env()
	for i := range 4 {
		xrdcpSum(t, env, url+fmt.Sprintf("//store/vo/f%d.root", i))
	}
	py := realclient.Python(t, realclient.DebianPython, "XRootD.client")
	readv := func() realclient.Result {
		return realclient.RunPython(t, env, py, pyReadV3, url+"//store/vo/f3.root")
	}
	if r := readv(); r.Err != nil {
		t.Fatalf("vector read of 3 segments before the reload: %s", r)
	}
	cached := func() int {
		n := 0
		for i := range 4 {
			n += cachedCount(cacheDir, fmt.Sprintf("/store/vo/f%d.root", i))
		}
		return n
	}
	eventually.True(t, func() bool { return cached() == 4 }, "4 files cached")
	lines := func(p string) int {
		b, _ := os.ReadFile(p)
		return strings.Count(string(b), "\n")
	}
	eventually.True(t, func() bool { return lines(alog) == 5 }, "5 access log lines")
	// logrotate without copytruncate: move the log, then SIGHUP.
	if err := os.Rename(alog, alog+".1"); err != nil {
		t.Fatal(err)
	}

	// A broken file: the reload fails, the server keeps serving as before.
	writeCfg("[space]\nwatermarks = \"high\"\n")
	p.cmd.Process.Signal(syscall.SIGHUP)
	eventually.True(t, func() bool { return strings.Contains(p.log.String(), "reload on SIGHUP") }, "the failed reload to be logged")
	if r := readv(); r.Err != nil {
		t.Fatalf("a failed reload changed the limits: %s", r)
	}
	// The log was reopened all the same: the new read is in a new file.
	eventually.True(t, func() bool { return lines(alog) == 1 }, "the read after SIGHUP in a new access log")
	if n := lines(alog + ".1"); n != 5 {
		t.Fatalf("the rotated log has %d lines, want its 5", n)
	}

	writeCfg("[limits]\nmax_readv_segments = 2\n[[quota]]\nprefix = \"/store/vo\"\nsize = \"2M\"\n")
	p.cmd.Process.Signal(syscall.SIGHUP)
	eventually.True(t, func() bool { return cached() <= 1 }, "the new quota (2 MiB, high 1.9 MiB) to leave at most one 1 MiB file")
	r := readv()
	if r.Err == nil || !strings.Contains(string(r.Stdout)+string(r.Stderr), "too long") {
		t.Fatalf("after the reload a readv of 3 segments must be refused as too long: %s", r)
	}
	if cachedCount(cacheDir, "/store/vo/f3.root") != 1 {
		// f3 was read last (readv reopened it) and is the one kept.
		t.Fatalf("the most recently used file should be the one kept")
	}
}

// pyReadV3 reads three segments of argv[1] with one vector read.
const pyReadV3 = `
import sys
from XRootD import client
f = client.File()
st, _ = f.open(sys.argv[1])
assert st.ok, st
st, r = f.vector_read([(0, 100), (4096, 100), (8192, 100)])
if not st.ok:
    print("readv failed:", st.message)
    sys.exit(1)
print("OK", len(r.chunks))
`
