package e2e

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCheckMode: `hepcache check` (and `serve --check`) reports every
// problem of a configuration at once, each with its key, binds no port
// (the listen address is taken by the test) and sends no monitoring
// packet; a good configuration passes with exit status 0.
func TestCheckMode(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hepcache.toml")
	good := `[server]
listen = "` + ln.Addr().String() + `"
[cache]
dir = "` + dir + `/cache"
[space]
max_age = "30d"
[origin]
default = "127.0.0.1:21094"
[monitor]
destination = "` + udp.LocalAddr().String() + `"
`
	os.WriteFile(cfg, []byte(good), 0o644)
	for _, args := range [][]string{{"check", "--config", cfg}, {"serve", "--check", "--config", cfg}} {
		out, err := exec.Command(hepcacheBin, args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "configuration OK") {
			t.Fatalf("hepcache %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	bad := strings.Replace(good, "[space]\n", "[space]\ncapacity = \"0.5\"\nwatermarks = \"90,95\"\n", 1) +
		"[cache]\n" // a duplicate table: the file does not parse
	os.WriteFile(cfg, []byte(bad), 0o644)
	if out, err := exec.Command(hepcacheBin, "check", "--config", cfg).CombinedOutput(); err == nil {
		t.Fatalf("check accepted a file that does not parse:\n%s", out)
	}
	bad = strings.Replace(good, "[space]\n", "[space]\ncapacity = \"0.5\"\nwatermarks = \"90,95\"\n", 1)
	bad = strings.Replace(bad, "[cache]\n", "[cache]\nblock_size = \"3000\"\ndata_dirs = [\""+dir+"/d1\", \""+dir+"/d2\"]\n", 1)
	os.WriteFile(cfg, []byte(bad), 0o644)
	out, err := exec.Command(hepcacheBin, "check", "--config", cfg).CombinedOutput()
	if err == nil {
		t.Fatalf("check accepted:\n%s", out)
	}
	for _, want := range []string{"space.capacity = 1", "space.watermarks = \"90,95\"", "cache.block_size = 3000", "on one file system"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("check output lacks %q:\n%s", want, out)
		}
	}
	udp.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, _, err := udp.ReadFrom(make([]byte, 1500)); err == nil {
		t.Fatalf("check sent a %d-byte monitoring packet", n)
	}
}
