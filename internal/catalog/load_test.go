package catalog

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hepcache/hepcache/disk"
	"github.com/hepcache/hepcache/internal/sidecar"
)

const testOrigin = "root://origin.example:1094"

// tree is a cache directory written as the cache lays it out.
type tree struct {
	tb  testing.TB
	dir string
	t0  time.Time
}

func newTree(tb testing.TB) *tree {
	return &tree{tb: tb, dir: tb.TempDir(), t0: time.Unix(1_800_000_000, 0)}
}

// put writes a sidecar recording blocks of 1 KiB durable (all of size
// when blocks < 0) last accessed at second at, and the data file.
func (tr *tree) put(p string, size int64, at int, withData bool) Key {
	tr.tb.Helper()
	k := Key{Origin: testOrigin, Path: p}
	in := sidecar.New(k.Origin, k.Path, size, 1024, tr.t0, "", tr.t0)
	for b := 0; b < in.Durable.Len(); b++ {
		in.Durable.Set(b)
	}
	in.LastAccess = tr.t0.Add(time.Duration(at) * time.Second)
	mp := MetaPath(tr.dir, k)
	os.MkdirAll(filepath.Dir(mp), 0o755)
	if err := os.WriteFile(mp, in.Marshal(), 0o644); err != nil {
		tr.tb.Fatal(err)
	}
	if withData {
		tr.data(k, size)
	}
	return k
}

func (tr *tree) data(k Key, size int64) string {
	dp := DataPath(tr.dir, k)
	os.MkdirAll(filepath.Dir(dp), 0o755)
	if err := os.WriteFile(dp, make([]byte, size), 0o644); err != nil {
		tr.tb.Fatal(err)
	}
	return dp
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// loadCfg loads from tr with the data on tr.dir itself, orphans removed
// with os.Remove.
func (tr *tree) loadCfg() LoadConfig {
	return LoadConfig{FS: disk.OS{}, Dir: tr.dir, Disks: []Disk{{Root: tr.dir, Marker: "m0"}},
		RemoveData: func(d int, p string, orphan bool) { os.Remove(p) }, Logger: slog.New(slog.DiscardHandler)}
}

func load(tb testing.TB, cfg LoadConfig) *Catalog {
	tb.Helper()
	c := New(Config{DirStatsDepth: 1, DirStatsMax: 100,
		Rules: Rules{Quotas: []Quota{{Prefix: "/d", Size: 1 << 30, HighWatermark: 0.9, LowWatermark: 0.8}}}})
	c.Load(context.Background(), cfg)
	<-c.Done()
	if t, ok := tb.(*testing.T); ok {
		invariants(t, c)
	}
	return c
}

// order is the catalogue's LRU order, least recently used first.
func order(c *Catalog) []string {
	var out []string
	for _, k := range c.Victims(1<<62, 0, time.Time{}) {
		out = append(out, k.Path)
	}
	return out
}

// TestWalkLoadsAndCleans: with no snapshot, the walk reads every sidecar,
// puts the files in LRU order by their last access, removes data files
// without a sidecar (a crash before their first block was durable),
// sidecars whose data file is gone and corrupt sidecars.
func TestWalkLoadsAndCleans(t *testing.T) {
	tr := newTree(t)
	tr.put("/a/f1", 3000, 30, true)
	tr.put("/a/f2", 2000, 10, true)
	tr.put("/b/f3", 1000, 20, true)
	orphan := tr.data(Key{testOrigin, "/a/orphan"}, 10)
	orphanDir := tr.data(Key{testOrigin, "/c/d/orphan"}, 10)
	noData := tr.put("/b/nodata", 1000, 5, false)
	bad := tr.put("/b/bad", 1000, 5, true)
	os.WriteFile(MetaPath(tr.dir, bad), []byte("not a sidecar"), 0o644)

	c := load(t, tr.loadCfg())
	if got, want := order(c), []string{"/a/f2", "/b/f3", "/a/f1"}; !slices.Equal(got, want) {
		t.Fatalf("LRU order %v, want %v", got, want)
	}
	if files, bytes := c.Totals(); files != 3 || bytes != 6000 {
		t.Fatalf("%d files, %d bytes", files, bytes)
	}
	for _, p := range []string{orphan, orphanDir, MetaPath(tr.dir, noData), MetaPath(tr.dir, bad), DataPath(tr.dir, bad)} {
		if exists(p) {
			t.Errorf("%s left behind", p)
		}
	}
	if p := c.Progress(); p.Loading || p.Walking || p.Loaded != 5 || p.Total != 5 || p.FromSnapshot {
		t.Fatalf("progress %+v", p)
	}
}

// TestSnapshotRoundTrip: a snapshot written at Close loads the same
// catalogue, in the same order, without reading a sidecar; it is marked
// used at once, so that a second start (as after a crash) walks.
func TestSnapshotRoundTrip(t *testing.T) {
	tr := newTree(t)
	for i := 0; i < 500; i++ {
		tr.put(fmt.Sprintf("/d%d/f%03d", i%7, i), int64(1000+i), (i*37)%500, true)
	}
	c := load(t, tr.loadCfg())
	c.Opened(Key{testOrigin, "/d0/f000"}, 0, tr.t0.Add(time.Hour), 0, false)
	want := order(c)
	if err := c.WriteSnapshot(disk.OS{}, tr.dir, []Disk{{Root: tr.dir, Marker: "m0"}}, true); err != nil {
		t.Fatal(err)
	}
	var reads atomic.Int64
	cfg := tr.loadCfg()
	cfg.Note = func(string) { reads.Add(1) }
	c2 := load(t, cfg)
	if p := c2.Progress(); !p.FromSnapshot || p.Loaded != 500 || p.Total != 500 {
		t.Fatalf("progress %+v", p)
	}
	if reads.Load() != 0 {
		t.Fatalf("%d sidecars read with a snapshot", reads.Load())
	}
	// The open file counts as closed in the next run.
	if got := order(c2); !slices.Equal(got, append(want, "/d0/f000")) {
		t.Fatalf("order after the snapshot differs: %v...", got[:5])
	}
	if _, b1 := c.Totals(); true {
		if _, b2 := c2.Totals(); b1 != b2 {
			t.Fatalf("bytes %d, want %d", b2, b1)
		}
	}
	// Used once: a second start (as after a crash) takes it for an
	// approximation, and reads again the sidecars written since (here,
	// in the same second: all).
	c3 := load(t, cfg)
	if p := c3.Progress(); !p.FromSnapshot || !p.Approximate || reads.Load() != 500 {
		t.Fatalf("a used snapshot was trusted again: %+v, %d reads", p, reads.Load())
	}
	if got := order(c3); !slices.Equal(got, order(c2)) {
		t.Fatal("order after an approximate load differs")
	}
}

// TestApproximateSnapshotCorrected: a snapshot written while the cache
// runs (pages of files in no order), then a crash: the next start loads it
// as an approximation in LRU order, reads again only the sidecars written
// since, and so corrects a file that grew and another that moved to
// another disk, adds one the snapshot lacks and forgets one gone.
func TestApproximateSnapshotCorrected(t *testing.T) {
	tr := newTree(t)
	d1 := t.TempDir()
	old := time.Now().Add(-time.Hour)
	for i := 0; i < 50; i++ {
		k := tr.put(fmt.Sprintf("/d%d/f%02d", i%3, i), 1000, (i*7)%50, true)
		os.Chtimes(MetaPath(tr.dir, k), old, old)
	}
	cfg := tr.loadCfg()
	cfg.Disks = append(cfg.Disks, Disk{Root: d1, Marker: "m1"})
	c := load(t, cfg)
	want := order(c)
	if err := c.WriteSnapshot(disk.OS{}, tr.dir, cfg.Disks, false); err != nil {
		t.Fatal(err)
	}
	grown := tr.put("/d0/f03", 5000, 55, true) // now the most recently used
	moved := Key{testOrigin, "/d1/f04"}
	os.MkdirAll(filepath.Dir(DataPath(d1, moved)), 0o755)
	os.Rename(DataPath(tr.dir, moved), DataPath(d1, moved))
	tr.put("/d1/f04", 1000, 4*7, false) // its sidecar rewritten
	added := tr.put("/d2/new", 700, 60, true)
	gone := Key{testOrigin, "/d2/f05"}
	os.Remove(MetaPath(tr.dir, gone))
	os.Remove(DataPath(tr.dir, gone))

	var reads atomic.Int64
	cfg.Note = func(string) { reads.Add(1) }
	c2 := load(t, cfg)
	if p := c2.Progress(); !p.FromSnapshot || !p.Approximate {
		t.Fatalf("progress %+v", p)
	}
	if n := reads.Load(); n != 3 {
		t.Fatalf("%d sidecars read, want the 3 written since the snapshot", n)
	}
	if info, _ := c2.Lookup(grown); info.Bytes != 5000 {
		t.Fatalf("grown file: %+v", info)
	}
	if d, _ := c2.DiskOf(moved); d != 1 {
		t.Fatalf("moved file on disk %d", d)
	}
	if _, ok := c2.Lookup(added); !ok {
		t.Fatal("file added since not catalogued")
	}
	if _, ok := c2.Lookup(gone); ok {
		t.Fatal("file gone since still catalogued")
	}
	want = slices.DeleteFunc(want, func(p string) bool { return p == "/d0/f03" || p == "/d2/f05" })
	want = append(want, "/d0/f03", "/d2/new")
	if got := order(c2); !slices.Equal(got, want) {
		t.Fatalf("order %v,\nwant  %v", got, want)
	}
}

// TestSnapshotCheckedByWalk: what changed in the trees while the cache
// was stopped (a file evicted offline, one adopted, a data file lost) is
// found by the walk after a snapshot's load.
func TestSnapshotCheckedByWalk(t *testing.T) {
	tr := newTree(t)
	for i := 0; i < 20; i++ {
		tr.put(fmt.Sprintf("/d/f%02d", i), 1000, i, true)
	}
	disks := []Disk{{Root: tr.dir, Marker: "m0"}}
	if err := load(t, tr.loadCfg()).WriteSnapshot(disk.OS{}, tr.dir, disks, true); err != nil {
		t.Fatal(err)
	}
	gone := Key{testOrigin, "/d/f05"}
	os.Remove(MetaPath(tr.dir, gone))
	os.Remove(DataPath(tr.dir, gone))
	lost := Key{testOrigin, "/d/f06"}
	os.Remove(DataPath(tr.dir, lost))
	tr.put("/d/new", 500, 6, true)
	c := load(t, tr.loadCfg())
	if _, ok := c.Lookup(gone); ok {
		t.Error("a file evicted offline is still catalogued")
	}
	if _, ok := c.Lookup(lost); ok || exists(MetaPath(tr.dir, lost)) {
		t.Error("a file whose data is lost is still catalogued, or its sidecar kept")
	}
	o := order(c)
	if i := slices.Index(o, "/d/new"); i < 0 || o[i-1] != "/d/f04" || o[i+1] != "/d/f07" {
		t.Fatalf("the file added offline is not in LRU order: %v", o)
	}
}

// TestLoadKeepsWhatServingChanged: opens and removals while the snapshot
// loads are not undone by it: an opened file stays the most recent, a
// removed one is not brought back.
func TestLoadKeepsWhatServingChanged(t *testing.T) {
	tr := newTree(t)
	for i := 0; i < 10; i++ {
		tr.put(fmt.Sprintf("/f%d", i), 100, i, true)
	}
	disks := []Disk{{Root: tr.dir, Marker: "m0"}}
	if err := load(t, tr.loadCfg()).WriteSnapshot(disk.OS{}, tr.dir, disks, true); err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	var once sync.Once
	cfg := tr.loadCfg()
	cfg.Pace = func(ctx context.Context) error {
		once.Do(func() { <-gate })
		return nil
	}
	c := New(Config{DirStatsDepth: -1})
	c.Load(context.Background(), cfg)
	if p := c.Progress(); !p.Loading || !p.FromSnapshot || p.Total != 10 {
		t.Fatalf("progress %+v", p)
	}
	c.Opened(Key{testOrigin, "/f0"}, 100, tr.t0.Add(time.Hour), 0, false)
	c.Closed(Key{testOrigin, "/f0"}, tr.t0.Add(time.Hour))
	c.Evicted(Key{testOrigin, "/f9"})
	close(gate)
	<-c.Done()
	want := []string{"/f1", "/f2", "/f3", "/f4", "/f5", "/f6", "/f7", "/f8", "/f0"}
	if got := order(c); !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}

// TestCorruptSnapshot: a snapshot that fails its checksums is loaded from
// the sidecars instead, with the same result.
func TestCorruptSnapshot(t *testing.T) {
	tr := newTree(t)
	for i := 0; i < 3000; i++ {
		tr.put(fmt.Sprintf("/d%02d/f%04d", i%50, i), 100, i, true)
	}
	c := load(t, tr.loadCfg())
	want := order(c)
	if err := c.WriteSnapshot(disk.OS{}, tr.dir, []Disk{{Root: tr.dir, Marker: "m0"}}, true); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(tr.dir, SnapshotName)
	b, _ := os.ReadFile(name)
	b[len(b)-100] ^= 1 // in the last block of records
	os.WriteFile(name, b, 0o644)
	c2 := load(t, tr.loadCfg())
	if got := order(c2); !slices.Equal(got, want) {
		t.Fatalf("order from a corrupt snapshot differs")
	}
	if p := c2.Progress(); p.FromSnapshot {
		t.Fatalf("progress %+v", p)
	}
}

// TestSnapshotOfOtherDisks: a snapshot naming a disk the cache does not
// have (data_dirs changed while stopped) is not used.
func TestSnapshotOfOtherDisks(t *testing.T) {
	tr := newTree(t)
	tr.put("/f", 100, 1, true)
	if err := load(t, tr.loadCfg()).WriteSnapshot(disk.OS{}, tr.dir, []Disk{{Root: tr.dir, Marker: "other"}}, true); err != nil {
		t.Fatal(err)
	}
	c := load(t, tr.loadCfg())
	if p := c.Progress(); p.FromSnapshot {
		t.Fatal("snapshot of other disks used")
	}
	if files, _ := c.Totals(); files != 1 {
		t.Fatalf("%d files", files)
	}
}

// TestWalkOfSeveralDisks: each file is catalogued on the disk whose tree
// holds its data file; of two copies the newer is kept.
func TestWalkOfSeveralDisks(t *testing.T) {
	tr := newTree(t)
	d1 := t.TempDir()
	a := tr.put("/a", 100, 1, true)
	b := tr.put("/b", 100, 2, false)
	bp := DataPath(d1, b)
	os.MkdirAll(filepath.Dir(bp), 0o755)
	os.WriteFile(bp, []byte("b"), 0o644)
	dup := tr.put("/dup", 100, 3, true)
	old := DataPath(tr.dir, dup)
	os.Chtimes(old, time.Unix(1000, 0), time.Unix(1000, 0))
	newer := DataPath(d1, dup)
	os.MkdirAll(filepath.Dir(newer), 0o755)
	os.WriteFile(newer, []byte("d"), 0o644)
	cfg := tr.loadCfg()
	cfg.Disks = append(cfg.Disks, Disk{Root: d1, Marker: "m1"})
	c := load(t, cfg)
	for k, want := range map[Key]int{a: 0, b: 1, dup: 1} {
		if d, ok := c.DiskOf(k); !ok || d != want {
			t.Errorf("%s on disk %d %v, want %d", k.Path, d, ok, want)
		}
	}
	if exists(old) || !exists(newer) {
		t.Error("the older copy was kept")
	}
}
