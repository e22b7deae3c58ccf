package cache

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hepcache/hepcache/disk"
	"github.com/hepcache/hepcache/internal/sidecar"
	"github.com/hepcache/hepcache/origin"
)

// sidecarCounter counts the reads and writes of sidecars through an
// ErrorFS.
type sidecarCounter struct{ reads, writes atomic.Int64 }

func (s *sidecarCounter) fs() *disk.ErrorFS {
	efs := disk.NewErrorFS(disk.OS{})
	efs.OnRead(func(name string, _ int64, _ int) error {
		if strings.HasSuffix(name, ".hcinfo") {
			s.reads.Add(1)
		}
		return nil
	})
	efs.OnWrite(func(name string, _ int64, _ int) error {
		if strings.HasSuffix(name, ".hcinfo") {
			s.writes.Add(1)
		}
		return nil
	})
	return efs
}

func accessesOnDisk(t *testing.T, dir, p string) int {
	t.Helper()
	b, err := os.ReadFile(MetaPath(dir, Key{Origin: "mem://o", Path: p}))
	if err != nil {
		t.Fatal(err)
	}
	in, err := sidecar.Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return int(in.AccessCount)
}

// TestKeptHitReadsAndWritesNoSidecar (issue 35 item 1): a hit of a file
// closed a moment ago reads no sidecar and writes none; its access records
// reach the sidecar at stop. Before, every hit read the sidecar at open
// and wrote it after its close.
func TestKeptHitReadsAndWritesNoSidecar(t *testing.T) {
	m, data := memWithFile(41, 2*testBlock+5)
	dir := t.TempDir()
	var n sidecarCounter
	c := newTestCache(t, dir, m, func(cfg *Config) { cfg.FS = n.fs() })
	readAllVia(t, c, "/f")
	waitIdle(t, c)
	c.syncDirty()
	if n.writes.Load() == 0 {
		t.Fatal("the miss wrote no sidecar")
	}
	fetched := m.BytesRead.Load()
	n.reads.Store(0)
	n.writes.Store(0)
	for range 3 {
		if got := readAllVia(t, c, "/f"); !bytes.Equal(got, data) {
			t.Fatal("hit: wrong bytes")
		}
		waitIdle(t, c)
		c.syncDirty()
	}
	if r, w := n.reads.Load(), n.writes.Load(); r != 0 || w != 0 {
		t.Fatalf("3 hits of a kept file read %d and wrote %d sidecars, want none", r, w)
	}
	if got := m.BytesRead.Load() - fetched; got != 0 {
		t.Fatalf("hits fetched %d bytes", got)
	}
	if got := accessesOnDisk(t, dir, "/f"); got > 1 {
		t.Fatalf("sidecar on disk records %d accesses before stop, want at most the miss's", got)
	}
	c.Close()
	if got := accessesOnDisk(t, dir, "/f"); got != 4 {
		t.Fatalf("sidecar after stop records %d accesses, want 4", got)
	}
}

// TestKeptBoundWritesWhatLeaves: beyond MaxKept the least recently closed
// entry leaves memory with its deferred access records written; its next
// open reads its sidecar again.
func TestKeptBoundWritesWhatLeaves(t *testing.T) {
	m := origin.NewMem("mem://o")
	for i := range 3 {
		m.Put(fmt.Sprintf("/f%d", i), randomData(uint64(50+i), testBlock), time.Now())
	}
	dir := t.TempDir()
	var n sidecarCounter
	c := newTestCache(t, dir, m, func(cfg *Config) { cfg.FS, cfg.MaxKept = n.fs(), 2 })
	read := func(p string) {
		t.Helper()
		readAllVia(t, c, p)
		waitIdle(t, c)
		c.syncDirty()
	}
	read("/f0")
	read("/f0") // a hit: its record deferred (the miss's may be too)
	if got := accessesOnDisk(t, dir, "/f0"); got > 1 {
		t.Fatalf("f0 records %d accesses on disk, want at most 1 (the hit's deferred)", got)
	}
	read("/f1")
	read("/f2") // f0 leaves memory
	if got := accessesOnDisk(t, dir, "/f0"); got != 2 {
		t.Fatalf("f0 left memory recording %d accesses, want 2", got)
	}
	c.mu.Lock()
	kept, f0 := c.keptq.n, c.files[Key{Origin: "mem://o", Path: "/f0"}]
	c.mu.Unlock()
	if kept != 2 || f0 != nil {
		t.Fatalf("%d kept, f0 in memory: %v; want 2, false", kept, f0 != nil)
	}
	n.reads.Store(0)
	read("/f0")
	if n.reads.Load() == 0 {
		t.Fatal("an open of a file no longer kept read no sidecar")
	}
}

// TestKeptEntryNotServedAfterEvict: an evicted file's kept entry goes with
// it: the next open fetches the file again, and a copy removed behind the
// cache's back is fetched again too, never read as zeros.
func TestKeptEntryNotServedAfterEvict(t *testing.T) {
	m, data := memWithFile(43, 2*testBlock)
	dir := t.TempDir()
	c := newTestCache(t, dir, m, nil)
	readAllVia(t, c, "/f")
	waitIdle(t, c)
	c.syncDirty()
	if _, err := c.Evict("mem://o", "/f"); err != nil {
		t.Fatal(err)
	}
	before := m.BytesRead.Load()
	if got := readAllVia(t, c, "/f"); !bytes.Equal(got, data) {
		t.Fatal("after evict: wrong bytes")
	}
	if m.BytesRead.Load() == before {
		t.Fatal("after evict the file was not fetched again")
	}
	waitIdle(t, c)
	c.syncDirty()

	// Removed behind the cache's back while kept.
	k := Key{Origin: "mem://o", Path: "/f"}
	if err := os.Remove(c.dataPath(k)); err != nil {
		t.Fatal(err)
	}
	before = m.BytesRead.Load()
	if got := readAllVia(t, c, "/f"); !bytes.Equal(got, data) {
		t.Fatal("data file removed: wrong bytes")
	}
	if m.BytesRead.Load() == before {
		t.Fatal("data file removed: not fetched again")
	}
}
