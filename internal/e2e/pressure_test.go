package e2e

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/xrdtest"
)

// memCgroup makes a memory cgroup of limit bytes (v2 where the unified
// hierarchy has the memory controller, else v1) and returns the path of
// its cgroup.procs; the cgroup goes with the test.
func memCgroup(tb testing.TB, limit int64) string {
	tb.Helper()
	realclient.RequireRoot(tb, "a memory cgroup")
	name := fmt.Sprintf("hepcache-test-%d", os.Getpid())
	var dir, limitFile string
	if b, err := os.ReadFile("/sys/fs/cgroup/cgroup.subtree_control"); err == nil && strings.Contains(string(b), "memory") {
		dir, limitFile = filepath.Join("/sys/fs/cgroup", name), "memory.max"
	} else if _, err := os.Stat("/sys/fs/cgroup/memory/memory.limit_in_bytes"); err == nil {
		dir, limitFile = filepath.Join("/sys/fs/cgroup/memory", name), "memory.limit_in_bytes"
	} else {
		realclient.Missing(tb, "no writable memory cgroup controller")
		return ""
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		realclient.Missing(tb, "cannot make a memory cgroup: %v", err)
		return ""
	}
	tb.Cleanup(func() {
		// The processes are gone by now (cleanups run last-in first-out).
		for range 50 {
			if os.Remove(dir) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, limitFile), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		tb.Fatal(err)
	}
	return filepath.Join(dir, "cgroup.procs")
}

// metric reads one sample of name from a /metrics page.
func metric(tb testing.TB, url, name string) float64 {
	tb.Helper()
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	tb.Fatalf("no %s in %s", name, url)
	return 0
}

// TestPressureHandsBackUnderCgroup: hepcache in a 3 GiB memory cgroup
// (a container, systemd MemoryMax=) sizes its RAM from the cgroup's limit
// and fills it with hot data; then another process in the cgroup
// allocates and touches half of it. The cache hands memory back, nobody
// is killed for memory, reads stay byte-exact, and the RAM grows back
// once the other process has gone.
func TestPressureHandsBackUnderCgroup(t *testing.T) {
	realclient.Require(t, "xrdcp")
	py := realclient.RequireFile(t, "/usr/bin/python3")
	const limit = 3 << 30
	procs := memCgroup(t, limit)
	dir := t.TempDir()
	data := filepath.Join(dir, "origin")
	os.MkdirAll(data, 0o755)
	const files, size = 7, 256 << 20
	for i := range files {
		writePattern(t, filepath.Join(data, fmt.Sprintf("hot%d.root", i)), size)
	}
	origin := xrdtest.StartOrigin(t, data)
	mAddr := freeAddr(t)
	metrics := "http://" + mAddr + "/metrics"
	p := startProcIn(t, procs, "--cache-dir", filepath.Join(dir, "hc"), "--origin", origin.URL, "--metrics-listen", mAddr)
	ram := metric(t, metrics, "hepcache_ram_bytes")
	if ram >= limit || ram < 1<<30 {
		t.Fatalf("ram %.0f MiB, not sized from the cgroup's %d MiB", ram/(1<<20), limit>>20)
	}
	env := realclient.Env()
	got := filepath.Join(dir, "got")
	read := func() {
		for i := range files {
			realclient.MustRun(t, env, "xrdcp", "-f", "-s", fmt.Sprintf("root://%s//hot%d.root", p.addr, i), got)
			sameFile(t, got, filepath.Join(data, fmt.Sprintf("hot%d.root", i)))
		}
	}
	read()
	full := metric(t, metrics, "hepcache_ram_resident_bytes")
	if full < ram/2 {
		t.Fatalf("the RAM cache holds %.0f MiB of %.0f after reading %d MiB", full/(1<<20), ram/(1<<20), files*size>>20)
	}
	// Another process of the cgroup takes half of it, 64 MiB at a time.
	hog := exec.Command("/bin/sh", "-c", `echo $$ > "$0" && exec "$@"`, procs, py, "-c", `
import mmap, sys, time
n = int(sys.argv[1]); step = 64 << 20
m = mmap.mmap(-1, n)
for off in range(0, n, step):
    for i in range(off, min(n, off + step), 4096):
        m[i] = 1
    time.sleep(0.05)
print("allocated", flush=True)
sys.stdin.read()
`, strconv.Itoa(limit/2))
	stdin, _ := hog.StdinPipe()
	out, _ := hog.StdoutPipe()
	hog.Stderr = os.Stderr
	t0 := time.Now()
	if err := hog.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "allocated") {
		hog.Wait()
		t.Fatalf("the other process did not get its memory (killed for memory?): %v %q %v", err, line, hog.ProcessState)
	}
	took := time.Since(t0)
	under := metric(t, metrics, "hepcache_ram_resident_bytes")
	back := metric(t, metrics, "hepcache_ram_handed_back_bytes_total")
	if under >= full || back == 0 {
		t.Fatalf("resident %.0f MiB before, %.0f MiB under pressure, %.0f MiB handed back", full/(1<<20), under/(1<<20), back/(1<<20))
	}
	select {
	case <-p.done:
		t.Fatalf("hepcache died under memory pressure: %v", p.err)
	default:
	}
	read() // byte-exact under pressure
	stdin.Close()
	hog.Wait()
	eventually.True(t, func() bool {
		return metric(t, metrics, "hepcache_ram_limit_bytes") == metric(t, metrics, "hepcache_ram_bytes")
	}, "the RAM limit back to the whole arena")
	read()
	t.Logf("cgroup %d MiB, ram %.0f MiB: resident %.0f MiB full, %.0f MiB with the other process holding %d MiB (allocated in %s), %.0f MiB handed back",
		limit>>20, ram/(1<<20), full/(1<<20), under/(1<<20), limit/2>>20, took.Round(time.Millisecond), back/(1<<20))
}
