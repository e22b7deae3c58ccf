package wan

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/xrdtest"
)

// TestXrdcpThroughLink copies a file with the real xrdcp from a real xrootd
// through emulated links: the protocol's pipelined requests must cross
// intact in both directions.
func TestXrdcpThroughLink(t *testing.T) {
	if testing.Short() {
		t.Skip("starts xrootd")
	}
	xrdcp := xrdtest.RequireTool(t, "xrdcp")
	data, err := os.MkdirTemp("", "wan-data-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(data) })
	want := randomBytes(9, 8<<20+12345)
	if err := os.WriteFile(filepath.Join(data, "f.bin"), want, 0o644); err != nil {
		t.Fatal(err)
	}
	origin := xrdtest.StartOrigin(t, data).Addr
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
