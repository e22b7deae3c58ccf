package cache

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hepcache/hepcache/internal/blockstore"
	"github.com/hepcache/hepcache/internal/nodemem"
)

// fakeNode is a node of 1 GiB whose available memory the test sets.
type fakeNode struct {
	root string
}

func newFakeNode(tb testing.TB) *fakeNode {
	tb.Helper()
	n := &fakeNode{root: tb.TempDir()}
	os.MkdirAll(filepath.Join(n.root, "proc/self"), 0o755)
	os.WriteFile(filepath.Join(n.root, "proc/self/cgroup"), []byte("0::/\n"), 0o644)
	n.set(tb, 900<<20, 0)
	return n
}

// set writes the node's available memory and its PSI stall share.
func (n *fakeNode) set(tb testing.TB, avail int64, stall float64) {
	tb.Helper()
	mi := fmt.Sprintf("MemTotal: %d kB\nMemFree: %d kB\nMemAvailable: %d kB\n", 1<<20, avail>>10, avail>>10)
	os.WriteFile(filepath.Join(n.root, "proc/meminfo"), []byte(mi), 0o644)
	os.MkdirAll(filepath.Join(n.root, "proc/pressure"), 0o755)
	os.WriteFile(filepath.Join(n.root, "proc/pressure/memory"), []byte(fmt.Sprintf("some avg10=%.2f avg60=0.00 avg300=0.00 total=1\n", stall)), 0o644)
}

// TestPressureHandsMemoryBack: with the RAM cache full, the node running
// short of memory (MemAvailable under the headroom, or tasks stalled on
// memory) makes the cache hand memory back at once; reads stay right;
// when memory is free again the limit goes back up.
func TestPressureHandsMemoryBack(t *testing.T) {
	node := newFakeNode(t)
	m, data := memWithFile(3, 60*testBlock)
	c := newTestCache(t, t.TempDir(), m, func(cfg *Config) {
		cfg.RAM, cfg.FetchMemory = 64*testBlock, 8*testBlock
		cfg.Node = nodemem.Node{Root: node.root}
		cfg.NoPressureWatch = true // the test steps the watch itself
	})
	w := c.newPressureWatch()
	if w == nil {
		t.Fatal("no pressure watch on the fake node")
	}
	readAllVia(t, c, "/f")
	waitIdle(t, c)
	full := c.store.Usage()
	if full.Cached < 50 {
		t.Fatalf("the file did not stay in RAM: %+v", full)
	}
	// Tasks stalled on memory (PSI): an eighth goes.
	node.set(t, 600<<20, 40)
	if !w.step() {
		t.Fatal("tasks stalled on memory, yet the watch does not watch closely")
	}
	u := c.store.Usage()
	if u.Limit >= full.Slots || u.Cold <= full.Cold || c.store.Stats().HandedBack.Load() == 0 || c.Stats().RAMHandBacks.Load() != 1 {
		t.Fatalf("nothing handed back: before %+v, after %+v", full, u)
	}
	// Short of memory: 100 MiB available, under the 256 MiB headroom:
	// down to the fewest slots.
	node.set(t, 100<<20, 0)
	w.step()
	u = c.store.Usage()
	if u.Slots-u.Cold > blockstore.MinSlots {
		t.Fatalf("memory short, %d slots still hold memory: %+v", u.Slots-u.Cold, u)
	}
	if got := readAllVia(t, c, "/f"); !bytes.Equal(got, data) {
		t.Fatal("read under pressure differs from the origin")
	}
	if u2 := c.store.Usage(); u2.Slots-u2.Cold > u.Limit {
		t.Fatalf("slots took memory beyond the limit under pressure: %+v", u2)
	}
	// Free again: the limit rises back to the whole arena.
	node.set(t, 900<<20, 0)
	for range 20 {
		w.step()
	}
	if u := c.store.Usage(); u.Limit != u.Slots {
		t.Fatalf("memory free again, limit stays at %d of %d", u.Limit, u.Slots)
	}
}
