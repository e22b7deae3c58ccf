package catalog

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hepcache/hepcache/disk"
)

// benchKey is the i-th key of the catalogue benchmarks, named as `hepcache
// bench files` names its files, with pad extra bytes of path.
func benchKey(i, pad int) Key {
	return Key{Origin: "root://127.0.0.1:1094", Path: fmt.Sprintf("/files/d%03d/%sf%06d.dat", i/1000, strings.Repeat("p", pad), i)}
}

// fill returns a catalogue of n files (per-directory statistics as the
// cache's defaults: 2 components, at most 1000), the most recently opened
// last.
func fill(n, pad int) *Catalog {
	c := New(Config{DirStatsDepth: 2, DirStatsMax: 1000})
	t := time.Unix(1_800_000_000, 0)
	for i := 0; i < n; i++ {
		k := benchKey(i, pad)
		c.Opened(k, 4096, t.Add(time.Duration(i)*time.Millisecond), 0, false)
		c.Closed(k, t.Add(time.Duration(i)*time.Millisecond))
	}
	return c
}

func heapAlloc() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestMemoryAccounting (issue 35 item 5): the catalogue's own count of its
// memory (hepcache_index_bytes) is what the Go heap holds for it, within
// 10 %, and a file of the benchmark's short paths costs at most 150 bytes;
// each byte more of path costs one more.
func TestMemoryAccounting(t *testing.T) {
	const n = 200_000
	for _, pad := range []int{0, 100} {
		before := heapAlloc()
		c := fill(n, pad)
		heap := int64(heapAlloc() - before)
		acc := c.MemoryBytes()
		if r := float64(acc) / float64(heap); r < 0.9 || r > 1.1 {
			t.Errorf("path +%d: the catalogue counts %d bytes, the heap grew by %d (%.2f)", pad, acc, heap, r)
		}
		per := float64(acc) / n
		t.Logf("path of %d bytes: %.1f bytes a file by its count, %.1f by the heap", len(benchKey(0, pad).Path), per, float64(heap)/n)
		if pad == 0 && per > 150 {
			t.Errorf("%.1f bytes a file, want at most 150", per)
		}
		runtime.KeepAlive(c)
	}
}

// BenchmarkCatalog measures the catalogue at 10^6 files: bytes a file, a
// snapshot's write and load, and the load of the same files from their
// sidecars (run with -benchtime=1x; the sidecar part writes 10^6 small
// files under the temporary directory, so -short leaves it out).
func BenchmarkCatalog(b *testing.B) {
	const n = 1_000_000
	for range b.N {
		dir := b.TempDir()
		before := heapAlloc()
		start := time.Now()
		c := fill(n, 0)
		add := time.Since(start)
		heap := heapAlloc() - before
		disks := []Disk{{Root: dir, Marker: "m0"}}
		start = time.Now()
		if err := c.WriteSnapshot(disk.OS{}, dir, disks, true); err != nil {
			b.Fatal(err)
		}
		write := time.Since(start)
		st, _ := os.Stat(filepath.Join(dir, SnapshotName))
		b.ReportMetric(float64(c.MemoryBytes())/n, "bytes/file")
		b.ReportMetric(float64(heap)/n, "heap-bytes/file")
		b.ReportMetric(float64(add.Nanoseconds())/n, "add-ns/file")
		b.ReportMetric(float64(write.Nanoseconds())/n, "snapshot-write-ns/file")
		b.ReportMetric(float64(st.Size())/n, "snapshot-bytes/file")
		c = nil
		runtime.GC()
		// The load from the snapshot; the walk that follows finds no
		// trees (none were written): it forgets every file.
		c2 := New(Config{DirStatsDepth: 2, DirStatsMax: 1000})
		start = time.Now()
		c2.Load(context.Background(), LoadConfig{FS: disk.OS{}, Dir: dir, Disks: disks, Logger: slog.New(slog.DiscardHandler)})
		<-c2.Ready()
		b.ReportMetric(float64(time.Since(start).Nanoseconds())/n, "snapshot-load-ns/file")
		if p := c2.Progress(); p.Loaded != n {
			b.Fatalf("%d files loaded", p.Loaded)
		}
		<-c2.Done()
	}
}
