package cache

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hepcache/hepcache/disk"
	"github.com/hepcache/hepcache/internal/catalog"
	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/origin"
)

// gatedLoad returns a loadPace that holds the catalogue's load until
// release is called, and reports how often it was asked.
func gatedLoad() (pace loadPace, release func(), calls *atomic.Int64) {
	gate := make(chan struct{})
	calls = &atomic.Int64{}
	pace = func(ctx context.Context) error {
		calls.Add(1)
		select {
		case <-gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return pace, func() { close(gate) }, calls
}

// fillFiles caches n files of 2 blocks through a cache on dir, closes it
// and returns the origin.
func fillFiles(t *testing.T, dir string, n int, mut func(*Config)) *origin.Mem {
	t.Helper()
	m := origin.NewMem("mem://o")
	for i := range n {
		m.Put(fmt.Sprintf("/d/f%02d", i), randomData(uint64(i), 2*testBlock), time.Now())
	}
	c := newTestCache(t, dir, m, mut)
	for i := range n {
		readAllVia(t, c, fmt.Sprintf("/d/f%02d", i))
	}
	waitIdle(t, c)
	c.Close()
	return m
}

// TestServesWhileIndexLoads (issue 35 item 2): after a restart the cache
// serves its cached files at once, from the right data disk, while its
// index is still loading (held here before its first batch); purge waits
// for the index (it would evict from an index it cannot rank), then runs
// by itself once it is loaded. With the snapshot of a clean shutdown and
// without (a crash: the index is read from the sidecars).
func TestServesWhileIndexLoads(t *testing.T) {
	for _, snapshot := range []bool{true, false} {
		t.Run(fmt.Sprintf("snapshot=%v", snapshot), func(t *testing.T) {
			dir := t.TempDir()
			disks := initDisks(t, dir, t.TempDir(), t.TempDir())
			withDisks := func(c *Config) { c.DataDirs = disks }
			m := fillFiles(t, dir, 10, withDisks)
			if !snapshot {
				os.Remove(filepath.Join(dir, catalog.SnapshotName))
			}
			pace, release, calls := gatedLoad()
			c := newTestCache(t, dir, m, func(cfg *Config) {
				withDisks(cfg)
				cfg.loadPace = pace
				cfg.Capacity = 10 * testBlock // 20 blocks cached: purge would evict
			})
			if st := c.IndexState(); !st.Loading || st.FromSnapshot != snapshot {
				t.Fatalf("index state %+v", st)
			}
			before := m.BytesRead.Load()
			for _, i := range []int{3, 7} {
				if got := readAllVia(t, c, fmt.Sprintf("/d/f%02d", i)); !bytes.Equal(got, randomData(uint64(i), 2*testBlock)) {
					t.Fatalf("f%02d: wrong bytes", i)
				}
			}
			if d := m.BytesRead.Load() - before; d != 0 {
				t.Fatalf("hits while the index loads fetched %d bytes from the origin", d)
			}
			if !c.IndexState().Loading || calls.Load() == 0 {
				t.Fatal("the index was not held loading")
			}
			if files, _ := c.Purge(); files != 0 {
				t.Fatalf("purge evicted %d files from an index not loaded", files)
			}
			release()
			<-c.catalog.Done()
			waitIdle(t, c)
			c.Purge()
			u, _ := c.Usage()
			if u.Used > u.Low {
				t.Fatalf("after the load, used %d > low %d", u.Used, u.Low)
			}
			got := cachedKeys(c)
			if !got["/d/f03"] || !got["/d/f07"] {
				t.Fatalf("purge evicted the files just read: %v", got)
			}
			if st := c.IndexState(); st.Loading || st.Walking || st.Loaded != 10 {
				t.Fatalf("index state after the load %+v", st)
			}
		})
	}
}

// TestCrashOrphansRemoved (issue 35 item 2): data files a crash left
// without a sidecar (their first block was never durable) are removed in
// the background once the cache serves, and an open of such a file
// meanwhile fetches it whole.
func TestCrashOrphansRemoved(t *testing.T) {
	dir := t.TempDir()
	m := fillFiles(t, dir, 3, nil)
	os.Remove(filepath.Join(dir, catalog.SnapshotName))
	orphans := []Key{{Origin: "mem://o", Path: "/d/orphan"}, {Origin: "mem://o", Path: "/e/new/orphan"}}
	for _, k := range orphans {
		p := DataPath(dir, k)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, make([]byte, testBlock), 0o644)
	}
	m.Put("/d/orphan", randomData(99, testBlock), time.Now())
	pace, release, _ := gatedLoad()
	c := newTestCache(t, dir, m, func(cfg *Config) { cfg.loadPace = pace })
	if got := readAllVia(t, c, "/d/orphan"); !bytes.Equal(got, randomData(99, testBlock)) {
		t.Fatal("the file of an orphan: wrong bytes")
	}
	waitIdle(t, c)
	release()
	<-c.catalog.Done()
	if _, err := os.Stat(DataPath(dir, orphans[0])); err != nil {
		t.Fatalf("the orphan fetched again (its sidecar written) was removed: %v", err)
	}
	if _, err := os.Stat(filepath.Dir(DataPath(dir, orphans[1]))); !os.IsNotExist(err) {
		t.Fatalf("an orphan (or its directory) survived: %v", err)
	}
	if files, _ := c.catalog.Totals(); files != 4 {
		t.Fatalf("%d files catalogued, want 4", files)
	}
}

// TestStartReadsNoSidecar (issue 35 item 2): a start after a clean stop
// reads no sidecar, before serving or after (the index comes from its
// snapshot, checked by listing the directories); a hit then reads its
// own. The old start read every sidecar before New returned.
func TestStartReadsNoSidecar(t *testing.T) {
	dir := t.TempDir()
	mkFS := func() (*disk.ErrorFS, *atomic.Int64) {
		reads := &atomic.Int64{}
		efs := disk.NewErrorFS(disk.OS{})
		efs.OnRead(func(name string, off int64, n int) error {
			if strings.HasSuffix(name, ".hcinfo") {
				reads.Add(1)
			}
			return nil
		})
		return efs, reads
	}
	efs, _ := mkFS()
	m := fillFiles(t, dir, 20, func(cfg *Config) { cfg.FS = efs })
	efs, reads := mkFS()
	c := newTestCache(t, dir, m, func(cfg *Config) { cfg.FS = efs })
	if n := reads.Load(); n != 0 {
		t.Fatalf("the start read %d sidecars", n)
	}
	if files, _ := c.catalog.Totals(); files != 20 {
		t.Fatalf("%d files catalogued, want 20", files)
	}
	readAllVia(t, c, "/d/f05")
	if n := reads.Load(); n != 1 {
		t.Fatalf("a hit read %d sidecars, want its own", n)
	}
}

// TestDiskBackWhileIndexLoads: a data disk mounted again while the index
// loads is taken back once it is loaded (which files are the disk's own is
// the index's to tell), with its files, read again without the origin.
func TestDiskBackWhileIndexLoads(t *testing.T) {
	dir := t.TempDir()
	d0, unmount, mount := bindMount(t, realclient.Tmpfs(t, "32m"))
	d1 := realclient.Tmpfs(t, "32m")
	both := func(c *Config) { c.DataDirs = []string{d0, d1} }
	initDisks(t, dir, d0, d1)
	m := fillFiles(t, dir, 6, both)
	unmount()
	pace, release, _ := gatedLoad()
	c := newTestCache(t, dir, m, func(cfg *Config) { both(cfg); cfg.loadPace = pace })
	mount()
	c.CheckDisks()
	if u := c.Disks(); u[0].Up {
		t.Fatalf("d0 taken back before the index is loaded: %+v", u)
	}
	release()
	<-c.catalog.Done()
	eventually.True(t, func() bool { return c.Disks()[0].Up }, "d0 taken back once the index is loaded")
	if u := c.Disks(); u[0].Files == 0 {
		t.Fatalf("d0 back without its files: %+v", u)
	}
	before := m.BytesRead.Load()
	for i := range 6 {
		readAllVia(t, c, fmt.Sprintf("/d/f%02d", i))
	}
	if d := m.BytesRead.Load() - before; d != 0 {
		t.Fatalf("reads after d0 came back fetched %d bytes", d)
	}
}

// TestCrashStartFromPeriodicSnapshot: after a crash the start loads the
// last snapshot the cache wrote while it ran, as an approximation; a file
// whose data moved to the other disk since is found there by an open
// before the walk has checked it, and read without the origin; once the
// walk is done the index holds every file, on its disk.
func TestCrashStartFromPeriodicSnapshot(t *testing.T) {
	dir := t.TempDir()
	disks := initDisks(t, dir, t.TempDir(), t.TempDir())
	both := func(c *Config) { c.DataDirs = disks }
	m := origin.NewMem("mem://o")
	for i := range 8 {
		m.Put(fmt.Sprintf("/d/f%02d", i), randomData(uint64(i), 2*testBlock), time.Now())
	}
	c := newTestCache(t, dir, m, both)
	for i := range 8 {
		readAllVia(t, c, fmt.Sprintf("/d/f%02d", i))
	}
	waitIdle(t, c)
	c.writePeriodicSnapshot()
	snap, err := os.ReadFile(filepath.Join(dir, catalog.SnapshotName))
	if err != nil {
		t.Fatal(err)
	}
	moved := Key{Origin: "mem://o", Path: "/d/f03"}
	from, _ := c.catalog.DiskOf(moved)
	c.Close()
	// The crash: what is left is the snapshot written while it ran.
	os.WriteFile(filepath.Join(dir, catalog.SnapshotName), snap, 0o644)
	to := 1 - from
	os.MkdirAll(filepath.Dir(DataPath(disks[to], moved)), 0o755)
	if err := os.Rename(DataPath(disks[from], moved), DataPath(disks[to], moved)); err != nil {
		t.Fatal(err)
	}
	// The load goes through the snapshot (its block of records, then its
	// end: two calls) and is held at the walk's first directory.
	gate := make(chan struct{})
	var calls atomic.Int64
	pace := func(ctx context.Context) error {
		if calls.Add(1) <= 2 {
			return nil
		}
		select {
		case <-gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	c = newTestCache(t, dir, m, func(cfg *Config) { both(cfg); cfg.loadPace = pace })
	<-c.IndexLoaded()
	if st := c.IndexState(); !st.FromSnapshot || !st.Approximate || !st.Walking {
		t.Fatalf("index state %+v", st)
	}
	if info, _ := c.catalog.Lookup(moved); info.Verified || info.Disk != from {
		t.Fatalf("the moved file before the walk: %+v", info)
	}
	before := m.BytesRead.Load()
	if got := readAllVia(t, c, moved.Path); !bytes.Equal(got, randomData(3, 2*testBlock)) {
		t.Fatal("moved file: wrong bytes")
	}
	if d := m.BytesRead.Load() - before; d != 0 {
		t.Fatalf("the moved file was fetched again (%d bytes)", d)
	}
	close(gate)
	<-c.catalog.Done()
	if d, _ := c.catalog.DiskOf(moved); d != to {
		t.Fatalf("moved file on disk %d, want %d", d, to)
	}
	if files, _ := c.catalog.Totals(); files != 8 {
		t.Fatalf("%d files", files)
	}
}
