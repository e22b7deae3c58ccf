package bench

import (
	"testing"
)

// TestWorkflowChartsWithoutStreamRuns: a copy2scratch-only run has nothing
// for the stream figures, which are left out (an empty log axis used to
// loop forever, allocating, in report.logTicks).
func TestWorkflowChartsWithoutStreamRuns(t *testing.T) {
	r := &WorkflowResult{Events: []int64{1}, Caches: []string{"hepcache"}, Modes: []string{modeCopy}, Jobs: []string{jobGoHEP},
		Sites: []*SiteLink{{Name: "far", MeasuredMS: 157}}}
	r.Runs = []WorkflowRun{
		{Job: jobGoHEP, Config: "local", Mode: modeStream, Events: 1, Seconds: 1, CPUEfficiency: 0.9, Result: &jobResult{}},
		{Job: jobGoHEP, Config: "direct", Site: "far", Mode: modeCopy, Events: 1, Seconds: 2, CPUEfficiency: 0.5, Result: &jobResult{}},
	}
	r.summarise(r.Sites)
	if len(r.markdown()) == 0 {
		t.Fatal("no report")
	}
	for name, c := range r.charts() {
		if _, err := c.PNG(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
