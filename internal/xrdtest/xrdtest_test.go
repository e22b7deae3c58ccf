package xrdtest

import (
	"bytes"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestOriginAndXCache(t *testing.T) {
	xrdcp := RequireTool(t, "xrdcp")
	data := t.TempDir()
	want := make([]byte, 3<<20+12345)
	rand.Read(want)
	if err := os.WriteFile(filepath.Join(data, "f.bin"), want, 0o644); err != nil {
		t.Fatal(err)
	}
	origin := StartOrigin(t, data)
	if !strings.HasPrefix(origin.URL, "root://127.0.0.1:") {
		t.Fatalf("URL %q", origin.URL)
	}

	copyVia := func(url string) []byte {
		t.Helper()
		dst := filepath.Join(t.TempDir(), "out")
		out, err := exec.Command(xrdcp, "-f", "-s", url+"//f.bin", dst).CombinedOutput()
		if err != nil {
			t.Fatalf("xrdcp %s: %v\n%s", url, err, out)
		}
		got, err := os.ReadFile(dst)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := copyVia(origin.URL); !bytes.Equal(got, want) {
		t.Fatalf("direct copy: %d bytes differ from the %d written", len(got), len(want))
	}

	cache := StartXCache(t, origin.Addr, t.TempDir(), XCacheOptions{RAM: "1g"})
	for i := 0; i < 2; i++ { // cold, then hot
		if got := copyVia(cache.URL); !bytes.Equal(got, want) {
			t.Fatalf("copy %d through XCache: %d bytes differ from the %d written", i, len(got), len(want))
		}
	}
	if fi, err := os.Stat(filepath.Join(cache.Dir, "f.bin")); err != nil || fi.Size() != int64(len(want)) {
		t.Fatalf("XCache did not store the file: %v %v", fi, err)
	}

	origin.Stop()
	origin.Stop() // idempotent
	cmd := exec.Command(xrdcp, "-f", origin.URL+"//f.bin", filepath.Join(t.TempDir(), "x"))
	cmd.Env = append(os.Environ(), "XRD_CONNECTIONRETRY=1", "XRD_CONNECTIONWINDOW=1")
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("xrdcp from a stopped origin succeeded:\n%s", out)
	}
}
