package metrics

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestGrafanaDashboardNamesRealMetrics: every metric the packaged Grafana
// dashboard queries is one hepcache documents (docs/metrics.md), so the
// dashboard does not silently show nothing after a rename.
func TestGrafanaDashboardNamesRealMetrics(t *testing.T) {
	b, err := os.ReadFile("../../packaging/grafana/hepcache.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	names := regexp.MustCompile(`\b(hepcache|process)_[a-z_]+`)
	n := 0
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			for _, m := range names.FindAllString(tg.Expr, -1) {
				m = strings.TrimSuffix(m, "_bucket")
				n++
				if !strings.Contains(string(doc), "`"+m+"`") {
					t.Errorf("panel %q queries %s, which docs/metrics.md does not list", p.Title, m)
				}
			}
		}
	}
	if n < 10 {
		t.Fatalf("only %d metric references in the dashboard", n)
	}
}
