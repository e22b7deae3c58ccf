package realclient

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEnvDropsClientSettings(t *testing.T) {
	t.Setenv("XRD_PLUGIN", "/tmp/x.so")
	t.Setenv("XROOT_PROXY", "root://x//")
	env := Env("XRD_CPUSEPGWRTRD=0")
	joined := strings.Join(env, "\n")
	if strings.Contains(joined, "XRD_PLUGIN=") || strings.Contains(joined, "XROOT_PROXY=") {
		t.Fatalf("Env kept the caller's client settings:\n%s", joined)
	}
	if !strings.Contains(joined, "XRD_CPUSEPGWRTRD=0") {
		t.Fatalf("Env lost the extra setting")
	}
}

// TestStartXrootd checks the C++ server helper by copying a file from it
// with xrdcp.
func TestStartXrootd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real xrootd")
	}
	xrdcp := Require(t, "xrdcp")
	dir := t.TempDir()
	data := bytes.Repeat([]byte("hepcache"), 10000)
	if err := os.WriteFile(filepath.Join(dir, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	x := StartXrootd(t, dir)
	r := MustRun(t, Env(), xrdcp, "-s", x.URL+"//f", "-")
	if !bytes.Equal(r.Stdout, data) {
		t.Fatalf("xrdcp from xrootd: %d bytes, want %d", len(r.Stdout), len(data))
	}
}
