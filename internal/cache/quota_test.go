package cache

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hepcache/hepcache/origin"
)

// quotaCache caches two-block files under /vo/a, /vo/b and /other with a
// fake clock, purging only when asked.
func quotaCache(t *testing.T, mut func(*Config)) (*Cache, *origin.Mem) {
	t.Helper()
	m := origin.NewMem("mem://o")
	for _, d := range []string{"/vo/a", "/vo/b", "/other"} {
		for i := 0; i < 6; i++ {
			m.Put(fmt.Sprintf("%s/f%d", d, i), randomData(uint64(i), 2*testBlock), time.Now())
		}
	}
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	c := newTestCache(t, t.TempDir(), m, func(cfg *Config) {
		cfg.Capacity = 100 * testBlock
		cfg.PurgeInterval = time.Hour
		cfg.now = clk.now
		if mut != nil {
			mut(cfg)
		}
	})
	return c, m
}

func under(keys map[string]bool, prefix string) (n int) {
	for k := range keys {
		if strings.HasPrefix(k, prefix) {
			n++
		}
	}
	return n
}

func TestQuotaPurgesItsOwnFilesFirst(t *testing.T) {
	// /vo/a may hold 6 blocks (high 5.7, low 5.4 blocks): 3 two-block
	// files pass the high watermark only with the third... the fourth.
	c, _ := quotaCache(t, func(cfg *Config) {
		cfg.Quotas = []Quota{{Prefix: "/vo/a/", Size: 6 * testBlock}}
	})
	for i := 0; i < 6; i++ {
		readFile(t, c, fmt.Sprintf("/other/f%d", i))
	}
	for i := 0; i < 4; i++ {
		readFile(t, c, fmt.Sprintf("/vo/a/f%d", i))
	}
	waitIdle(t, c)
	c.Purge()
	got := cachedKeys(c)
	if n := under(got, "/other/"); n != 6 {
		t.Fatalf("a quota purge evicted files outside the quota: %d of 6 /other files left (%v)", n, got)
	}
	// 8 blocks > high 5.7 -> down to <= 5.4 blocks: the two oldest go.
	if got["/vo/a/f0"] || got["/vo/a/f1"] || !got["/vo/a/f2"] || !got["/vo/a/f3"] {
		t.Fatalf("quota purge did not evict its least recently used files: %v", got)
	}
	q := c.Quotas()
	if len(q) != 1 || q[0].Bytes != 4*testBlock || q[0].Files != 2 || q[0].EvictedFiles != 2 || q[0].Limit != 6*testBlock {
		t.Fatalf("quota usage %+v", q)
	}
}

func TestQuotaShareAndLongestPrefix(t *testing.T) {
	// A share of the capacity; /vo/b has a nested quota of its own that
	// takes its files out of /vo's.
	c, _ := quotaCache(t, func(cfg *Config) {
		cfg.Quotas = []Quota{{Prefix: "/vo", Share: 0.05}, {Prefix: "/vo/b", Size: 1 << 40}}
	})
	for i := 0; i < 3; i++ {
		readFile(t, c, fmt.Sprintf("/vo/a/f%d", i))
		readFile(t, c, fmt.Sprintf("/vo/b/f%d", i))
	}
	waitIdle(t, c)
	c.Purge()
	got := cachedKeys(c)
	// /vo: 5 blocks (high 4.75): 6 blocks of /vo/a -> 2 files kept (4).
	if n := under(got, "/vo/a/"); n != 2 {
		t.Fatalf("/vo/a files left %d, want 2: %v", n, got)
	}
	if n := under(got, "/vo/b/"); n != 3 {
		t.Fatalf("/vo/b is under its own quota and must keep its 3 files: %v", got)
	}
}

func TestPinnedFilesAreNeverPurged(t *testing.T) {
	c, _ := quotaCache(t, func(cfg *Config) {
		cfg.Capacity = 10 * testBlock
		cfg.Pin = []string{"/vo/a"}
		cfg.PinShare = 0.8 // 6 of 10 blocks pinned
		cfg.Quotas = []Quota{{Prefix: "/vo/", Size: 4 * testBlock}}
	})
	for i := 0; i < 3; i++ {
		readFile(t, c, fmt.Sprintf("/vo/a/f%d", i)) // pinned, oldest
	}
	for i := 0; i < 3; i++ {
		readFile(t, c, fmt.Sprintf("/other/f%d", i))
	}
	waitIdle(t, c)
	c.Purge()
	got := cachedKeys(c)
	if n := under(got, "/vo/a/"); n != 3 {
		t.Fatalf("pinned files evicted: %v", got)
	}
	if n := under(got, "/other/"); n == 3 {
		t.Fatalf("unpinned files must make the room: %v", got)
	}
	u, _ := c.Usage()
	if u.Used > u.Low {
		t.Fatalf("used %d above the low watermark %d after purge", u.Used, u.Low)
	}
	if u.Pinned != 6*testBlock {
		t.Fatalf("pinned bytes %d, want %d", u.Pinned, 6*testBlock)
	}
	// An admin's evict still removes a pinned file.
	if _, err := c.Evict("mem://o", "/vo/a/f0"); err != nil {
		t.Fatal(err)
	}
}

func TestSetSpaceReloads(t *testing.T) {
	c, _ := quotaCache(t, nil)
	for i := 0; i < 4; i++ {
		readFile(t, c, fmt.Sprintf("/vo/b/f%d", i))
	}
	waitIdle(t, c)
	if c.Purge(); len(cachedKeys(c)) != 4 {
		t.Fatal("nothing should be purged without a quota")
	}
	bad := Space{HighWatermark: 0.95, LowWatermark: 0.9, Quotas: []Quota{{Prefix: "vo", Size: 1}}}
	if err := c.SetSpace(bad); err == nil || !strings.Contains(err.Error(), `quota prefix "vo"`) {
		t.Fatalf("bad quota accepted: %v", err)
	}
	if len(c.Quotas()) != 0 {
		t.Fatal("a rejected reload changed the quotas")
	}
	if err := c.SetSpace(Space{HighWatermark: 0.95, LowWatermark: 0.9,
		Quotas: []Quota{{Prefix: "/vo/b", Size: 4 * testBlock}}}); err != nil {
		t.Fatal(err)
	}
	c.Purge()
	if q := c.Quotas(); q[0].Files != 1 || under(cachedKeys(c), "/vo/b/f3") != 1 {
		t.Fatalf("after reload: quota %+v, files %v (want only the newest /vo/b/f3)", q, cachedKeys(c))
	}
}

func TestDirStats(t *testing.T) {
	c, _ := quotaCache(t, nil)
	readFile(t, c, "/vo/a/f0")
	readFile(t, c, "/vo/a/f0")
	readFile(t, c, "/vo/b/f1")
	waitIdle(t, c)
	byDir := map[string]DirStat{}
	for _, d := range c.DirStats() {
		byDir[d.Dir] = d
	}
	a := byDir["/vo/a"]
	// Bytes that were on disk when the reader reached them count as hits,
	// even during the first (miss) open.
	if a.Files != 1 || a.Bytes != 2*testBlock || a.Misses != 1 || a.Hits != 1 ||
		a.BytesMissed == 0 || a.BytesHit+a.BytesMissed != 4*testBlock {
		t.Fatalf("/vo/a stats %+v", a)
	}
	if b := byDir["/vo/b"]; b.Files != 1 || b.Misses != 1 {
		t.Fatalf("/vo/b stats %+v", b)
	}
	c.Evict("mem://o", "/vo/a/f0")
	for _, d := range c.DirStats() {
		if d.Dir == "/vo/a" && (d.Files != 0 || d.Bytes != 0 || d.Hits != 1) {
			t.Fatalf("after eviction /vo/a %+v: cached figures must drop, counters stay", d)
		}
	}
}

func TestDirStatsBounded(t *testing.T) {
	c, _ := quotaCache(t, func(cfg *Config) { cfg.DirStatsMax = 2; cfg.DirStatsDepth = 2 })
	for _, p := range []string{"/vo/a/f0", "/vo/b/f0", "/other/f0"} {
		readFile(t, c, p)
	}
	waitIdle(t, c)
	ds := c.DirStats()
	if len(ds) != 3 || ds[0].Dir != "(other)" {
		t.Fatalf("want 2 named directories and (other), got %+v", ds)
	}
}

// TestPinShareBounded (issue 21, item 10): files pinned past the pin share
// of the capacity (here 5 of 10 blocks) are left unpinned, counted and
// warned about, so that what is not pinned still stays cached.
func TestPinShareBounded(t *testing.T) {
	c, _ := quotaCache(t, func(cfg *Config) {
		cfg.Capacity = 10 * testBlock
		cfg.Pin = []string{"/vo/a"}
	})
	c.Usage() // the capacity the share is of
	for i := 0; i < 6; i++ {
		readFile(t, c, fmt.Sprintf("/vo/a/f%d", i)) // 12 blocks into a pinned namespace
	}
	waitIdle(t, c)
	u, _ := c.Usage()
	if u.Pinned > 5*testBlock {
		t.Fatalf("pinned %d bytes, over half the capacity (%d)", u.Pinned, 5*testBlock)
	}
	if c.Stats().PinsRefused.Load() == 0 {
		t.Fatal("no pin refused")
	}
	readFile(t, c, "/other/f0")
	waitIdle(t, c)
	c.Purge()
	got := cachedKeys(c)
	if !got["/other/f0"] {
		t.Fatalf("the newest unpinned file was purged: %v", got)
	}
	if u, _ := c.Usage(); u.Used > u.Low || u.Pinned > 5*testBlock {
		t.Fatalf("after purge: used %d (low %d), pinned %d", u.Used, u.Low, u.Pinned)
	}
}
