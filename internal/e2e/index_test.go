package e2e

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/catalog"
	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/wan"
	"github.com/hepcache/hepcache/internal/xrdtest"
)

// TestIndexAcrossRestarts (issue 35 item 2): a clean stop writes the index
// of cached files and the next start loads it from there, without reading
// a sidecar; after a kill -9 the snapshot left is an approximation (the
// start marked it used), which the next start loads and then corrects by
// reading the sidecars written since, and the data file a crash left
// without a sidecar is removed in the background. After each restart
// every file is a byte-exact hit, and /metrics gives the index's files and
// bytes.
func TestIndexAcrossRestarts(t *testing.T) {
	realclient.Require(t, "xrdcp")
	data := t.TempDir()
	const files, size = 30, 96 << 10
	sums := make([][32]byte, files)
	for i := range sums {
		sums[i] = writeFile(t, data, fmt.Sprintf("store/idx/f%02d.root", i), size, uint64(300+i))
	}
	origin := xrdtest.StartOrigin(t, data)
	link, err := wan.New(&wan.Config{Target: origin.Addr})
	if err != nil {
		t.Fatal(err)
	}
	defer link.Close()
	cacheDir := t.TempDir()
	mAddr := freeAddr(t)
	metrics := "http://" + mAddr + "/metrics"
	args := []string{"--cache-dir", cacheDir, "--origin", "root://" + link.Addr().String(), "--metrics-listen", mAddr}
	url := func(p *proc, i int) string { return fmt.Sprintf("root://%s//store/idx/f%02d.root", p.addr, i) }
	readAll := func(p *proc) {
		t.Helper()
		for i := range files {
			r := realclient.MustRun(t, realclient.Env(), "xrdcp", "-s", "-f", url(p, i), "-")
			if got := sha256.Sum256(r.Stdout); got != sums[i] {
				t.Fatalf("file %d: sha256 %s, want %s", i, hex(got), hex(sums[i]))
			}
		}
	}
	loaded := func(p *proc) {
		t.Helper()
		eventually.True(t, func() bool { return metric(t, metrics, "hepcache_index_loading") == 0 }, "the index loaded")
		if n := metric(t, metrics, "hepcache_index_files"); n != files {
			t.Fatalf("hepcache_index_files %v, want %d", n, files)
		}
		if b := metric(t, metrics, "hepcache_index_bytes"); b <= 0 {
			t.Fatalf("hepcache_index_bytes %v", b)
		}
	}
	hits := func(p *proc) {
		t.Helper()
		before := link.Quiet(300 * time.Millisecond)
		readAll(p)
		if d := link.Stats.BytesDown.Load() - before; d != 0 {
			t.Fatalf("hits after the restart moved %d bytes from the origin", d)
		}
	}

	p := startProc(t, args...)
	readAll(p)
	p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.done
	if !strings.Contains(p.log.String(), "cache index written for the next start") {
		t.Fatalf("no snapshot written at the clean stop:\n%s", p.log.String())
	}
	if _, err := os.Stat(filepath.Join(cacheDir, catalog.SnapshotName)); err != nil {
		t.Fatal(err)
	}

	// A clean restart: the index from its snapshot.
	p = startProc(t, args...)
	hits(p)
	loaded(p)
	if !strings.Contains(p.log.String(), "cache index loading from its snapshot") {
		t.Fatalf("the clean restart did not load the snapshot:\n%s", p.log.String())
	}

	// A crash, and a data file left without a sidecar (a miss whose first
	// block never became durable), next to the others.
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	var orphan string
	filepath.WalkDir(filepath.Join(cacheDir, "data"), func(q string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "f00.root" {
			orphan = filepath.Join(filepath.Dir(q), "orphan.root")
		}
		return nil
	})
	if orphan == "" {
		t.Fatal("no data file of f00.root under the cache")
	}
	os.WriteFile(orphan, make([]byte, 4096), 0o644)
	p = startProc(t, args...)
	hits(p)
	loaded(p)
	if !strings.Contains(p.log.String(), "the last run did not stop cleanly") {
		t.Fatalf("after a kill -9 the index was trusted as exact:\n%s", p.log.String())
	}
	eventually.True(t, func() bool { _, err := os.Stat(orphan); return os.IsNotExist(err) }, "the orphan data file removed")
}
