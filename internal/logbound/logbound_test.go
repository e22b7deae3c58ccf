package logbound

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestCutsLongValues(t *testing.T) {
	var buf bytes.Buffer
	h := New(slog.NewTextHandler(&buf, nil), Config{MaxValue: 64})
	log := slog.New(h).With("conn", strings.Repeat("c", 100))
	long := strings.Repeat("p", 4096)
	log.Warn("request failed", "path", long, "err", errors.New("open "+long+": not found"), slog.Group("g", "x", long))
	line := buf.String()
	if len(line) > 600 || strings.Count(line, "bytes)") != 4 {
		t.Fatalf("line of %d bytes: %s", len(line), line)
	}
}

func TestRateWithSuppressedCount(t *testing.T) {
	var buf bytes.Buffer
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	h := New(slog.NewTextHandler(&buf, nil), Config{Burst: 3, Rate: 1, now: clk.now})
	log := slog.New(h)
	for range 100 {
		log.Warn("flood", "i", 1)
	}
	log.Info("other message") // its own bucket
	if n := strings.Count(buf.String(), "msg=flood"); n != 3 {
		t.Fatalf("%d flood lines at once, want the burst of 3", n)
	}
	if h.Stats().Suppressed.Load() != 97 {
		t.Fatalf("suppressed %d, want 97", h.Stats().Suppressed.Load())
	}
	clk.t = clk.t.Add(time.Second)
	log.Warn("flood", "i", 2)
	if !strings.Contains(buf.String(), "suppressed=97") || !strings.Contains(buf.String(), "other message") {
		t.Fatalf("after a second: %s", buf.String())
	}
}
