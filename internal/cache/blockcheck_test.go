package cache

import (
	"bytes"
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/hepcache/hepcache/origin"
)

// TestCorruptBlockOnDiskRefetched: a byte flipped in a cached data file
// (bit rot) is caught by the block's CRC32C when the block is first read:
// the block is fetched again, the client gets the origin's bytes, the
// other blocks come from disk, and a later open checks nothing again.
func TestCorruptBlockOnDiskRefetched(t *testing.T) {
	m, data := memWithFile(9, 6*testBlock)
	dir := t.TempDir()
	warm := newTestCache(t, dir, m, nil)
	readAllVia(t, warm, "/f")
	waitIdle(t, warm)
	warm.Close()

	p := DataPath(dir, Key{Origin: "mem://o", Path: "/f"})
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{data[3*testBlock+17] ^ 0xff}, 3*testBlock+17)
	f.Close()

	c := newTestCache(t, dir, m, nil)
	before := m.BytesRead.Load()
	if got := readAllVia(t, c, "/f"); !bytes.Equal(got, data) {
		t.Fatal("the corrupt block was served")
	}
	if n := m.BytesRead.Load() - before; n != testBlock {
		t.Fatalf("origin sent %d bytes, want the one bad block (%d)", n, testBlock)
	}
	if n := c.Stats().BlocksCorrupt.Load(); n != 1 {
		t.Fatalf("BlocksCorrupt = %d", n)
	}
	if n := c.Stats().BlocksChecked.Load(); n != 5 {
		t.Fatalf("BlocksChecked = %d, want the 5 good blocks", n)
	}
	waitIdle(t, c)
	// Checked once per process: the next open reads without checking, and
	// may use sendfile at once.
	h := openTest(t, c, "/f")
	if _, ok := h.(*handle).OSFile(0, int64(len(data))); !ok {
		t.Fatal("sendfile refused for checked blocks")
	}
	h.Close()
	readAllVia(t, c, "/f")
	if n := c.Stats().BlocksChecked.Load(); n != 5 {
		t.Fatalf("blocks checked again: %d", n)
	}

	// A fresh process with the checks off serves the disk as it is.
	waitIdle(t, c)
	c.Close()
	f, _ = os.OpenFile(p, os.O_RDWR, 0)
	f.WriteAt([]byte{0}, 17)
	f.Close()
	off := newTestCache(t, dir, m, func(c *Config) { c.NoBlockChecksums = true })
	if got := readAllVia(t, off, "/f"); bytes.Equal(got, data) {
		t.Fatal("with checks off the corruption should go unnoticed (the switch does nothing?)")
	}
}

// BenchmarkBlockCheck measures what the per-block CRC32C check costs a hot
// read: each iteration is a fresh cache over a warm directory (a restarted
// server, whose first read of each block is checked) reading a 256 MiB file
// whole, with the check on and off. It reports process CPU seconds per GiB.
//
//	go test ./internal/cache -run '^$' -bench BlockCheck -benchtime 10x
func BenchmarkBlockCheck(b *testing.B) {
	const size = 256 << 20
	m := origin.NewMem("mem://o")
	m.Put("/f", randomData(5, size), time.Now())
	dir := b.TempDir()
	warm := newTestCache(b, dir, m, func(c *Config) { c.BlockSize, c.PieceSize = 1<<20, 128<<10 })
	readAllVia(b, warm, "/f")
	waitIdle(b, warm)
	warm.Close()
	for _, on := range []bool{false, true} {
		name := map[bool]string{false: "off", true: "on"}[on]
		b.Run(name, func(b *testing.B) {
			var cpu float64
			for range b.N {
				c := newTestCache(b, dir, m, func(c *Config) {
					c.BlockSize, c.PieceSize = 1<<20, 128<<10
					c.NoBlockChecksums = !on
				})
				t0 := cpuSeconds()
				f := openTest(b, c, "/f")
				if n, err := f.Stream(context.Background(), 0, size, func([]byte) error { return nil }); err != nil || n != size {
					b.Fatalf("read %d: %v", n, err)
				}
				f.Close()
				cpu += cpuSeconds() - t0
				waitIdle(b, c)
				if on && c.Stats().BlocksChecked.Load() != size>>20 {
					b.Fatalf("checked %d blocks", c.Stats().BlocksChecked.Load())
				}
				c.Close()
			}
			b.ReportMetric(cpu/float64(b.N)*float64(1<<30)/size, "cpu-s/GiB")
			b.SetBytes(size)
		})
	}
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
