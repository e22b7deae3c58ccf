package bench

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/s3test"
)

// TestWANS3Smoke runs bench wan's S3 rows once, small: the bucket read
// directly and through hepcache in both modes, cold and hot.
func TestWANS3Smoke(t *testing.T) {
	dir := smokeDir(t)
	s3test.Start(t, "") // fails in CI, skips elsewhere, when versitygw is missing
	rows, err := WAN(context.Background(), WANConfig{Dir: dir, HepcacheBin: hepcacheBin, Origins: []string{"s3"},
		RTTs: []time.Duration{0}, Clients: []int{2}, FileSize: 3 << 20, Out: io.Discard, Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, r := range rows {
		got[r.Target+" "+r.Read] = true
		if r.Cold <= 0 || r.Target == "hepcache-s3" && (r.Hot <= 0 || r.ColdRatio <= 0) {
			t.Errorf("row %+v", r)
		}
	}
	for _, want := range []string{"s3-direct http", "hepcache-s3 http", "hepcache-s3 read"} {
		if !got[want] {
			t.Errorf("no %s row in %v", want, got)
		}
	}
}
