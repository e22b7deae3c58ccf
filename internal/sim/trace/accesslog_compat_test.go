package trace

import (
	"bytes"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/accesslog"
	"github.com/hepcache/hepcache/internal/cache"
)

// TestReadServerAccessLog reads lines written by the server's own access-log
// writer (internal/accesslog), the stable interface between them.
func TestReadServerAccessLog(t *testing.T) {
	var buf bytes.Buffer
	l := accesslog.New(&buf)
	t0 := time.Date(2026, 11, 21, 23, 59, 1, 123456000, time.UTC)
	recs := []cache.AccessRecord{
		{Time: t0, OpenTime: t0.Add(-2 * time.Second), Path: "/store/mc/a.root", Origin: "root://origin.example:1094",
			Size: 2 << 30, BytesRead: 100 << 20, BytesHit: 50 << 20, BytesMissed: 50 << 20, Client: "10.0.0.7:53412", User: "cms", Protocol: "root", Status: "ok"},
		{Time: t0.Add(time.Second), OpenTime: t0, Path: `/store/"quoted" é.root`, Origin: "https://web.example",
			Size: 10, BytesRead: 0, Protocol: "https", Status: "ok"},
		{Time: t0.Add(2 * time.Second), OpenTime: t0, Path: "/store/mc/a.root", Origin: "root://origin.example:1094",
			Size: 2 << 30, BytesRead: 2 << 30, BytesHit: 2 << 30, Protocol: "roots", Status: "origin timeout"},
	}
	for _, r := range recs {
		l.Record(r)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	tr, err := Read(&buf, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Info.Format != FormatHepcache || tr.Len() != 3 || tr.NumFiles() != 2 || tr.Info.Bad != 0 {
		t.Fatalf("info %+v, %d accesses of %d files", tr.Info, tr.Len(), tr.NumFiles())
	}
	wantBytes := []int64{100 << 20, 10, 2 << 30} // bytes_read 0 counts as the whole file
	for i, r := range recs {
		if got, want := tr.Name[tr.File[i]], r.Origin+"/"+r.Path; got != want {
			t.Errorf("access %d: key %q, want %q", i, got, want)
		}
		if tr.Time[i] != r.Time.UnixNano() || tr.Bytes[i] != wantBytes[i] || tr.Size[tr.File[i]] != r.Size {
			t.Errorf("access %d: time %d bytes %d size %d", i, tr.Time[i], tr.Bytes[i], tr.Size[tr.File[i]])
		}
	}
}
