package bench

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/realclient"
)

// hepcacheBin is the binary the smoke tests run as cache and as analysis
// job: $HEPCACHE_BIN (set by `make test`) or one built for this test run.
var hepcacheBin string

func TestMain(m *testing.M) { realclient.HepcacheMain(m, &hepcacheBin) }

// smokeDir is a results directory the server user (nobody) can traverse.
func smokeDir(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end benchmark run; skipped with -short")
	}
	realclient.Require(t, "xrootd")
	realclient.Require(t, "xrdcp")
	d := t.TempDir()
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// checkOutputs asserts the JSON parses and the Markdown and PNG files
// exist and are not empty.
func checkOutputs(t *testing.T, dir, name string, pngs ...string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s.json: %v", name, err)
	}
	md, err := os.ReadFile(filepath.Join(dir, name+".md"))
	if err != nil || len(md) == 0 {
		t.Fatalf("%s.md: %v (%d bytes)", name, err, len(md))
	}
	for _, p := range pngs {
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 8 || string(b[1:4]) != "PNG" {
			t.Errorf("%s is not a PNG", p)
		}
	}
}

func TestWorkflowSmoke(t *testing.T) {
	dir := smokeDir(t)
	res, err := Workflow(context.Background(), WorkflowConfig{
		Dir: dir, FileEvents: 30, Events: []int64{1, 30}, Repeat: 1, Jobs: []string{jobGoHEP},
		Sites:       []Site{{"near", 0}, {"far", 5 * time.Millisecond}},
		HepcacheBin: hepcacheBin, Out: io.Discard, Progress: io.Discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	checkOutputs(t, dir, "workflow", "workflow-fig4.png", "workflow-fig5-hepcache.png", "workflow-fig5-xcache.png", "workflow-cpueff.png")
	// local 2 + per site: direct 2 stream + 2 copy, per cache 2 cold
	// stream + 2 cold copy; per cache 2 hot stream + 2 hot copy.
	if want := 2 + 2*4 + 2*2*4 + 2*4; len(res.Runs) != want {
		t.Errorf("%d runs, want %d", len(res.Runs), want)
	}
	for _, r := range res.Runs {
		if r.Result.Events != r.Events {
			t.Errorf("%s %s %s: job processed %d events, asked %d", r.Config, r.Site, r.Mode, r.Result.Events, r.Events)
		}
		if r.Seconds <= 0 || r.CPUEfficiency <= 0 || r.CPUEfficiency > 1.5 {
			t.Errorf("%s %s %s: %.3f s, CPU efficiency %.2f", r.Config, r.Site, r.Mode, r.Seconds, r.CPUEfficiency)
		}
		if r.Mode == modeCopy && r.InputSeconds <= 0 {
			t.Errorf("%s %s copy2scratch without a download time", r.Config, r.Site)
		}
	}
	// Every configuration computed the same physics.
	mtt := res.Runs[0].Result.MeanTTbarMass
	for _, r := range res.Runs {
		if r.Events == res.Runs[0].Events && r.Result.MeanTTbarMass != mtt {
			t.Errorf("%s %s %s: mean m_tt %.3f, local %.3f", r.Config, r.Site, r.Mode, r.Result.MeanTTbarMass, mtt)
		}
	}
	if len(res.Sites) != 2 || res.Sites[1].MeasuredMS < 4 {
		t.Errorf("sites %+v: the far site's RTT was not measured through the link", res.Sites)
	}
}

func TestResourcesSmoke(t *testing.T) {
	dir := smokeDir(t)
	res, err := Resources(context.Background(), ResourcesConfig{
		Dir: dir, Clients: []int{2, 4}, FileSize: 2 << 20, Rate: 8e6, Interval: 20 * time.Millisecond,
		HepcacheBin: hepcacheBin, Out: io.Discard, Progress: io.Discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	checkOutputs(t, dir, "resources", "resources-memory.png", "resources-cpu.png")
	for _, k := range []string{"hepcache", "xcache"} {
		pts := res.Points[k]
		if len(pts) != 2 {
			t.Fatalf("%s: %d points", k, len(pts))
		}
		for _, p := range pts {
			if p.Failed > 0 || p.MemGB.Mean <= 0 || p.PeakGB < p.MemGB.Mean {
				t.Errorf("%s N=%d: %+v", k, p.Clients, p)
			}
		}
	}
}

func TestScaleSmoke(t *testing.T) {
	dir := smokeDir(t)
	res, err := Scale(context.Background(), ScaleConfig{
		Dir: dir, Scale: 500, Rates: []float64{1e6}, Duration: 1500 * time.Millisecond, Interval: 500 * time.Millisecond,
		TotalClients: []int{2, 4}, Files: 2, FileSize: 2 << 20,
		HepcacheBin: hepcacheBin, Out: io.Discard, Progress: io.Discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	checkOutputs(t, dir, "scale", "scale-fixed-concurrency.png", "scale-fixed-total.png")
	for _, k := range []string{"hepcache", "xcache"} {
		if len(res.Points[k]) != 3 {
			t.Fatalf("%s: %d points", k, len(res.Points[k]))
		}
		for _, p := range res.Points[k] {
			if p.Failed > 0 || p.Fraction <= 0 || p.Fraction > 1 {
				t.Errorf("%s %s %d clients: %+v", k, p.Test, p.Clients, p)
			}
		}
	}
}

func TestLayoutsSmoke(t *testing.T) {
	dir := smokeDir(t)
	res, err := Layouts(context.Background(), LayoutsConfig{
		Dir: dir, Files: 1, FileEvents: 20, K: 3, Nodes: 2, RTT: 2 * time.Millisecond,
		HepcacheBin: hepcacheBin, Out: io.Discard, Progress: io.Discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	checkOutputs(t, dir, "layouts", "layouts-t1.png", "layouts-wall.png")
	// none + (dedicated, local) x 2 caches, K reads each.
	if len(res.Reads) != 5*3 || len(res.Summaries) != 5 {
		t.Fatalf("%d reads, %d summaries", len(res.Reads), len(res.Summaries))
	}
	for _, s := range res.Summaries {
		switch {
		case s.Layout == "dedicated" && s.HitRate < 0.6:
			t.Errorf("dedicated %s: hit rate %.2f, want 2 of 3", s.Cache, s.HitRate)
		case s.Layout == "none" && s.HitRate != 0:
			t.Errorf("no cache with hits")
		}
	}
}

func TestParseSites(t *testing.T) {
	s, err := ParseSites("KIT=2.8ms, TRIUMF=157.15ms")
	if err != nil || len(s) != 2 || s[1].Name != "TRIUMF" || s[1].RTT != 157150*time.Microsecond {
		t.Fatalf("%+v %v", s, err)
	}
	for _, bad := range []string{"", "KIT", "KIT=fast", "KIT=-1ms"} {
		if _, err := ParseSites(bad); err == nil {
			t.Errorf("ParseSites(%q) accepted", bad)
		}
	}
}

func TestFitAndStats(t *testing.T) {
	a, b := fitLine([]float64{25, 50, 75, 100, 128}, []float64{0.93, 1.21, 1.43, 1.65, 1.99})
	// The paper's Table 4 means give its f(N) = 0.67 + 0.01 N.
	if a < 0.6 || a > 0.72 || b < 0.0095 || b > 0.0105 {
		t.Errorf("fit of Table 4: %.3f + %.5f N", a, b)
	}
	s := meanSD([]float64{1, 2, 3})
	if s.Mean != 2 || s.SD != 1 || s.N != 3 {
		t.Errorf("meanSD = %+v", s)
	}
	if got := fmtStat(meanSD(nil)); !strings.Contains(got, "–") {
		t.Errorf("empty stat printed %q", got)
	}
}
