package report

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/sim/gen"
	"github.com/hepcache/hepcache/internal/sim/policy"
	"github.com/hepcache/hepcache/internal/sim/replay"
	"github.com/hepcache/hepcache/internal/sim/sweep"
	"github.com/hepcache/hepcache/internal/sim/trace"
)

func testSweep(t *testing.T) Sweep {
	t.Helper()
	tr, err := gen.Generate(gen.Config{Seed: 2, Accesses: 20000, Days: 10})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sweep.Run(context.Background(), []*trace.Trace{tr}, sweep.Config{Policies: []string{"xcache", "s3fifo"}})
	if err != nil {
		t.Fatal(err)
	}
	return Sweep{Result: res, Trace: Summarize("test", tr)}
}

// externalRef matches anything an HTML page could fetch from elsewhere.
var externalRef = regexp.MustCompile(`(?i)(src|href)\s*=\s*"(https?:|//)|@import|url\(`)

func TestWriteSweepDir(t *testing.T) {
	s := testSweep(t)
	dir := t.TempDir()
	if err := WriteSweepDir(dir, s); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if m := externalRef.Find(page); m != nil {
		t.Errorf("index.html references an external asset: %q", m)
	}
	if n := strings.Count(string(page), `src="data:image/png;base64,`); n != 6 {
		t.Errorf("index.html embeds %d PNG plots, want 6", n)
	}
	for _, name := range []string{"hitrate.png", "bytehitrate.png", "outin.png", "recommended-occupancy.png", "recommended-cumulative.png", "recommended-throughput.png"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil || img.Bounds().Dx() != 900 {
			t.Errorf("%s: %v %v", name, err, img.Bounds())
		}
	}
	var back struct {
		Rows           []json.RawMessage `json:"rows"`
		Recommendation struct {
			XCacheCapacity int64 `json:"xcache_capacity"`
		} `json:"recommendation"`
	}
	b, _ := os.ReadFile(filepath.Join(dir, "sweep.json"))
	if err := json.Unmarshal(b, &back); err != nil || len(back.Rows) != len(s.Rows) || back.Recommendation.XCacheCapacity != s.Recommendation.XCacheCapacity {
		t.Errorf("sweep.json: %v, %d rows", err, len(back.Rows))
	}
}

func TestSweepText(t *testing.T) {
	s := testSweep(t)
	var buf bytes.Buffer
	if err := WriteSweepText(&buf, s); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"capacity", "LRU hit", "XCache band", "xcache", "s3fifo", "infinite cache:", "recommendation:", "knee of the curve:"} {
		if !strings.Contains(out, want) {
			t.Errorf("sweep text lacks %q:\n%s", want, out)
		}
	}
}

func TestRunTextAndJSON(t *testing.T) {
	tr, _ := gen.Generate(gen.Config{Seed: 3, Accesses: 5000, Days: 5})
	res, err := replay.Run(context.Background(), tr, replay.Config{Policy: policy.Config{Name: "xcache", Capacity: 5e12}})
	if err != nil {
		t.Fatal(err)
	}
	r := Run{Result: res, Trace: Summarize("t.csv", tr)}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	// The fields the issue promises to scripts, at the top level.
	for _, k := range []string{"requests", "hits", "hit_rate", "byte_hit_rate", "bytes_in", "bytes_out", "out_in_ratio", "nic_gbps", "trace"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	if m["requests"].(float64) != 5000 {
		t.Errorf("requests = %v", m["requests"])
	}
	buf.Reset()
	if err := WriteRunText(&buf, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"hit rate", "out/in", "WAN saved", "created", "NIC", "cumulative hit rate"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("run text lacks %q", want)
		}
	}
	dir := t.TempDir()
	if err := WriteRunDir(dir, r); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "occupancy.png")); err != nil {
		t.Error(err)
	}
}

func TestTicks(t *testing.T) {
	if got := niceTicks(0, 1, 5); len(got) != 6 || got[5] != 1 {
		t.Errorf("niceTicks(0,1) = %v", got)
	}
	if got := logTicks(5e9, 3.1e15); got[0] != 5e9 || got[len(got)-1] != 2e15 {
		t.Errorf("logTicks = %v", got)
	}
}
