package xrootd

import (
	"context"
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/internal/prestage"
	"github.com/hepcache/hepcache/internal/realclient"
)

// TestPrepareWithXrdfs: xrdfs prepare -s stages through the Stager and
// prints the request id, query prepare reports progress, -a cancels; a
// server without a stager, a bad path and a forbidden path are refused.
func TestPrepareWithXrdfs(t *testing.T) {
	xrdfs := realclient.Require(t, "xrdfs")
	env := realclient.Env()

	plain := startServer(t, "", nil)
	writeRandom(t, plain.dir, "store/a", 1000)
	if r := realclient.Run(t, env, xrdfs, plain.url, "prepare", "-s", "/store/a"); r.Err == nil || !strings.Contains(r.String(), "not enabled") {
		t.Fatalf("prepare without a stager: %v", r)
	}

	var st *prestage.Stager
	ts := startServer(t, "", func(c *Config, rec *recorder) {
		st = prestage.New(rec, prestage.Config{Workers: 2})
		c.Stager = st
		c.Authorizer = AuthorizerFunc(func(ctx context.Context, op Op, req backend.Request) error {
			if strings.HasPrefix(req.Path, "/secret") {
				return backend.ErrForbidden
			}
			return nil
		})
	})
	t.Cleanup(func() { st.Close() })
	writeRandom(t, ts.dir, "store/a", 300000)
	writeRandom(t, ts.dir, "store/b", 5)
	run := func(args ...string) realclient.Result {
		t.Helper()
		return realclient.Run(t, env, xrdfs, append([]string{ts.url}, args...)...)
	}

	r := run("prepare", "-s", "/store/a", "/store/b", "/store/none")
	if r.Err != nil {
		t.Fatal(r)
	}
	id := strings.TrimSpace(string(r.Stdout))
	if !strings.HasPrefix(id, "hepcache-") {
		t.Fatalf("prepare printed %q, want a request id", id)
	}
	var out string
	eventually.True(t, func() bool {
		r := run("query", "prepare", id, "/store/a")
		out = string(r.Stdout)
		return r.Err == nil && strings.Contains(out, "0 staging, 0 queued")
	}, "query prepare reports the job finished")
	// A finished job keeps its counts and first error, not its list.
	for _, want := range []string{"3 files, 2 done, 1 failed", "first error: /store/none"} {
		if !strings.Contains(out, want) {
			t.Fatalf("query prepare lacks %q:\n%s", want, out)
		}
	}
	opened := map[string]bool{}
	for _, req := range ts.rec.requests() {
		opened[req.Path] = true
	}
	if !opened["/store/a"] || !opened["/store/b"] {
		t.Fatalf("backend opens: %v", ts.rec.requests())
	}

	if r := run("prepare", "-a", id); r.Err != nil {
		t.Fatalf("cancel of a known id: %v", r)
	}
	if r := run("prepare", "-a", "hepcache-0-0"); r.Err == nil || !strings.Contains(r.String(), "unknown prepare request id") {
		t.Fatalf("cancel of an unknown id: %v", r)
	}
	if r := run("query", "prepare", "nope"); r.Err == nil || !strings.Contains(r.String(), "unknown prepare request id") {
		t.Fatalf("query of an unknown id: %v", r)
	}
	if r := run("prepare", "-s", "/store/a", "/secret/x"); r.Err == nil {
		t.Fatalf("prepare of a forbidden path: %v", r)
	}
	if n := len(st.Jobs(0)); n != 1 {
		t.Fatalf("%d jobs after a refused prepare, want 1", n)
	}
}
