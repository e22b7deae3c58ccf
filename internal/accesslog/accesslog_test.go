package accesslog

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/cache"
)

func TestLinesAreTheDocumentedFormat(t *testing.T) {
	p := filepath.Join(t.TempDir(), "access.log")
	l, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	for i := 0; i < 3; i++ {
		l.Record(cache.AccessRecord{Time: now, OpenTime: now.Add(-time.Second), Path: "/store/f", Origin: "root://o:1094",
			Size: 100, BytesRead: 60, BytesHit: 10, BytesMissed: 50, DurationS: 1, Client: "127.0.0.1:1", Protocol: "root", Status: "ok"})
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(p)
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %d not JSON: %v", n, err)
		}
		for _, k := range []string{"time", "open_time", "path", "origin", "size", "bytes_read", "bytes_hit", "bytes_missed", "bytes_bypassed", "duration_s", "client", "user", "protocol", "status"} {
			if _, ok := m[k]; !ok {
				t.Fatalf("line %d lacks documented field %q", n, k)
			}
		}
		if m["time"] != "2026-11-21T10:00:00Z" || m["bytes_missed"].(float64) != 50 {
			t.Fatalf("line %d wrong values: %v", n, m)
		}
	}
	if n != 3 {
		t.Fatalf("%d lines, want 3", n)
	}
}
