package cache

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/hepcache/hepcache/internal/eventually"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/origin"
)

// fakeClock is a manual clock for purge-order tests: every reading is one
// second after the previous one.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeClock) now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.t = f.t.Add(time.Second)
	return f.t
}

func (f *fakeClock) advance(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

func readFile(tb testing.TB, c *Cache, p string) {
	tb.Helper()
	readAllVia(tb, c, p)
}

func cachedKeys(c *Cache) map[string]bool {
	out := map[string]bool{}
	for _, k := range c.catalog.Keys() {
		out[k.Path] = true
	}
	return out
}

func TestPurgeEvictsLeastRecentlyUsedBetweenWatermarks(t *testing.T) {
	m := origin.NewMem("mem://o")
	for i := 0; i < 10; i++ {
		m.Put(fmt.Sprintf("/f%d", i), randomData(uint64(i), 2*testBlock), time.Now())
	}
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	// Capacity of 10 blocks: high 9.5 blocks, low 9 blocks (= 4 files).
	c := newTestCache(t, t.TempDir(), m, func(cfg *Config) {
		cfg.Capacity = 10 * testBlock
		cfg.PurgeInterval = time.Hour
		cfg.now = clk.now
	})
	for i := 0; i < 4; i++ {
		readFile(t, c, fmt.Sprintf("/f%d", i))
	}
	readFile(t, c, "/f0") // f0 is now the most recently used
	// f4 takes usage to 10 blocks > high: purge down to <= 9 blocks evicts
	// the least recently used closed file, f1.
	readFile(t, c, "/f4")
	waitIdle(t, c)
	c.Purge()
	got := cachedKeys(c)
	for _, p := range []string{"/f0", "/f2", "/f3", "/f4"} {
		if !got[p] {
			t.Errorf("%s evicted, want kept (have %v)", p, got)
		}
	}
	if got["/f1"] {
		t.Errorf("least recently used /f1 kept (have %v)", got)
	}
	u, _ := c.Usage()
	if u.Used > u.Low {
		t.Fatalf("after purge used %d > low %d", u.Used, u.Low)
	}
	if c.Stats().Evictions.Load() != 1 {
		t.Fatalf("evictions=%d want 1", c.Stats().Evictions.Load())
	}
}

func TestPurgeNeverEvictsOpenFiles(t *testing.T) {
	m := origin.NewMem("mem://o")
	for i := 0; i < 3; i++ {
		m.Put(fmt.Sprintf("/f%d", i), randomData(uint64(i), 4*testBlock), time.Now())
	}
	c := newTestCache(t, t.TempDir(), m, func(cfg *Config) {
		cfg.Capacity = 5 * testBlock
		cfg.PurgeInterval = time.Hour
	})
	f, err := c.Open(context.Background(), backend.Request{Path: "/f0"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4*testBlock)
	if _, err := f.ReadAt(context.Background(), buf, 0); err != nil {
		t.Fatal(err)
	}
	readFile(t, c, "/f1")
	waitClosed(t, c, "/f1")
	c.Purge()
	if got := cachedKeys(c); !got["/f0"] || got["/f1"] {
		t.Fatalf("open file must stay, closed one go: %v", got)
	}
	if _, err := c.Evict("mem://o", "/f0"); !errors.Is(err, ErrBusy) {
		t.Fatalf("evict of an open file: %v, want ErrBusy", err)
	}
}

func TestPurgeStartsWhenHighWatermarkIsCrossed(t *testing.T) {
	m := origin.NewMem("mem://o")
	for i := 0; i < 20; i++ {
		m.Put(fmt.Sprintf("/f%d", i), randomData(uint64(i), testBlock), time.Now())
	}
	c := newTestCache(t, t.TempDir(), m, func(cfg *Config) {
		cfg.Capacity = 10 * testBlock
		cfg.PurgeInterval = time.Hour // only write-triggered purges can act
	})
	for i := 0; i < 20; i++ {
		readFile(t, c, fmt.Sprintf("/f%d", i))
		waitIdle(t, c)
		c.purgeMu.Lock() // wait for a purge in progress
		c.purgeMu.Unlock()
	}
	// Let the last kick run, then check the bound.
	eventually.True(t, func() bool { return len(c.purgeKick) == 0 }, "the purger to take the last kick")
	c.purgeMu.Lock()
	c.purgeMu.Unlock()
	u, _ := c.Usage()
	if u.Used > u.High {
		t.Fatalf("usage %d above high watermark %d without a purge", u.Used, u.High)
	}
	if c.Stats().Evictions.Load() < 10 {
		t.Fatalf("only %d evictions for 20 files in a 10-file cache", c.Stats().Evictions.Load())
	}
}

func TestIndexRebuiltAtStartup(t *testing.T) {
	dir := t.TempDir()
	m := origin.NewMem("mem://o")
	for i := 0; i < 5; i++ {
		m.Put(fmt.Sprintf("/d%d/f", i), randomData(uint64(i), testBlock+i), time.Now())
	}
	c := newTestCache(t, dir, m, nil)
	for i := 0; i < 5; i++ {
		readFile(t, c, fmt.Sprintf("/d%d/f", i))
	}
	waitIdle(t, c)
	files, bytes := c.catalog.Totals()
	c.Close()
	c2 := newTestCache(t, dir, m, nil)
	f2, b2 := c2.catalog.Totals()
	if f2 != files || b2 != bytes || files != 5 {
		t.Fatalf("rebuilt index %d files %d bytes, had %d files %d bytes", f2, b2, files, bytes)
	}
	if want := int64(5*testBlock + 10); bytes != want {
		t.Fatalf("index bytes %d, want %d", bytes, want)
	}
}

func TestMaxFilesAndMaxAge(t *testing.T) {
	m := origin.NewMem("mem://o")
	for i := 0; i < 10; i++ {
		m.Put(fmt.Sprintf("/f%d", i), []byte("x"), time.Now())
	}
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	c := newTestCache(t, t.TempDir(), m, func(cfg *Config) {
		cfg.Capacity = 1 << 30
		cfg.MaxFiles = 5
		cfg.PurgeInterval = time.Hour
		cfg.now = clk.now
	})
	for i := 0; i < 10; i++ {
		readFile(t, c, fmt.Sprintf("/f%d", i))
	}
	waitIdle(t, c)
	c.Purge()
	if files, _ := c.catalog.Totals(); files > 5 {
		t.Fatalf("%d files after purge with MaxFiles 5", files)
	}
	if got := cachedKeys(c); !got["/f9"] || got["/f0"] {
		t.Fatalf("file-count purge did not evict oldest first: %v", got)
	}
	if err := c.SetSpace(Space{HighWatermark: c.cfg.HighWatermark, LowWatermark: c.cfg.LowWatermark, MaxFiles: 5, MaxAge: time.Minute}); err != nil {
		t.Fatal(err)
	}
	clk.advance(time.Hour)
	c.Purge()
	if files, _ := c.catalog.Totals(); files != 0 {
		t.Fatalf("%d files older than MaxAge survived", files)
	}
}

// waitClosed waits until the cache has finished closing p.
func waitClosed(tb testing.TB, c *Cache, p string) {
	tb.Helper()
	k := Key{Origin: "mem://o", Path: p}
	eventually.True(tb, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		e, open := c.files[k]
		_, closing := c.closing[k]
		return (!open || e.kept) && !closing // a kept entry is closed (kept.go)
	}, "%s to close", p)
}

// TestPurgeRemovesEmptyDirectories: the directories a purge's evictions
// empty are removed (once each, at the end of the purge), those still
// holding a file are kept.
func TestPurgeRemovesEmptyDirectories(t *testing.T) {
	m := origin.NewMem("mem://o")
	var old []Key
	for i := 0; i < 6; i++ {
		p := fmt.Sprintf("/old/d%d/f%d", i%3, i)
		m.Put(p, randomData(uint64(i), testBlock), time.Now())
		old = append(old, Key{Origin: m.String(), Path: p})
	}
	m.Put("/old/keep/f", randomData(9, testBlock), time.Now())
	c := newTestCache(t, t.TempDir(), m, nil)
	for _, k := range old {
		readFile(t, c, k.Path)
	}
	readFile(t, c, "/old/keep/f")
	waitIdle(t, c)
	if files, _ := c.evictAll(old); files != len(old) {
		t.Fatalf("%d of %d files evicted", files, len(old))
	}
	for _, p := range []string{c.metaPath(old[0]), c.dataPath(old[0])} {
		if _, err := os.Stat(filepath.Dir(p)); !os.IsNotExist(err) {
			t.Errorf("%s left after its files were purged: %v", filepath.Dir(p), err)
		}
		if _, err := os.Stat(filepath.Dir(filepath.Dir(p))); err != nil {
			t.Errorf("%s, still holding a file, removed: %v", filepath.Dir(filepath.Dir(p)), err)
		}
	}
}
