package xrootd

import (
	"fmt"
	"hash/adler32"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/realclient"
)

func TestXrdfs(t *testing.T) {
	xrdfs := realclient.Require(t, "xrdfs")
	ts := startServer(t, "", nil)
	writeRandom(t, ts.dir, "store/a.root", 123457)
	writeRandom(t, ts.dir, "store/empty", 0)
	if err := os.Mkdir(filepath.Join(ts.dir, "store/sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(ts.dir, "store/a.root"))
	env := realclient.Env()
	run := func(args ...string) string {
		t.Helper()
		return string(realclient.MustRun(t, env, xrdfs, append([]string{ts.url}, args...)...).Stdout)
	}

	t.Run("stat", func(t *testing.T) {
		out := run("stat", "/store/a.root")
		for _, want := range []string{"Size:   123457", "IsReadable", "Mode:   0644"} {
			if !strings.Contains(out, want) {
				t.Fatalf("xrdfs stat output lacks %q:\n%s", want, out)
			}
		}
		if out := run("stat", "/store/sub"); !strings.Contains(out, "IsDir") {
			t.Fatalf("xrdfs stat of a directory:\n%s", out)
		}
	})
	t.Run("ls", func(t *testing.T) {
		out := run("ls", "/store")
		if got := strings.Fields(out); strings.Join(got, " ") != "/store/a.root /store/empty /store/sub" {
			t.Fatalf("xrdfs ls = %q", got)
		}
	})
	t.Run("ls -l", func(t *testing.T) {
		out := run("ls", "-l", "/store")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 || !strings.Contains(lines[0], " 123457 ") || !strings.HasPrefix(lines[0], "-rw-r--r--") ||
			!strings.HasPrefix(lines[2], "d") || !strings.HasSuffix(lines[2], "/store/sub") {
			t.Fatalf("xrdfs ls -l:\n%s", out)
		}
	})
	t.Run("ls -l of a large directory", func(t *testing.T) {
		// Long names make the listing span several kXR_oksofar parts.
		for i := 0; i < 1500; i++ {
			name := fmt.Sprintf("big/%04d-%s", i, strings.Repeat("n", 100))
			writeRandom(t, ts.dir, name, i)
		}
		os.Mkdir(filepath.Join(ts.dir, "emptydir"), 0o755)
		lines := strings.Split(strings.TrimSpace(run("ls", "-l", "/big")), "\n")
		if len(lines) != 1500 || !strings.Contains(lines[1499], fmt.Sprintf(" 1499 ")) {
			t.Fatalf("xrdfs ls -l /big: %d lines, last %q", len(lines), lines[len(lines)-1])
		}
		if out := run("ls", "/emptydir"); strings.TrimSpace(out) != "" {
			t.Fatalf("xrdfs ls of an empty directory: %q", out)
		}
		if out := run("ls", "-l", "/emptydir"); strings.TrimSpace(out) != "" {
			t.Fatalf("xrdfs ls -l of an empty directory: %q", out)
		}
	})
	t.Run("query checksum", func(t *testing.T) {
		out := run("query", "checksum", "/store/a.root")
		if want := fmt.Sprintf("adler32 %08x", adler32.Checksum(data)); strings.TrimSpace(out) != want {
			t.Fatalf("checksum %q, want %q", out, want)
		}
	})
	t.Run("query config", func(t *testing.T) {
		out := run("query", "config", "readv_iov_max")
		if strings.TrimSpace(out) != "1024" {
			t.Fatalf("readv_iov_max = %q", out)
		}
	})
	t.Run("locate", func(t *testing.T) {
		out := run("locate", "/store/a.root")
		if !strings.Contains(out, ts.addr) || !strings.Contains(out, "Server Read") {
			t.Fatalf("xrdfs locate:\n%s", out)
		}
	})
	t.Run("stat of a missing file", func(t *testing.T) {
		r := realclient.Run(t, env, xrdfs, ts.url, "stat", "/store/nope")
		if r.Err == nil || !strings.Contains(string(r.Stderr), "[3011]") {
			t.Fatalf("stat of a missing file: %v", r)
		}
	})
}

// TestQueryChecksumAsync makes the checksum slower than ChecksumWait, so
// that the clients get kXR_waitresp and then the asynchronous answer.
func TestQueryChecksumAsync(t *testing.T) {
	xrdfs := realclient.Require(t, "xrdfs")
	xrdcp := realclient.Require(t, "xrdcp")
	start := func(t *testing.T) (*testServer, []byte) {
		gate := make(chan struct{})
		ts := startServer(t, "", func(c *Config, r *recorder) {
			c.ChecksumWait = time.Millisecond
			r.checksumGate = gate
		})
		ts.srv.afterWaitResp = func() { close(gate) }
		writeRandom(t, ts.dir, "f", 99999)
		data, _ := os.ReadFile(filepath.Join(ts.dir, "f"))
		return ts, data
	}
	t.Run("xrdfs query checksum", func(t *testing.T) {
		ts, data := start(t)
		out := realclient.MustRun(t, realclient.Env(), xrdfs, ts.url, "query", "checksum", "/f").Stdout
		if want := fmt.Sprintf("adler32 %08x", adler32.Checksum(data)); strings.TrimSpace(string(out)) != want {
			t.Fatalf("checksum %q, want %q", out, want)
		}
	})
	t.Run("xrdcp --cksum", func(t *testing.T) {
		ts, data := start(t)
		dst := filepath.Join(t.TempDir(), "f")
		r := realclient.MustRun(t, realclient.Env(), xrdcp, "-f", "--cksum", "adler32", ts.url+"//f", dst)
		if got, _ := os.ReadFile(dst); string(got) != string(data) {
			t.Fatalf("xrdcp --cksum copied wrong data: %v", r)
		}
		if n := ts.rec.checksums.Load(); n != 1 {
			t.Fatalf("xrdcp --cksum asked the server for %d checksums, want 1", n)
		}
	})
}
