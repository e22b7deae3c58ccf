package report

import "testing"

// TestLogTicksWithoutRange: a log axis of an empty chart (low end 0 or
// less) has no ticks; it used to loop forever, allocating, from
// log10(0) = -Inf (a workflow bench run was OOM-killed at 23 GB).
func TestLogTicksWithoutRange(t *testing.T) {
	for _, r := range [][2]float64{{0, 10}, {-1, 10}, {0, 0}, {5, 1}} {
		if got := logTicks(r[0], r[1]); got != nil {
			t.Errorf("logTicks(%v, %v) = %v, want none", r[0], r[1], got)
		}
	}
	if got := logTicks(1, 100); len(got) == 0 {
		t.Fatal("no ticks for 1..100")
	}
}
