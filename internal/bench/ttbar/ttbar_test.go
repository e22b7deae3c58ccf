package ttbar

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/xrdtest"
)

func generate(t *testing.T, dir string, events int, seed uint64) string {
	t.Helper()
	p := filepath.Join(dir, "ttbar-"+strconv.Itoa(events)+"-"+strconv.FormatUint(seed, 10)+".root")
	if err := Generate(p, GenConfig{Events: events, Seed: seed}); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestGenerateIsReproducibleAndPlausible(t *testing.T) {
	dir := t.TempDir()
	a := generate(t, dir, 40, 7)
	b := filepath.Join(dir, "again.root")
	if err := Generate(b, GenConfig{Events: 40, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	c := generate(t, dir, 40, 8)
	run := func(p string) *Timings {
		tm, err := Run(context.Background(), JobConfig{Input: p, HistOut: p + ".hist.root"})
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	ta, tb, tc := run(a), run(b), run(c)
	if ta.Particles != tb.Particles || ta.MeanTTbarMass != tb.MeanTTbarMass {
		t.Errorf("same seed, different events: %d particles, mtt %.3f vs %d, %.3f", ta.Particles, ta.MeanTTbarMass, tb.Particles, tb.MeanTTbarMass)
	}
	if ta.Particles == tc.Particles && ta.MeanTTbarMass == tc.MeanTTbarMass {
		t.Errorf("seeds 7 and 8 gave the same events")
	}
	if ta.Events != 40 || ta.EtaEntries != ta.Particles {
		t.Errorf("events %d, eta entries %d, particles %d", ta.Events, ta.EtaEntries, ta.Particles)
	}
	perEvent := float64(ta.Particles) / 40
	if perEvent < 1300 || perEvent > 1900 {
		t.Errorf("%.0f particles per event, want about 1600", perEvent)
	}
	// ttbar above threshold (2 x 172.5 GeV), peaked in the few hundred GeV.
	if ta.MeanTTbarMass < 350 || ta.MeanTTbarMass > 700 {
		t.Errorf("mean ttbar mass %.1f GeV, want a few hundred above 345", ta.MeanTTbarMass)
	}
	st, err := os.Stat(a)
	if err != nil {
		t.Fatal(err)
	}
	if kb := float64(st.Size()) / 40 / 1e3; kb < 20 || kb > 35 {
		t.Errorf("%.1f kB per event, want about 26", kb)
	}
	part, err := Run(context.Background(), JobConfig{Input: a, Events: 10})
	if err != nil {
		t.Fatal(err)
	}
	if part.Events != 10 || part.Particles >= ta.Particles {
		t.Errorf("10-event job processed %d events, %d particles", part.Events, part.Particles)
	}
}

// TestUprootReadsGeneratedFile checks the files with a ROOT reader that is
// not groot: uproot sees the same events and the analysis's ttbar mass.
func TestUprootReadsGeneratedFile(t *testing.T) {
	py := realclient.Python(t, realclient.VenvPython(), "uproot", "numpy", "awkward")
	dir := t.TempDir()
	p := generate(t, dir, 30, 3)
	hist := filepath.Join(dir, "hist.root")
	tm, err := Run(context.Background(), JobConfig{Input: p, HistOut: hist})
	if err != nil {
		t.Fatal(err)
	}
	script := `
import sys, uproot, numpy as np, awkward as ak
t = uproot.open(sys.argv[1])["events"]
a = t.arrays()
sel = abs(a.status) == 23
pt, eta, phi, m = a.pt[sel], a.eta[sel], a.phi[sel], a.m[sel]
px = ak.sum(pt*np.cos(phi), axis=1); py = ak.sum(pt*np.sin(phi), axis=1)
pz = ak.sum(pt*np.sinh(eta), axis=1); e = ak.sum(np.sqrt((pt*np.cosh(eta))**2 + m**2), axis=1)
mtt = np.sqrt(np.maximum(e**2 - px**2 - py**2 - pz**2, 0))
h = uproot.open(sys.argv[2])
print(t.num_entries, int(ak.sum(a.nParticles)), float(np.mean(mtt)), int(h["eta"].values().sum()), int(h["mtt"].values().sum()))
`
	r := realclient.MustRunPython(t, nil, py, script, p, hist)
	f := strings.Fields(string(r.Stdout))
	if len(f) != 5 {
		t.Fatalf("uproot printed %q", r.Stdout)
	}
	if f[0] != "30" || f[1] != strconv.FormatInt(tm.Particles, 10) {
		t.Errorf("uproot: %s events, %s particles; groot job: 30, %d", f[0], f[1], tm.Particles)
	}
	if m, _ := strconv.ParseFloat(f[2], 64); m < tm.MeanTTbarMass-0.5 || m > tm.MeanTTbarMass+0.5 {
		t.Errorf("uproot mean mtt %s GeV, job %.3f", f[2], tm.MeanTTbarMass)
	}
	if n, _ := strconv.ParseInt(f[3], 10, 64); n > tm.Particles || n < tm.Particles*9/10 {
		t.Errorf("eta histogram holds %s in range of %d entries", f[3], tm.Particles)
	}
	if f[4] == "0" {
		t.Errorf("mtt histogram is empty")
	}
}

// TestJobOverRoot reads the file from a C++ xrootd with the project's
// root:// client, with and without read-ahead, and gets the local result.
func TestJobOverRoot(t *testing.T) {
	data := t.TempDir()
	p := generate(t, data, 60, 5)
	local, err := Run(context.Background(), JobConfig{Input: p})
	if err != nil {
		t.Fatal(err)
	}
	o := xrdtest.StartOrigin(t, data)
	st, _ := os.Stat(p)
	for _, ra := range []int{0, 1 << 20} {
		url := o.URL + "//" + filepath.Base(p)
		tm, err := Run(context.Background(), JobConfig{Input: url, ReadAhead: ra, Events: 60})
		if err != nil {
			t.Fatalf("readahead %d: %v", ra, err)
		}
		if tm.Particles != local.Particles || tm.MeanTTbarMass != local.MeanTTbarMass {
			t.Errorf("readahead %d: remote %d particles mtt %.3f, local %d %.3f", ra, tm.Particles, tm.MeanTTbarMass, local.Particles, local.MeanTTbarMass)
		}
		if tm.BytesRead < st.Size()*9/10 || tm.BytesRead > st.Size()+2<<20 {
			t.Errorf("readahead %d: read %d bytes of a %d-byte file", ra, tm.BytesRead, st.Size())
		}
	}
	if _, err := Run(context.Background(), JobConfig{Input: o.URL + "//missing.root"}); err == nil {
		t.Error("job on a missing remote file succeeded")
	}
}

func TestSplitURL(t *testing.T) {
	for _, c := range []struct{ in, addr, path string }{
		{"root://127.0.0.1:1234//data/f.root", "127.0.0.1:1234", "/data/f.root"},
		{"root://host//f.root?a=b", "host:1094", "/f.root?a=b"},
		{"xroot://h:1/f", "h:1", "/f"},
	} {
		a, p, err := SplitURL(c.in)
		if err != nil || a != c.addr || p != c.path {
			t.Errorf("SplitURL(%q) = %q, %q, %v; want %q, %q", c.in, a, p, err, c.addr, c.path)
		}
	}
	if _, _, err := SplitURL("root:///nohost"); err == nil {
		t.Error("URL without host accepted")
	}
}

// TestUprootJobSamePhysics runs the embedded uproot job on a generated file
// and gets the go-hep job's histograms bin for bin, for all events and for
// the first few.
func TestUprootJobSamePhysics(t *testing.T) {
	py := os.Getenv("HEPCACHE_PYTHON")
	if py == "" {
		py = "/opt/hepvenv/bin/python"
	}
	realclient.Python(t, py, "uproot", "awkward")
	dir := t.TempDir()
	p := generate(t, dir, 60, 3)
	script, err := WriteUprootJob(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int64{60, 7} {
		want, err := Run(context.Background(), JobConfig{Input: p, Events: n})
		if err != nil {
			t.Fatal(err)
		}
		r := realclient.MustRun(t, realclient.Env(), py, script, "ttbar", "--input", p, "--events", strconv.FormatInt(n, 10), "--hist", filepath.Join(dir, "h.root"))
		var got Timings
		if err := json.Unmarshal(r.Stdout, &got); err != nil {
			t.Fatalf("uproot job printed %q: %v", r.Stdout, err)
		}
		if err := SamePhysics(&got, want); err != nil {
			t.Errorf("%d events: uproot against go-hep: %v", n, err)
		}
		if got.Events != n || got.Reads == 0 || got.BytesRead == 0 || !strings.HasPrefix(got.Client, "uproot ") {
			t.Errorf("%d events: uproot job reported %+v", n, got)
		}
	}
}

func TestSamePhysicsFindsADifference(t *testing.T) {
	a := &Timings{Events: 2, Particles: 5, EtaBins: []int64{0, 3, 2, 0}, MttBins: []int64{0, 1, 1, 0}, MeanTTbarMass: 400}
	b := *a
	b.EtaBins = []int64{0, 2, 3, 0}
	if err := SamePhysics(&b, a); err == nil || !strings.Contains(err.Error(), "bin 1") {
		t.Errorf("eta bins differ: %v", err)
	}
	c := *a
	c.MeanTTbarMass = 400.001
	if err := SamePhysics(&c, a); err == nil {
		t.Error("a different mean m_tt passed")
	}
	if err := SamePhysics(a, a); err != nil {
		t.Error(err)
	}
}
