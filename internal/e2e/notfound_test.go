package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/internal/realclient"
)

// TestNegativeCaching: a missing file costs the origin one request per TTL,
// whichever client asks and however often (xrdfs stat, xrdcp, the Python
// bindings, curl), every client still gets "not found"; once the file exists
// at the origin it becomes readable after the TTL. With the TTL off, every
// request reaches the origin.
func TestNegativeCaching(t *testing.T) {
	const missing = "/store/late.root"
	py := realclient.Python(t, realclient.DebianPython, "XRootD.client")
	for _, tc := range []struct {
		name      string
		ttl       time.Duration
		remembers bool
	}{
		// A TTL far longer than the clients take (so a loaded machine
		// cannot let it expire mid-test), one short enough to see the file
		// appear after it, and none.
		{"ttl-10m", 10 * time.Minute, true},
		{"ttl-1s", time.Second, false},
		{"off", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := t.TempDir()
			s := startStack(t, data, func(c *config.Config) {
				withHTTP(c)
				c.Origin.NotFoundTTL = config.Duration(tc.ttl)
			})
			env := realclient.Env()
			notFound := func(what string, r realclient.Result, marks ...string) {
				t.Helper()
				out := string(r.Stdout) + string(r.Stderr)
				if r.Err == nil {
					t.Fatalf("%s of a missing file succeeded: %s", what, r)
				}
				for _, m := range marks {
					if strings.Contains(out, m) {
						return
					}
				}
				t.Fatalf("%s of a missing file: want one of %q in:\n%s", what, marks, out)
			}
			notFound("first xrdfs stat", realclient.Run(t, env, "xrdfs", s.url, "stat", missing), "[3011]")
			before := s.link.Quiet(300 * time.Millisecond)
			up := s.link.Stats.BytesUp.Load()

			notFound("second xrdfs stat", realclient.Run(t, env, "xrdfs", s.url, "stat", missing), "[3011]")
			notFound("xrdcp", realclient.Run(t, env, "xrdcp", "-s", "-f", s.url+"/"+missing, "-"), "[3011]", "No such file")
			notFound("python open", realclient.RunPython(t, env, py, pyOpen, s.url+"/"+missing), "errno=3011")
			notFound("curl", realclient.Run(t, env, "curl", "-sS", "--fail", s.httpURL()+missing), "404")

			after := s.link.Quiet(300 * time.Millisecond)
			reached := s.link.Stats.BytesUp.Load() != up || after != before
			// A 1 s TTL is too short to assert what the clients hit in
			// between; only the file appearing after it is checked below.
			if tc.remembers && reached {
				t.Fatalf("repeated requests for a missing file reached the origin: %d -> %d bytes up", up, s.link.Stats.BytesUp.Load())
			}
			if tc.ttl == 0 && !reached {
				t.Fatal("with negative caching off the origin must be asked every time")
			}
			m := s.scrape(t)
			hits := m["hepcache_origin_not_found_hits_total"]
			if tc.remembers && hits < 4 {
				t.Fatalf("not-found hits %v, want at least 4 (stat, xrdcp, python, curl)", hits)
			}
			if tc.ttl == 0 && hits != 0 {
				t.Fatalf("not-found hits %v with negative caching off", hits)
			}

			if tc.ttl > time.Minute {
				return // remembered for 10 minutes: not waited for
			}
			// The file appears at the origin: readable once the TTL ends.
			want := writeFile(t, data, strings.TrimPrefix(missing, "/"), 300_000, 11)
			eventually.True(t, func() bool {
				return realclient.Run(t, env, "xrdfs", s.url, "stat", missing).Err == nil
			}, "%s to become visible after the TTL", missing)
			if got := xrdcpSum(t, env, s.url+"/"+missing); got != want {
				t.Fatalf("read after the file appeared: sha256 %s, want %s", hex(got), hex(want))
			}
		})
	}
}

// pyOpen opens argv[1] with the XRootD Python bindings and prints the status.
const pyOpen = `
import sys
from XRootD import client
f = client.File()
st, _ = f.open(sys.argv[1])
print("errno=%d ok=%s" % (st.errno, st.ok))
sys.exit(0 if st.ok else 1)
`
