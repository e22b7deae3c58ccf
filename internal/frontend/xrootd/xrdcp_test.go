package xrootd

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/realclient"
)

// Sizes around the page (4 KiB), message and chunk boundaries, and empty.
var copySizes = []struct {
	name string
	size int
}{
	{"empty", 0},
	{"one byte", 1},
	{"page minus one", 4095},
	{"page", 4096},
	{"page plus one", 4097},
	{"odd", 1234567},
	{"chunk boundary plus one", 8<<20 + 1},
	{"large odd", 21*1000*1000 + 7},
}

func TestXrdcp(t *testing.T) {
	xrdcp := realclient.Require(t, "xrdcp")
	ts := startServer(t, "", nil)
	sums := map[string]string{}
	for _, s := range copySizes {
		sums[s.name] = writeRandom(t, ts.dir, "data/"+s.name, s.size)
	}
	modes := []struct {
		name string
		env  []string
	}{
		{"pgread", nil},
		{"plain read", []string{"XRD_CPUSEPGWRTRD=0"}},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			for _, s := range copySizes {
				t.Run(s.name, func(t *testing.T) {
					dst := filepath.Join(t.TempDir(), "out")
					realclient.MustRun(t, realclient.Env(m.env...), xrdcp, "-s", "-f", ts.url+"//data/"+s.name, dst)
					if got := fileSHA(t, dst); got != sums[s.name] {
						t.Fatalf("sha256 of the copy = %s, want %s", got, sums[s.name])
					}
				})
			}
		})
	}
}

// TestXrdcpFollowsRedirect checks the cluster seam with a real client: the
// first server's backend names the node that owns the file (RedirectError),
// xrdcp follows kXR_redirect and reads it there.
func TestXrdcpFollowsRedirect(t *testing.T) {
	xrdcp := realclient.Require(t, "xrdcp")
	owner := startServer(t, "", nil)
	want := writeRandom(t, owner.dir, "store/f", 777_777)
	host, port, _ := strings.Cut(owner.addr, ":")
	portNum, _ := strconv.Atoi(port)
	entry := startServer(t, "", func(c *Config, r *recorder) {
		r.openErr = func(req backend.Request) error {
			return &backend.RedirectError{URL: owner.url + "/" + req.Path, Host: host, Port: portNum}
		}
	})
	dst := filepath.Join(t.TempDir(), "f")
	realclient.MustRun(t, realclient.Env(), xrdcp, "-f", "-s", entry.url+"//store/f", dst)
	if got := fileSHA(t, dst); got != want {
		t.Fatalf("sha256 after the redirect = %s, want %s", got, want)
	}
	if len(owner.rec.requests()) == 0 {
		t.Fatal("the owner never saw the request")
	}
}

// TestXrdcpWaitsWhenShed (issue 33 item 6): an open the cache sheds for
// overload (backend.ErrOverloaded with a wait) reaches xrdcp as kXR_wait:
// it waits and opens again, and the copy succeeds.
func TestXrdcpWaitsWhenShed(t *testing.T) {
	xrdcp := realclient.Require(t, "xrdcp")
	var opens atomic.Int32
	ts := startServer(t, "", func(c *Config, r *recorder) {
		r.openErr = func(req backend.Request) error {
			if opens.Add(1) == 1 {
				return fmt.Errorf("open %s: %w", req.Path, &backend.WaitError{Seconds: 1, Reason: "fetches queued", Err: backend.ErrOverloaded})
			}
			return nil
		}
	})
	sum := writeRandom(t, ts.dir, "data/f", 100000)
	dst := filepath.Join(t.TempDir(), "out")
	realclient.MustRun(t, realclient.Env(), xrdcp, "-s", "-f", ts.url+"//data/f", dst)
	if got := fileSHA(t, dst); got != sum || opens.Load() != 2 {
		t.Fatalf("sha256 %s (want %s), %d opens; want the copy after one wait", got, sum, opens.Load())
	}
}
