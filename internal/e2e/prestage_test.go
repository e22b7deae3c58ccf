package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/internal/realclient"
)

// complete reports whether the cache directory holds p whole.
func complete(dir, p string) bool {
	infos, err := cache.Inspect(dir, "", p)
	return err == nil && len(infos) == 1 && infos[0].Complete()
}

// pyPrepare stages argv[1:] with the Python bindings' FileSystem.prepare
// and prints the request id.
const pyPrepare = `
import sys
from XRootD import client
from XRootD.client.flags import PrepareFlags
url, paths = sys.argv[1], sys.argv[2:]
# 5.5's binding reads the list items as bytes (a str crashes it).
st, resp = client.FileSystem(url).prepare([p.encode() for p in paths], PrepareFlags.STAGE)
if not st.ok:
    sys.exit(st.message)
print(resp.decode() if isinstance(resp, bytes) else resp)
`

// TestPrestage: files named by xrdfs prepare -s, the Python bindings'
// prepare, `hepcache prestage` and the HTTP form (and API) are fetched
// whole before anyone reads them; the reads that follow are hits (the
// origin sends nothing more); a cross-site form post is refused; the
// progress shows in query prepare, the CLI, /metrics and the dashboard.
func TestPrestage(t *testing.T) {
	data := t.TempDir()
	sums := map[string][32]byte{}
	for i, name := range []string{"xrdfs.root", "python.root", "cli1.root", "cli2.root", "http.root", "form.root"} {
		sums["/store/pre/"+name] = writeFile(t, data, "store/pre/"+name, 2*mib+i*1000+7, uint64(40+i))
	}
	s := startStack(t, data, withHTTP)
	dir := s.cfg.Cache.Dir
	env := realclient.Env()
	waitComplete := func(paths ...string) {
		t.Helper()
		for _, p := range paths {
			eventually.True(t, func() bool { return complete(dir, p) }, "%s staged complete", p)
		}
	}

	// root://: xrdfs prepare -s prints the request id; query prepare reports.
	r := realclient.MustRun(t, env, "xrdfs", s.url, "prepare", "-s", "/store/pre/xrdfs.root")
	id := strings.TrimSpace(string(r.Stdout))
	waitComplete("/store/pre/xrdfs.root")
	eventually.True(t, func() bool {
		r := realclient.Run(t, env, "xrdfs", s.url, "query", "prepare", id, "/store/pre/xrdfs.root")
		return r.Err == nil && strings.Contains(string(r.Stdout), "1 files, 1 done")
	}, "query prepare %s reports the file done", id)

	py := realclient.Python(t, realclient.DebianPython, "XRootD.client")
	r = realclient.MustRunPython(t, env, py, pyPrepare, s.url, "/store/pre/python.root")
	if !strings.HasPrefix(strings.TrimSpace(string(r.Stdout)), "hepcache-") {
		t.Fatalf("python prepare printed %q", r.Stdout)
	}
	waitComplete("/store/pre/python.root")

	// The CLI through the admin socket of the running server.
	list := filepath.Join(t.TempDir(), "list")
	os.WriteFile(list, []byte("# inputs of job 17\n/store/pre/cli1.root\n"+s.cfg.Origin.Default+"//store/pre/cli2.root\n"), 0o644)
	out, err := exec.Command(hepcacheBin, "prestage", "--cache-dir", dir, "--wait", list).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "2 files, 2 done") {
		t.Fatalf("hepcache prestage --wait: %v\n%s", err, out)
	}
	waitComplete("/store/pre/cli1.root", "/store/pre/cli2.root")
	out, err = exec.Command(hepcacheBin, "prestage", "--cache-dir", dir, "--status").CombinedOutput()
	if err != nil || strings.Count(string(out), "hepcache-") != 3 {
		t.Fatalf("hepcache prestage --status lists %v:\n%s", err, out)
	}
	bad := filepath.Join(t.TempDir(), "bad")
	os.WriteFile(bad, []byte("/store/pre/a\nrelative/path\n"), 0o644)
	if out, err := exec.Command(hepcacheBin, "prestage", "--cache-dir", dir, bad).CombinedOutput(); err == nil || !strings.Contains(string(out), "line 2") {
		t.Fatalf("a bad list: %v\n%s", err, out)
	}

	// HTTP: a text body, then the form; a cross-site post is refused.
	r = realclient.MustRun(t, env, "curl", "-sS", "--fail", "--data-binary", "/store/pre/http.root\n", s.httpURL()+"/prestage")
	hid := strings.TrimSpace(string(r.Stdout))
	waitComplete("/store/pre/http.root")
	eventually.True(t, func() bool {
		r := realclient.Run(t, env, "curl", "-sS", "--fail", s.httpURL()+"/prestage?id="+hid)
		return r.Err == nil && strings.Contains(string(r.Stdout), "done")
	}, "GET /prestage?id= reports the job done")
	r = realclient.Run(t, env, "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Sec-Fetch-Site: cross-site",
		"--data-urlencode", "files=/store/pre/form.root", s.httpURL()+"/prestage")
	if code := strings.TrimSpace(string(r.Stdout)); code != "403" {
		t.Fatalf("cross-site form post answered %s", code)
	}
	if complete(dir, "/store/pre/form.root") {
		t.Fatal("a refused cross-site post staged its file")
	}
	if r := realclient.MustRun(t, env, "curl", "-sS", "--fail", s.httpURL()+"/prestage"); !strings.Contains(string(r.Stdout), "<form") {
		t.Fatalf("GET /prestage is not the form:\n%s", r.Stdout)
	}
	realclient.MustRun(t, env, "curl", "-sS", "--fail", "--data-urlencode", "files=/store/pre/form.root", s.httpURL()+"/prestage")
	waitComplete("/store/pre/form.root")

	// Every staged file is now a hit: the origin sends nothing more.
	before := s.originBytes()
	for p, want := range sums {
		if got := xrdcpSum(t, env, s.url+"/"+p); got != want {
			t.Fatalf("%s after prestage: sha256 %s", p, hex(got))
		}
	}
	if after := s.originBytes(); after != before {
		t.Fatalf("reads after prestage made the origin send %d bytes", after-before)
	}

	m := s.scrape(t)
	if v := m["hepcache_prestage_done_files_total"]; v != 6 {
		t.Fatalf("hepcache_prestage_done_files_total = %v, want 6", v)
	}
	r = realclient.MustRun(t, env, "curl", "-sS", "--fail", s.httpURL()+"/api/stats")
	var st struct {
		Prestage struct {
			Done int64 `json:"done"`
			Jobs []struct {
				ID    string `json:"id"`
				Files int    `json:"files"`
				Done  int    `json:"done"`
			} `json:"jobs"`
		} `json:"prestage"`
	}
	if err := json.Unmarshal(r.Stdout, &st); err != nil {
		t.Fatal(err)
	}
	if st.Prestage.Done != 6 || len(st.Prestage.Jobs) != 5 || st.Prestage.Jobs[len(st.Prestage.Jobs)-1].ID != id {
		t.Fatalf("dashboard prestage panel data: %+v", st.Prestage)
	}
}
