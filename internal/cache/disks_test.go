package cache

import (
	"bytes"
	"fmt"
	"github.com/hepcache/hepcache/internal/realclient"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/catalog"
	"github.com/hepcache/hepcache/origin"
)

// filesUnder counts the regular files under dir.
func filesUnder(dir string) int {
	n := 0
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return nil
	})
	return n
}

// initDisks takes disks into service for the cache in dir (hepcache disk
// init) and returns them.
func initDisks(tb testing.TB, dir string, disks ...string) []string {
	tb.Helper()
	for _, d := range disks {
		if _, err := InitDataDir(dir, d); err != nil {
			tb.Fatal(err)
		}
	}
	return disks
}

// TestDataDirsPlacementAndRestart: new files spread over the data disks
// (none under the metadata directory), a restart finds every file on its
// disk and serves it without the origin, a data file no sidecar claims is
// removed, and a sidecar whose data vanished is dropped.
func TestDataDirsPlacementAndRestart(t *testing.T) {
	m := origin.NewMem("mem://o")
	for i := range 6 {
		m.Put(fmt.Sprintf("/f%d", i), randomData(uint64(i), 3*testBlock+i), time.Now())
	}
	dir := t.TempDir()
	disks := initDisks(t, dir, t.TempDir(), t.TempDir(), t.TempDir())
	withDisks := func(c *Config) { c.DataDirs = disks }
	c := newTestCache(t, dir, m, withDisks)
	for i := range 6 {
		readAllVia(t, c, fmt.Sprintf("/f%d", i))
	}
	waitIdle(t, c)
	for i, d := range disks {
		if n := filesUnder(filepath.Join(d, "data")); n == 0 {
			t.Errorf("disk %d holds no file (placement by free space spreads them)", i)
		}
	}
	if n := filesUnder(filepath.Join(dir, "data")); n != 0 {
		t.Fatalf("%d data files under the metadata directory", n)
	}
	u := c.Disks()
	if len(u) != 3 || u[0].Files+u[1].Files+u[2].Files != 6 || !u[1].Up || u[1].Total <= 0 {
		t.Fatalf("Disks() = %+v", u)
	}
	c.Close()

	// An orphan on disk 2, and the data of f0 gone.
	orphan := filepath.Join(disks[2], "data", catalog.OriginDir("mem://o"), "orphan")
	os.WriteFile(orphan, []byte("x"), 0o644)
	id, _ := c.catalog.DiskOf(Key{Origin: "mem://o", Path: "/f0"})
	os.Remove(filepath.Join(disks[id], "data", catalog.OriginDir("mem://o"), "f0"))

	c = newTestCache(t, dir, m, withDisks)
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Fatalf("orphan data file survived the restart: %v", err)
	}
	if _, ok := c.catalog.DiskOf(Key{Origin: "mem://o", Path: "/f0"}); ok {
		t.Fatal("a file whose data vanished is still indexed")
	}
	before := m.BytesRead.Load()
	for i := 1; i < 6; i++ {
		got := readAllVia(t, c, fmt.Sprintf("/f%d", i))
		if !bytes.Equal(got, randomData(uint64(i), 3*testBlock+i)) {
			t.Fatalf("f%d after restart: wrong bytes", i)
		}
	}
	if after := m.BytesRead.Load(); after != before {
		t.Fatalf("reads after restart fetched %d bytes from the origin", after-before)
	}
}

// TestDiskTakenOut: a data disk remounted read-only, then one unmounted,
// are taken out of service; their files are forgotten and fetched again
// onto the disks left; with no disk left, reads come from the origin
// uncached. Every read returns the right bytes.
func TestDiskTakenOut(t *testing.T) {
	m := origin.NewMem("mem://o")
	data := map[string][]byte{}
	for i := range 4 {
		p := fmt.Sprintf("/f%d", i)
		data[p] = randomData(uint64(10+i), 5*testBlock)
		m.Put(p, data[p], time.Now())
	}
	d0, d1 := realclient.Tmpfs(t, "64m"), realclient.Tmpfs(t, "64m")
	dir := t.TempDir()
	c := newTestCache(t, dir, m, func(c *Config) { c.DataDirs = initDisks(t, dir, d0, d1) })
	readAll := func() {
		t.Helper()
		for p, want := range data {
			if got := readAllVia(t, c, p); !bytes.Equal(got, want) {
				t.Fatalf("%s: wrong bytes", p)
			}
		}
		waitIdle(t, c)
	}
	readAll()
	u := c.Disks()
	if u[0].Files == 0 || u[1].Files == 0 {
		t.Fatalf("placement: %+v", u)
	}
	onD0 := int64(u[0].Files)

	if out, err := exec.Command("mount", "-o", "remount,ro", d0).CombinedOutput(); err != nil {
		t.Fatalf("remount ro: %v %s", err, out)
	}
	c.CheckDisks()
	u = c.Disks()
	if u[0].Up || u[0].Reason == "" || u[0].Files != 0 || !u[1].Up {
		t.Fatalf("after remount ro: %+v", u)
	}
	if got := c.Stats().DisksFailed.Load(); got != 1 {
		t.Fatalf("DisksFailed = %d", got)
	}
	before := m.BytesRead.Load()
	readAll()
	if fetched := m.BytesRead.Load() - before; fetched != onD0*5*testBlock {
		t.Fatalf("refetched %d bytes, want the %d files of the read-only disk (%d)", fetched, onD0, onD0*5*testBlock)
	}
	if u := c.Disks(); u[1].Files != 4 {
		t.Fatalf("the disk left holds %d files, want 4", u[1].Files)
	}

	// Unmounted: the mount point is a bare directory on another device.
	if out, err := exec.Command("umount", "-l", d1).CombinedOutput(); err != nil {
		t.Fatalf("umount: %v %s", err, out)
	}
	c.CheckDisks()
	if u := c.Disks(); u[1].Up {
		t.Fatalf("unmounted disk still in service: %+v", u)
	}
	before = m.BytesRead.Load()
	readAll()
	if fetched := m.BytesRead.Load() - before; fetched != 4*5*testBlock {
		t.Fatalf("with no disk, the origin sent %d bytes, want every file (%d)", fetched, 4*5*testBlock)
	}
	if n := filesUnder(d1); n != 0 {
		t.Fatalf("%d files written into the bare mount point", n)
	}
}

// TestPurgePerDisk: a disk over its high watermark is purged from its own
// least recently used files, down to its low watermark, while the other
// disk, under its watermark, keeps all of its files.
func TestPurgePerDisk(t *testing.T) {
	m := origin.NewMem("mem://o")
	const size = 1 << 20
	d0, d1 := realclient.Tmpfs(t, "64m"), realclient.Tmpfs(t, "64m")
	dir := t.TempDir()
	c := newTestCache(t, dir, m, func(c *Config) {
		c.DataDirs = initDisks(t, dir, d0, d1)
		c.HighWatermark, c.LowWatermark = 0.06, 0.04 // of 64 MiB: 3.84 and 2.56 MiB
		c.PurgeInterval = time.Hour
	})
	// Five files on d0 (d1 is made to look full while they are placed),
	// then one on d1.
	c.disks[1].placed.Store(1 << 40)
	for i := range 5 {
		p := fmt.Sprintf("/a%d", i)
		m.Put(p, randomData(uint64(i), size), time.Now().Add(time.Duration(i)*time.Second))
		readAllVia(t, c, p)
		waitIdle(t, c)
	}
	c.disks[1].placed.Store(0)
	c.disks[0].placed.Store(1 << 40)
	m.Put("/b", randomData(9, size), time.Now())
	readAllVia(t, c, "/b")
	waitIdle(t, c)
	if u := c.Disks(); u[0].Files != 5 || u[1].Files != 1 {
		t.Fatalf("setup: %+v", u)
	}
	c.Purge()
	u := c.Disks()
	if u[1].Files != 1 {
		t.Fatalf("the disk under its watermark lost files: %+v", u[1])
	}
	if u[0].Files >= 5 || u[0].Used > u[0].High {
		t.Fatalf("the disk over its watermark: %+v", u[0])
	}
	for i := range 5 - u[0].Files { // the oldest went first
		if _, ok := c.catalog.DiskOf(Key{Origin: "mem://o", Path: fmt.Sprintf("/a%d", i)}); ok {
			t.Fatalf("/a%d (older) survived while newer files were evicted", i)
		}
	}
}

// TestPurgePerDiskSizes (issue 34 item 7): watermarks given as sizes (as
// from-xcache translates pfc.diskusage 24m 32m) are the whole cache's, and
// each of two data disks (real tmpfs) keeps its share, half of them:
// Disks reports it, and a purge brings the disk over its share down to its
// low watermark while the other keeps its files. Before, the disks had no
// watermarks (0) and purge compared the sum alone: the full disk stayed
// full.
func TestPurgePerDiskSizes(t *testing.T) {
	m := origin.NewMem("mem://o")
	const size = 2 << 20
	d0, d1 := realclient.Tmpfs(t, "64m"), realclient.Tmpfs(t, "64m")
	dir := t.TempDir()
	c := newTestCache(t, dir, m, func(c *Config) {
		c.DataDirs = initDisks(t, dir, d0, d1)
		c.HighWatermark, c.LowWatermark = 32<<20, 24<<20 // each disk: 16 and 12 MiB
		c.PurgeInterval = time.Hour
	})
	for _, u := range c.Disks() {
		if u.High != 16<<20 || u.Low != 12<<20 {
			t.Fatalf("disk %s: watermarks %d and %d, want its half of the sizes, 16 and 12 MiB", u.Dir, u.High, u.Low)
		}
	}
	// Nine files on d0 (d1 is made to look full while they are placed):
	// 18 MiB, over d0's share; then one on d1.
	c.disks[1].placed.Store(1 << 40)
	for i := range 9 {
		p := fmt.Sprintf("/a%d", i)
		m.Put(p, randomData(uint64(i), size), time.Now().Add(time.Duration(i)*time.Second))
		readAllVia(t, c, p)
		waitIdle(t, c)
	}
	c.disks[1].placed.Store(0)
	c.disks[0].placed.Store(1 << 40)
	m.Put("/b", randomData(19, size), time.Now())
	readAllVia(t, c, "/b")
	waitIdle(t, c)
	if u := c.Disks(); u[0].Files != 9 || u[1].Files != 1 || u[0].Used <= u[0].High {
		t.Fatalf("setup: %+v", u)
	}
	c.Purge()
	u := c.Disks()
	if u[1].Files != 1 {
		t.Fatalf("the disk under its share lost files: %+v", u[1])
	}
	if u[0].Used > u[0].Low {
		t.Fatalf("the disk over its share: %d bytes used after purge, its low watermark %d: %+v", u[0].Used, u[0].Low, u[0])
	}
}

// TestDiskAbsentAtStart (issue 21 item 3, issue 29 item 3): a data
// directory never initialised is refused, naming it and `hepcache disk
// init`; a recorded data disk (a real tmpfs) not mounted at start-up
// leaves a bare directory: the cache starts without it (out of service,
// with why), serves from the other disk and writes nothing there; a marker
// copied onto the bare directory or another file system mounted there
// keep it out too; once initialised, it is used.
func TestDiskAbsentAtStart(t *testing.T) {
	m := origin.NewMem("mem://o")
	want := randomData(7, 3*testBlock)
	m.Put("/f", want, time.Now())
	dir := t.TempDir()
	d0 := realclient.Tmpfs(t, "16m")
	d1 := t.TempDir()
	cfg := func(c *Config) { c.DataDirs = []string{d0, d1} }
	if _, err := New(&Config{Dir: dir, Origins: singleOrigin(m), BlockSize: testBlock, PieceSize: testPiece, DataDirs: []string{d0, d1}}); err == nil ||
		!strings.Contains(err.Error(), "hepcache disk init") || !strings.Contains(err.Error(), d0) {
		t.Fatalf("start with data dirs never initialised: %v", err)
	}
	initDisks(t, dir, d0, d1)
	c := newTestCache(t, dir, m, cfg)
	readAllVia(t, c, "/f")
	c.Close()

	// startOut starts the cache and expects d0 out of service for why.
	startOut := func(why string) {
		t.Helper()
		c := newTestCache(t, dir, m, cfg)
		defer c.Close()
		u := c.Disks()
		if u[0].Up || !strings.Contains(u[0].Reason, why) || !u[1].Up {
			t.Fatalf("start with d0 %s: %+v", why, u)
		}
		if got := readAllVia(t, c, "/f"); !bytes.Equal(got, want) {
			t.Fatal("wrong bytes with a disk out of service")
		}
		waitIdle(t, c)
	}
	if out, err := exec.Command("umount", d0).CombinedOutput(); err != nil {
		t.Fatalf("umount: %v %s", err, out)
	}
	startOut("not mounted")
	if ents, _ := os.ReadDir(d0); len(ents) != 0 {
		t.Fatalf("the cache wrote into the bare mount point: %v", ents)
	}
	// A copy of the marker on the bare directory: another device.
	recs, _ := readDiskRecords(dir)
	os.WriteFile(filepath.Join(d0, diskMarker), []byte(recs[d0].Marker), 0o644)
	startOut("recorded on")
	os.Remove(filepath.Join(d0, diskMarker))
	// Another, empty, file system mounted there.
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16m,mode=0755", "tmpfs", d0).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v %s", err, out)
	}
	startOut("no marker")
	initDisks(t, dir, d0)
	c = newTestCache(t, dir, m, cfg)
	defer c.Close()
	if u := c.Disks(); !u[0].Up {
		t.Fatalf("after disk init: %+v", u)
	}
}

// bindMount mounts src at a new directory; the returned functions unmount
// it (lazily: a cache serving from it keeps it busy) and mount it again (a
// disk unplugged and plugged back: its files and device are kept, the mount
// point is a bare directory meanwhile).
func bindMount(tb testing.TB, src string) (dir string, unmount, mount func()) {
	tb.Helper()
	dir = tb.TempDir()
	run := func(args ...string) {
		tb.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			tb.Fatalf("%v: %v %s", args, err, out)
		}
	}
	mount = func() { run("mount", "--bind", src, dir) }
	unmount = func() { run("umount", "-l", dir) }
	mount()
	tb.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir, unmount, mount
}

// TestDiskBackTakesItsFiles (issue 29 item 3): a data disk not mounted at
// start-up is taken back when it is mounted again (CheckDisks: the server
// runs it every few seconds and on reload) with the files on it that no
// other copy replaced meanwhile, read again without the origin; a file
// fetched again meanwhile keeps its new copy and the old one is removed;
// nothing stays on the disk outside the index. The same holds for a disk
// dropped from data_dirs and added back, and for one unmounted while
// serving.
func TestDiskBackTakesItsFiles(t *testing.T) {
	m := origin.NewMem("mem://o")
	data := map[string][]byte{}
	for i := range 6 {
		p := fmt.Sprintf("/f%d", i)
		data[p] = randomData(uint64(30+i), 3*testBlock)
		m.Put(p, data[p], time.Now())
	}
	dir := t.TempDir()
	d0, unmount, mount := bindMount(t, realclient.Tmpfs(t, "32m"))
	d1 := realclient.Tmpfs(t, "32m")
	both := func(c *Config) { c.DataDirs = []string{d0, d1} }
	initDisks(t, dir, d0, d1)
	readAll := func(c *Cache) {
		t.Helper()
		for p, want := range data {
			if got := readAllVia(t, c, p); !bytes.Equal(got, want) {
				t.Fatalf("%s: wrong bytes", p)
			}
		}
		waitIdle(t, c)
	}
	// accounted checks that every data file on the disks is in the index,
	// on its disk.
	accounted := func(c *Cache) {
		t.Helper()
		u := c.Disks()
		for i, d := range []string{d0, d1} {
			if n := filesUnder(filepath.Join(d, "data")); u[i].Up && n != u[i].Files {
				t.Fatalf("disk %s holds %d data files, the index %d", d, n, u[i].Files)
			}
		}
	}
	c := newTestCache(t, dir, m, both)
	readAll(c)
	onD0 := c.Disks()[0].Files
	if onD0 < 2 {
		t.Fatalf("placement left %d files on d0", onD0)
	}
	var first string // a file on d0, read while d0 is out
	for p := range data {
		if id, _ := c.catalog.DiskOf(Key{Origin: "mem://o", Path: p}); id == 0 {
			first = p
			break
		}
	}
	c.Close()

	unmount()
	c = newTestCache(t, dir, m, both)
	if u := c.Disks(); u[0].Up {
		t.Fatalf("d0 unmounted, in service: %+v", u)
	}
	readAllVia(t, c, first) // fetched again, onto d1
	waitIdle(t, c)
	c.CheckDisks()
	if u := c.Disks(); u[0].Up {
		t.Fatalf("still unmounted, taken back: %+v", u)
	}
	mount()
	c.CheckDisks()
	u := c.Disks()
	if !u[0].Up || u[0].Files != onD0-1 {
		t.Fatalf("mounted again: %+v, want d0 in service with %d files", u, onD0-1)
	}
	accounted(c)
	before := m.BytesRead.Load()
	readAll(c)
	if got := m.BytesRead.Load() - before; got != 0 {
		t.Fatalf("the files taken back were fetched again (%d bytes)", got)
	}
	// Unmounted while serving, then mounted again.
	unmount()
	c.CheckDisks()
	if u := c.Disks(); u[0].Up || u[0].Files != 0 {
		t.Fatalf("unmounted while serving: %+v", u)
	}
	mount()
	c.CheckDisks()
	if u := c.Disks(); !u[0].Up || u[0].Files != onD0-1 {
		t.Fatalf("mounted again while serving: %+v", u)
	}
	accounted(c)
	c.Close()

	// Dropped from data_dirs for a while, then added back.
	c = newTestCache(t, dir, m, func(c *Config) { c.DataDirs = []string{d1} })
	readAll(c)
	c.Close()
	c = newTestCache(t, dir, m, both)
	defer c.Close()
	accounted(c)
	before = m.BytesRead.Load()
	readAll(c)
	if got := m.BytesRead.Load() - before; got != 0 {
		t.Fatalf("after d0 was added back, the origin sent %d bytes", got)
	}
	accounted(c)
}
