package e2e

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/s3proc"
	"github.com/hepcache/hepcache/internal/xrdtest"
)

// TestBenchCommandsFromScratch (issue 34, first week 0): every `hepcache
// bench NAME`, run as a newcomer runs it, from a scratch working directory
// with its default --dir (a relative results/NAME) and --smoke, starts each
// server it uses (the C++ origin, the links, hepcache, XCache, versitygw,
// a cluster) and reads a file through each; link, generate and job, which
// start no server of their own, run with their defaults too. bench wan and
// workflow stopped at once with their relative default directory ("xrootd
// exited at start"), and bench throughput took 8 minutes to fail against
// a dead origin.
func TestBenchCommandsFromScratch(t *testing.T) {
	realclient.RequireRoot(t, "bench soak mounts a tmpfs, XCache runs as nobody")
	for _, tool := range []string{"xrootd", "xrdcp", "cmsd"} {
		realclient.Require(t, tool)
	}
	realclient.Python(t, realclient.DebianPython, "XRootD.client")
	withS3 := true
	if _, err := s3proc.Binary(); err != nil {
		if realclient.InCI() {
			t.Fatalf("versitygw: %v", err)
		}
		withS3 = false
	}
	scratch := t.TempDir()
	os.Chmod(scratch, 0o755) // xrootd runs as nobody below it
	run := func(t *testing.T, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, hepcacheBin, append([]string{"bench"}, args...)...)
		cmd.Dir = scratch
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("hepcache bench %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	for _, tc := range []struct {
		name string
		// want are the servers the smoke run must say it read through.
		want []string
	}{
		{"throughput", []string{"origin at", "hepcache at", "xcache at", "versitygw at"}},
		{"wan", []string{"origin at", "through the link", "hepcache at", "xcache at", "versitygw at"}},
		{"workflow", []string{"origin at", "through the emulated link", "hepcache at", "xcache at"}},
		{"resources", []string{"origin at", "through the emulated link", "hepcache at", "xcache at"}},
		{"scale", []string{"origin at", "hepcache at", "xcache at"}},
		{"layouts", []string{"origin at", "through the emulated link", "hepcache at", "xcache at"}},
		{"files", []string{"origin at", "hepcache at", "xcache at"}},
		{"stall", []string{"origin at", "hepcache at"}},
		{"soak", []string{"origin at", "hepcache at"}},
		{"cluster", []string{"origin at", "2 nodes started"}},
		{"purge", nil},
		{"floor", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := run(t, tc.name, "--smoke")
			for _, w := range tc.want {
				if w == "versitygw at" && !withS3 {
					continue
				}
				if !strings.Contains(out, w) {
					t.Errorf("bench %s --smoke does not say %q:\n%s", tc.name, w, out)
				}
			}
			if tc.name != "cluster" { // default: a temporary directory
				if _, err := os.Stat(filepath.Join(scratch, "results")); err != nil {
					t.Errorf("bench %s did not work under the relative results/: %v", tc.name, err)
				}
			}
		})
	}
	t.Run("generate and job", func(t *testing.T) {
		run(t, "generate")
		if _, err := os.Stat(filepath.Join(scratch, "ttbar.root")); err != nil {
			t.Fatalf("bench generate wrote no ttbar.root in the working directory: %v", err)
		}
		if out := run(t, "job", "--input", "ttbar.root", "--events", "10"); !strings.Contains(out, "{") {
			t.Fatalf("bench job printed no timings:\n%s", out)
		}
	})
	t.Run("link", func(t *testing.T) {
		data := t.TempDir()
		os.WriteFile(filepath.Join(data, "f.dat"), []byte("through the link"), 0o644)
		origin := xrdtest.StartOrigin(t, data)
		cmd := exec.Command(hepcacheBin, "bench", "link", "--target", origin.Addr)
		cmd.Dir = scratch
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
		if !ok {
			t.Fatalf("bench link said %q", line)
		}
		r := realclient.MustRun(t, realclient.Env(), "xrdcp", "-s", "-f", "root://"+addr+"//f.dat", "-")
		if string(r.Stdout) != "through the link" {
			t.Fatalf("through bench link: %q", r.Stdout)
		}
	})
}
