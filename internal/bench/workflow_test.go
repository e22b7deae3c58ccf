package bench

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/bench/ttbar"
	"github.com/hepcache/hepcache/internal/realclient"
)

// uprootPython returns the interpreter of the uproot jobs, failing in CI
// and skipping elsewhere when it lacks uproot or fsspec-xrootd.
func uprootPython(t *testing.T) string {
	t.Helper()
	return realclient.Python(t, DefaultPython(), "uproot", "awkward", "fsspec_xrootd", "XRootD.client")
}

// goHEPReference runs the go-hep job in this process on the workflow's
// generated file: the physics every run must reproduce.
func goHEPReference(t *testing.T, dir string, fileEvents int, events int64) *ttbar.Timings {
	t.Helper()
	local := filepath.Join(dir, "origin", "ttbar", "ttbar-"+strconv.Itoa(fileEvents)+"-s1.root")
	ref, err := ttbar.Run(context.Background(), ttbar.JobConfig{Input: local, Events: events})
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// TestWorkflowUproot is `bench workflow --job uproot` on a small file (1000
// events, two sites) with XCache and hepcache, stream and copy2scratch,
// cold and hot: every run of the uproot job, direct and through each
// cache, filled the go-hep job's histograms on the same file bin for bin,
// and each server's f-stream reported the job's requests.
func TestWorkflowUproot(t *testing.T) {
	dir := smokeDir(t)
	py := uprootPython(t)
	const fileEvents = 1000
	res, err := Workflow(context.Background(), WorkflowConfig{
		Dir: dir, FileEvents: fileEvents, Events: []int64{fileEvents}, Repeat: 1,
		Sites: []Site{{"near", 0}, {"far", 5 * time.Millisecond}}, Jobs: []string{jobUproot}, Python: py,
		HepcacheBin: hepcacheBin, Out: io.Discard, Progress: io.Discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	checkOutputs(t, dir, "workflow", "workflow-fig4.png", "workflow-fig5-hepcache.png", "workflow-fig5-xcache.png", "workflow-cpueff.png")
	ref := goHEPReference(t, dir, fileEvents, fileEvents)
	if ref.Events != fileEvents || ref.Particles == 0 {
		t.Fatalf("go-hep reference: %+v", ref)
	}
	seen := map[string]bool{}
	for _, r := range res.Runs {
		name := r.Config + " " + r.Site + " " + r.Mode
		seen[r.Config+" "+r.Mode] = true
		if r.Job != jobUproot || !strings.HasPrefix(r.Result.Client, "uproot ") {
			t.Errorf("%s: job %s, client %q", name, r.Job, r.Result.Client)
		}
		if err := ttbar.SamePhysics(&r.Result.Timings, ref); err != nil {
			t.Errorf("%s: uproot against go-hep on the same file: %v", name, err)
		}
		if r.Mode == modeStream && r.Config != "local" {
			// The whole file's baskets, as the server counted them.
			if r.Server == nil || r.Server.Requests() == 0 || r.Server.Bytes < res.FileBytes*9/10 {
				t.Errorf("%s: server saw %+v of a %d-byte file", name, r.Server, res.FileBytes)
			}
		}
	}
	for _, want := range []string{"local stream", "direct stream", "direct copy2scratch",
		"hepcache-cold stream", "hepcache-cold copy2scratch", "hepcache-hot stream", "hepcache-hot copy2scratch",
		"xcache-cold stream", "xcache-cold copy2scratch", "xcache-hot stream", "xcache-hot copy2scratch"} {
		if !seen[want] {
			t.Errorf("no %s run", want)
		}
	}
	// local 1 + per site direct 1 stream + 1 copy, per cache per site 1
	// cold stream + 1 cold copy; per cache 1 hot stream + 1 hot copy.
	if want := 1 + 2*2 + 2*2*2 + 2*2; len(res.Runs) != want || res.PhysicsChecked != want {
		t.Errorf("%d runs, %d checked, want %d", len(res.Runs), res.PhysicsChecked, want)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "workflow.md"))
	for _, want := range []string{"What the server saw", "equal bin for bin", "XrdCl"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("workflow.md lacks %q", want)
		}
	}
}

// TestWorkflowXrdclProxy is seed 000's client set-up: the uproot job names
// the site, XrdCl's proxy plugin (Debian's, with Debian's XrdCl 5.5.3)
// sends it to the cache in forwarding mode. The cache's f-stream must show
// the job's requests (else the plugin was not loaded and the job read
// directly), and the histograms must be the go-hep job's.
func TestWorkflowXrdclProxy(t *testing.T) {
	dir := smokeDir(t)
	py := uprootPython(t)
	realclient.RequireFile(t, debianProxyPlugin)
	realclient.RequireFile(t, filepath.Join(debianDistPackages, "XRootD"))
	const fileEvents = 200
	res, err := Workflow(context.Background(), WorkflowConfig{
		Dir: dir, FileEvents: fileEvents, Events: []int64{fileEvents}, Repeat: 1, Modes: []string{modeStream},
		Sites: []Site{{"far", 5 * time.Millisecond}}, Jobs: []string{jobProxy}, Python: py,
		HepcacheBin: hepcacheBin, Out: io.Discard, Progress: io.Discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Clients[jobProxy]; !strings.Contains(c, "XrdCl 5.5.3") || !strings.Contains(c, debianProxyPlugin) {
		t.Errorf("proxy job's client: %q", c)
	}
	ref := goHEPReference(t, dir, fileEvents, fileEvents)
	var caches []string
	for _, r := range res.Runs {
		if err := ttbar.SamePhysics(&r.Result.Timings, ref); err != nil {
			t.Errorf("%s: %v", r.Config, err)
		}
		if r.Config != "local" && r.Config != "direct" {
			caches = append(caches, r.Config)
			if r.Server == nil || r.Server.Bytes < res.FileBytes*9/10 {
				t.Errorf("%s: the cache saw %+v of a %d-byte file", r.Config, r.Server, res.FileBytes)
			}
		}
	}
	slices.Sort(caches)
	if !slices.Equal(caches, []string{"hepcache-cold", "hepcache-hot", "xcache-cold", "xcache-hot"}) {
		t.Errorf("cache runs %v", caches)
	}
}

// TestWorkflowInputs is the real-file run on a few of go-hep's test files
// (written by C++ ROOT): every file read by the uproot job directly and
// through each cache equals its local read.
func TestWorkflowInputs(t *testing.T) {
	dir := smokeDir(t)
	py := uprootPython(t)
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "go-hep.org/x/hep").Output()
	if err != nil {
		t.Fatalf("go-hep's module directory: %v", err)
	}
	testdata := realclient.RequireFile(t, filepath.Join(strings.TrimSpace(string(out)), "groot", "testdata"))
	inputs := t.TempDir()
	files := []string{"small-flat-tree.root", "ndim-slice.root", "std-containers-split00.root", "g4-merge.root",
		"uproot/sample-6.14.00-lz4.root", "uproot/sample-6.14.00-lzma.root", "tdatime.root", "graphs.root"}
	for _, f := range files {
		if _, err := copyFile(filepath.Join(testdata, f), filepath.Join(inputs, f)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := WorkflowInputs(context.Background(), WorkflowConfig{
		Dir: dir, Inputs: inputs, Sites: []Site{{"far", 5 * time.Millisecond}}, Python: py,
		HepcacheBin: hepcacheBin, Out: io.Discard, Progress: io.Discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	checkOutputs(t, dir, "workflow-inputs")
	var configs []string
	for _, r := range res.Reads {
		configs = append(configs, r.Config)
	}
	if want := []string{"local", "local again", "direct", "hepcache-cold", "hepcache-hot", "xcache-cold", "xcache-hot"}; !slices.Equal(configs, want) {
		t.Fatalf("reads %v, want %v", configs, want)
	}
	if len(res.Files) != len(files) || len(res.Mismatches) != 0 {
		t.Fatalf("files %v, mismatches %v", res.Files, res.Mismatches)
	}
	for i, f := range res.Reads[0].Files {
		if f.Error != "" || len(f.Keys) == 0 {
			t.Errorf("%s: local read %+v", res.Files[i], f)
		}
	}
}
