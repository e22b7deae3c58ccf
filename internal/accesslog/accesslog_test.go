package accesslog

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/eventually"
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

// TestReopenAfterRotation: after the file is moved away (logrotate) and
// Reopen is called (SIGHUP), new records go to a new file at the path and
// the moved file keeps what was written before. A path that cannot be
// reopened keeps the old file in use.
func TestReopenAfterRotation(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "access.log")
	l, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	rec := func(path string) {
		l.Record(cache.AccessRecord{Time: time.Unix(0, 0).UTC(), Path: path, Status: "ok"})
	}
	lines := func(name string) []string {
		t.Helper()
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var paths []string
		for _, ln := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var m struct{ Path string }
			if err := json.Unmarshal([]byte(ln), &m); err != nil {
				t.Fatalf("%s: %q: %v", name, ln, err)
			}
			paths = append(paths, m.Path)
		}
		return paths
	}
	rec("/before")
	eventually.True(t, func() bool { return l.Written.Load() == 1 }, "first record written")
	if err := os.Rename(p, p+".1"); err != nil {
		t.Fatal(err)
	}
	if err := l.Reopen(); err != nil {
		t.Fatal(err)
	}
	rec("/after")
	eventually.True(t, func() bool { return l.Written.Load() == 2 }, "second record written")

	// The directory is gone: Reopen fails and the log keeps its file.
	if err := os.Rename(dir, dir+".moved"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir + ".moved") })
	if err := l.Reopen(); err == nil {
		t.Fatal("Reopen of a path in a missing directory succeeded")
	}
	rec("/kept")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	moved := filepath.Join(dir+".moved", "access.log")
	if got := lines(moved + ".1"); len(got) != 1 || got[0] != "/before" {
		t.Errorf("rotated file holds %v, want [/before]", got)
	}
	if got := lines(moved); len(got) != 2 || got[0] != "/after" || got[1] != "/kept" {
		t.Errorf("new file holds %v, want [/after /kept]", got)
	}
}
