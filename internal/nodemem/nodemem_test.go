package nodemem

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tree writes a fake node: files (path -> content) under a temporary root.
func tree(tb testing.TB, files map[string]string) Node {
	tb.Helper()
	root := tb.TempDir()
	for p, c := range files {
		f := filepath.Join(root, p)
		os.MkdirAll(filepath.Dir(f), 0o755)
		if err := os.WriteFile(f, []byte(c), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return Node{Root: root}
}

const meminfo = "MemTotal:       16777216 kB\nMemFree:         1000000 kB\nMemAvailable:   12582912 kB\nCached:          2000000 kB\n"

func TestLimit(t *testing.T) {
	for _, tc := range []struct {
		name      string
		files     map[string]string
		bytes     int64
		from      string
		available int64
		pressure  float64
		total     time.Duration
	}{
		{name: "no cgroup limit", files: map[string]string{
			"proc/meminfo":                             meminfo,
			"proc/self/cgroup":                         "0::/user.slice\n",
			"sys/fs/cgroup/cgroup.controllers":         "memory",
			"sys/fs/cgroup/user.slice/memory.max":      "max\n",
			"sys/fs/cgroup/user.slice/memory.pressure": "some avg10=1.50 avg60=0.00 avg300=0.00 total=5\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
			"proc/pressure/memory":                     "some avg10=9.00 avg60=0.00 avg300=0.00 total=5\n",
		}, bytes: 16 << 30, from: "MemTotal", available: 12 << 30, pressure: 1.5, total: 5 * time.Microsecond},
		{name: "systemd MemoryMax on the slice above", files: map[string]string{
			"proc/meminfo":                                                meminfo,
			"proc/self/cgroup":                                            "0::/system.slice/hepcache.service\n",
			"sys/fs/cgroup/cgroup.controllers":                            "memory",
			"sys/fs/cgroup/system.slice/memory.max":                       "8589934592\n",
			"sys/fs/cgroup/system.slice/hepcache.service/memory.max":      "max\n",
			"sys/fs/cgroup/system.slice/memory.current":                   "6442450944\n",
			"sys/fs/cgroup/system.slice/memory.stat":                      "anon 100\ninactive_file 1073741824\n",
			"sys/fs/cgroup/system.slice/hepcache.service/memory.pressure": "some avg10=0.25 avg60=0.00 avg300=0.00 total=1\n",
		}, bytes: 8 << 30, from: "cgroup v2 memory.max of /system.slice", available: 3 << 30, pressure: 0.25, total: time.Microsecond},
		{name: "container, cgroup v1", files: map[string]string{
			"proc/meminfo":     meminfo,
			"proc/self/cgroup": "9:pids:/\n4:memory:/docker/abc\n0::/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes":            "9223372036854771712\n",
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "4294967296\n",
			"sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes": "1073741824\n",
			"sys/fs/cgroup/memory/docker/abc/memory.stat":           "total_inactive_file 0\n",
			"proc/pressure/memory":                                  "some avg10=3.00 avg60=0.00 avg300=0.00 total=5\n",
		}, bytes: 4 << 30, from: "cgroup v1 memory.limit_in_bytes of /docker/abc", available: 3 << 30, pressure: 3, total: 5 * time.Microsecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := tree(t, tc.files)
			l, err := n.Limit()
			if err != nil {
				t.Fatal(err)
			}
			if l.Bytes != tc.bytes || !strings.HasPrefix(l.From, tc.from) {
				t.Errorf("limit %d from %q, want %d from %q", l.Bytes, l.From, tc.bytes, tc.from)
			}
			if a, err := n.Available(l); err != nil || a != tc.available {
				t.Errorf("available %d (%v), want %d", a, err, tc.available)
			}
			if p, ok := n.Pressure(); !ok || p.Avg10 != tc.pressure || p.Total != tc.total {
				t.Errorf("pressure %+v %v, want avg10 %v total %v", p, ok, tc.pressure, tc.total)
			}
		})
	}
}

// TestThisNode reads the real node: a limit no larger than the machine.
func TestThisNode(t *testing.T) {
	l, err := Node{}.Limit()
	if err != nil || l.Bytes <= 0 {
		t.Fatalf("limit %+v %v", l, err)
	}
	if a, err := (Node{}).Available(l); err != nil || a <= 0 || a > l.Bytes {
		t.Fatalf("available %d %v of %d", a, err, l.Bytes)
	}
}
