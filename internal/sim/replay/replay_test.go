package replay

import (
	"context"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/sim/policy"
	"github.com/hepcache/hepcache/internal/sim/trace"
)

type access struct {
	at    time.Duration
	file  string
	size  int64
	bytes int64
}

func build(t *testing.T, as []access) *trace.Trace {
	t.Helper()
	base := time.Date(2023, 6, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	b := trace.NewBuilder()
	for _, a := range as {
		b.Add([]byte(a.file), base+int64(a.at), a.size, a.bytes)
	}
	return b.Finish()
}

func TestAccountingWholeFile(t *testing.T) {
	tr := build(t, []access{
		{0, "A", 100, 100},              // miss, fetch 100
		{time.Hour, "A", 100, 40},       // hit
		{2 * time.Hour, "B", 50, 50},    // miss, evicts A
		{25 * time.Hour, "A", 100, 100}, // next day: miss, evicts B
	})
	res, err := Run(context.Background(), tr, Config{Policy: policy.Config{Name: "lru", Capacity: 120}})
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"requests", res.Requests, int64(4)},
		{"hits", res.Hits, int64(1)},
		{"hit rate", res.HitRate, 0.25},
		{"bytes out", res.BytesOut, int64(290)},
		{"bytes hit", res.BytesHit, int64(40)},
		{"bytes in", res.BytesIn, int64(250)},
		{"created", res.FilesCreated, int64(3)},
		{"deleted", res.FilesDeleted, int64(2)},
		{"final used", res.FinalUsed, int64(100)},
		{"days", len(res.Daily), 2},
		{"cumulative day 1", res.Daily[0].CumulativeHitRate, 1.0 / 3},
		{"cumulative day 2", res.Daily[1].CumulativeHitRate, 0.25},
		{"day 2 bytes in", res.Daily[1].BytesIn, int64(100)},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if res.OutInRatio != 290.0/250 {
		t.Errorf("out/in = %v", res.OutInRatio)
	}
}

func TestAccountingBlockAndBypass(t *testing.T) {
	tr := build(t, []access{
		{0, "A", 100, 25},               // needs 3 blocks: miss, fetch 30
		{time.Minute, "A", 100, 55},     // needs 6 blocks, has 3: 30 of the 55 bytes hit, fetch 30
		{2 * time.Minute, "A", 100, 10}, // 1 block: hit
	})
	res, err := Run(context.Background(), tr, Config{Policy: policy.Config{Name: "lru", Capacity: 1000}, Block: true, BlockSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	if res.Hits != 1 || res.BytesIn != 60 || res.BytesHit != 30+10 || res.BytesOut != 90 || res.FinalUsed != 60 {
		t.Errorf("block mode: %+v", res)
	}

	// admit2 does not store a file on its first request: the bytes pass through.
	tr = build(t, []access{{0, "A", 100, 40}, {time.Second, "A", 100, 40}, {2 * time.Second, "A", 100, 40}})
	res, err = Run(context.Background(), tr, Config{Policy: policy.Config{Name: "admit2", Capacity: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Hits != 1 || res.BytesIn != 40+100 || res.FilesCreated != 1 {
		t.Errorf("admit2: hits %d in %d created %d", res.Hits, res.BytesIn, res.FilesCreated)
	}
}

func TestThroughputAndNIC(t *testing.T) {
	// 3 days; day 2 moves 1.35 PB out: 125 Gbit/s on average -> a 200 Gbit/s NIC.
	var as []access
	for d := range 3 {
		n := 1
		if d == 1 {
			n = 270
		}
		for i := range n {
			as = append(as, access{time.Duration(d)*24*time.Hour + time.Duration(i)*time.Second, "F" + string(rune('a'+i%26)) + string(rune('a'+i/26)), 5e12, 5e12})
		}
	}
	tr := build(t, as)
	res, err := Run(context.Background(), tr, Config{Policy: policy.Config{Name: "infinite"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.PeakOutGbps; got < 124.9 || got > 125.1 {
		t.Errorf("peak out = %v Gbit/s, want 125", got)
	}
	if res.NICGbps != 200 {
		t.Errorf("NIC = %d, want 200", res.NICGbps)
	}
	if NIC(10) != 10 || NIC(10.5) != 25 || NIC(1e4) != 0 {
		t.Error("NIC rounding")
	}
}

func TestOccupancySamplesAndCancel(t *testing.T) {
	var as []access
	for i := range 1000 {
		as = append(as, access{time.Duration(i) * time.Minute, string(rune('a' + i%50)), 10, 10})
	}
	tr := build(t, as)
	var progress int
	res, err := Run(context.Background(), tr, Config{
		Policy:      policy.Config{Name: "xcache", Capacity: 200, PurgeInterval: 5 * time.Minute},
		SampleEvery: time.Hour,
		Progress:    func(n int) { progress = n },
	})
	if err != nil {
		t.Fatal(err)
	}
	if progress != 1000 {
		t.Errorf("progress ended at %d", progress)
	}
	if len(res.Occupancy) != 17 { // 999 minutes = 16.65 h
		t.Errorf("%d occupancy samples, want 17", len(res.Occupancy))
	}
	for _, s := range res.Occupancy[1:] {
		if s.Max > 200 || s.Min < 170 { // purges bring 190..200 down to 180
			t.Errorf("sample %+v outside the watermarks", s)
		}
	}
	if res.Purges == 0 || res.PeakUsed > 200 {
		t.Errorf("purges %d peak %d", res.Purges, res.PeakUsed)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	big := make([]access, 70000)
	for i := range big {
		big[i] = access{time.Duration(i), "x", 1, 1}
	}
	if _, err := Run(ctx, build(t, big), Config{Policy: policy.Config{Name: "lru", Capacity: 10}}); err == nil {
		t.Error("cancelled replay returned no error")
	}
}
