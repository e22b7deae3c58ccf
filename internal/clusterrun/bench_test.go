package clusterrun

import (
	"bytes"
	"context"
	"testing"

	"github.com/hepcache/hepcache/internal/xrdtest"
)

// TestBenchRuns keeps Bench working on a small data set. It asserts what
// Bench reports, never how fast.
func TestBenchRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("starts several clusters")
	}
	xrdtest.RequireTool(t, "xrootd")
	xrdtest.RequireTool(t, "xrdcp")
	var log bytes.Buffer
	rep, err := Bench(context.Background(), BenchConfig{Bin: hepcacheBin, Dir: t.TempDir(), Nodes: []int{1, 2}, Files: 4, FileSize: 1 << 20, Clients: 2, Rounds: 1, Log: &log})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	var out bytes.Buffer
	rep.Print(&out)
	t.Log("\n" + out.String())
	if len(rep.Hot) != 2 || rep.Hot[0].Ratio != 1 || rep.Hot[1].Throughput <= 0 || rep.Converge <= 0 || rep.Leave <= 0 {
		t.Fatalf("incomplete report %+v", rep)
	}
	for _, m := range rep.Moved {
		if m.RatioToIdeal < 0.9 || m.RatioToIdeal > 1.1 || m.ModuloRatioToIdeal < 2 {
			t.Errorf("files moved from %d nodes: %.3f of ideal (modulo %.3f)", m.From, m.RatioToIdeal, m.ModuloRatioToIdeal)
		}
	}
}
