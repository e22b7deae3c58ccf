package trace

import (
	"bytes"
	"github.com/hepcache/hepcache/internal/eventually"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/xrdtest"
)

// TestReadGStreamFromXCache reads what a real XCache 5.5.3 sends: the proxy
// file cache's g-stream (xrootd.mongstream pfc ... send json) collected from
// UDP while xrdcp reads two files through the cache, one of them twice.
func TestReadGStreamFromXCache(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real xrootd servers")
	}
	xrdcp := xrdtest.RequireTool(t, "xrdcp")
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var mu sync.Mutex // protects collected
	var collected bytes.Buffer
	go func() {
		buf := make([]byte, 1<<16)
		for {
			n, _, err := conn.ReadFrom(buf)
			if err != nil {
				return
			}
			mu.Lock()
			collected.Write(buf[:n]) // stored as received: header line, records, NUL
			mu.Unlock()
		}
	}()

	data := t.TempDir()
	sizes := map[string]int{"/a.root": 3<<20 + 17, "/b.root": 1 << 20}
	for name, n := range sizes {
		if err := os.WriteFile(filepath.Join(data, name), bytes.Repeat([]byte{'x'}, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	origin := xrdtest.StartOrigin(t, data)
	cache := xrdtest.StartXCache(t, origin.Addr, t.TempDir(), xrdtest.XCacheOptions{
		Config: []string{"xrootd.mongstream pfc use flush 1s send json dflthdr " + conn.LocalAddr().String()},
	})
	for _, name := range []string{"/a.root", "/b.root", "/a.root"} {
		out, err := exec.Command(xrdcp, "-f", "-s", cache.URL+"/"+name, "/dev/null").CombinedOutput()
		if err != nil {
			t.Fatalf("xrdcp %s: %v\n%s", name, err, out)
		}
	}
	// XCache closes its file after the client and flushes the stream every
	// second; it may hold a file open longer, so take what arrived in 15 s.
	var raw string
	eventually.Within(15*time.Second, func() bool {
		mu.Lock()
		raw = collected.String()
		mu.Unlock()
		return strings.Count(raw, `"file_close"`) >= 3
	})
	records := strings.Count(raw, `"file_close"`)
	if records == 0 {
		t.Fatalf("XCache sent no file_close record in 15 s:\n%q", raw)
	}
	if os.Getenv("HEPCACHE_SHOW_GSTREAM") != "" || records < 3 {
		t.Logf("collected %d file_close records:\n%q", records, raw)
	}
	path := filepath.Join(t.TempDir(), "gstream.log")
	if err := os.WriteFile(path, []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := ReadFile(path, Options{MaxBadFraction: -1})
	if err != nil {
		t.Fatalf("read the collected g-stream: %v\n%q", err, raw)
	}
	if tr.Info.Format != FormatGStream || tr.Len() != records || tr.Info.Bad != 0 {
		t.Fatalf("read %+v: %d accesses, XCache sent %d records", tr.Info, tr.Len(), records)
	}
	for i, f := range tr.File {
		name := tr.Name[f]
		if want := int64(sizes[name]); tr.Size[f] != want || tr.Bytes[i] != want {
			t.Errorf("access %d of %s: size %d, bytes %d, want %d", i, name, tr.Size[f], tr.Bytes[i], want)
		}
	}
}
