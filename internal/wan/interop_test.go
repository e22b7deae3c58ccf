package wan

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// needTool returns the path of a real tool, failing under CI=true and
// skipping otherwise when it is missing.
func needTool(tb testing.TB, name string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("%s not installed: %v", name, err)
		}
		tb.Skipf("%s not installed", name)
	}
	return p
}

// startXrootd runs a real C++ xrootd serving dir on a loopback port and
// returns its address.
func startXrootd(tb testing.TB, dir string) string {
	tb.Helper()
	bin := needTool(tb, "xrootd")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	work, err := os.MkdirTemp("", "wan-xrootd-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(work) })
	cfg := filepath.Join(work, "xrootd.cfg")
	os.WriteFile(cfg, fmt.Appendf(nil, "xrd.port %d\nall.export /\noss.localroot %s\nall.adminpath %s\nall.pidpath %s\n",
		port, dir, work, work), 0o644)
	for _, d := range []string{work, dir} {
		os.Chmod(d, 0o755)
		os.Chown(d, 65534, 65534) // xrootd runs as nobody
	}
	cmd := exec.Command(bin, "-R", "nobody", "-c", cfg, "-l", filepath.Join(work, "log"), "-n", "wantest")
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return addr
		}
		if i == 200 {
			log, _ := os.ReadFile(filepath.Join(work, "log"))
			tb.Fatalf("xrootd did not start: %v\n%s", err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestXrdcpThroughLink copies a file with the real xrdcp from a real xrootd
// through emulated links: the protocol's pipelined requests must cross
// intact in both directions.
func TestXrdcpThroughLink(t *testing.T) {
	if testing.Short() {
		t.Skip("starts xrootd")
	}
	xrdcp := needTool(t, "xrdcp")
	data, err := os.MkdirTemp("", "wan-data-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(data) })
	want := randomBytes(9, 8<<20+12345)
	if err := os.WriteFile(filepath.Join(data, "f.bin"), want, 0o644); err != nil {
		t.Fatal(err)
	}
	origin := startXrootd(t, data)
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
	}{
		{"rtt 10ms", func(c *Config) { c.RTT = 10 * time.Millisecond }},
		{"rtt 20ms 50MB/s", func(c *Config) { c.RTT = 20 * time.Millisecond; c.Bandwidth = 50e6 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProxy(t, origin, tc.mutate)
			out := filepath.Join(t.TempDir(), "out")
			cmd := exec.Command(xrdcp, "-f", "-s", fmt.Sprintf("root://%s//f.bin", p.Addr()), out)
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("xrdcp: %v\n%s", err, b)
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("xrdcp through the link: %d bytes, want %d, equal=%v", len(got), len(want), bytes.Equal(got, want))
			}
			if p.Stats.BytesDown.Load() < int64(len(want)) {
				t.Errorf("Stats.BytesDown = %d < file size", p.Stats.BytesDown.Load())
			}
		})
	}
}
