package clusterrun

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/eventually"
)

// TestPeerNeverGetsCorruptBlock: in proxy mode an entry node reads a file
// from its owner; the owner's copy is then corrupted on disk and the owner
// restarted (nothing in RAM): the next read through the entry node gets
// the origin's bytes, because the owner checks the block it reads back
// and fetches it again, and the owner counts it.
func TestPeerNeverGetsCorruptBlock(t *testing.T) {
	c, files, _ := startCluster(t, 2, false, func(cfg *Config) { cfg.Mode = "proxy" })
	origin := "root://" + strings.TrimPrefix(c.cfg.Origin, "root://")
	var p string
	for p = range files {
		break
	}
	owner := ranking(c, origin, p)[0]
	var own, entry *Node
	for _, n := range c.Nodes {
		if n.Name == owner {
			own = n
		} else {
			entry = n
		}
	}
	if got, out, err := xrdcp(t, entry.Root, p); err != nil || got != files[p] {
		t.Fatalf("cold read through the entry node: %v %s", err, out)
	}
	dataFile := cache.DataPath(own.CacheDir, cache.Key{Origin: origin, Path: p})
	eventually.True(t, func() bool {
		in, err := cache.Inspect(own.CacheDir, origin, p)
		return err == nil && len(in) == 1 && in[0].Complete()
	}, "the owner to hold %s complete", p)
	if _, err := os.Stat(dataFile); err != nil {
		t.Fatalf("the owner's data file: %v", err)
	}
	f, err := os.OpenFile(dataFile, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("bit rot"), 1000)
	f.Close()
	if err := c.Restart(own); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got, out, err := xrdcp(t, entry.Root, p); err != nil || got != files[p] {
		t.Fatalf("read through the entry node after corruption at the owner: %v %s (sha256 right: %v)", err, out, got == files[p])
	}
	if n, err := own.Metric("hepcache_blocks_corrupt_total"); err != nil || n != 1 {
		t.Fatalf("owner's hepcache_blocks_corrupt_total %v (%v), want 1", n, err)
	}
	if n, _ := entry.Metric("hepcache_blocks_corrupt_total"); n != 0 {
		t.Fatalf("the entry node counted %v corrupt blocks; it holds none", n)
	}
}
