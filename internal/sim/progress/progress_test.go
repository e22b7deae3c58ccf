package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestLine(t *testing.T) {
	got := Line("replay", "", 1_550_000, 3_100_000, 2*time.Second)
	if !strings.Contains(got, "50%") || !strings.Contains(got, "1.6M/3.1M") || !strings.Contains(got, "###############...............") {
		t.Errorf("Line = %q", got)
	}
	if got := Line("read", "B", 10, 0, 0); !strings.Contains(got, "0%") {
		t.Errorf("zero total: %q", got)
	}
}

func TestBarDone(t *testing.T) {
	var buf bytes.Buffer
	b := New(&buf, "x", "", 10)
	b.Set(10)
	b.Done()
	b.Done()
	if out := buf.String(); !strings.HasSuffix(out, "\n") || !strings.Contains(out, "100%") {
		t.Errorf("output %q", out)
	}
	var nilBar *Bar
	nilBar.Set(1)
	nilBar.Done()
}
