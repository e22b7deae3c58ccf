package server

import (
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/config"
)

// TestNewFailsCleanly: errors after the cache is built (a bad TLS key, a
// busy port) are returned, not a panic, and release the cache directory.
func TestNewFailsCleanly(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		mut  func(*config.Config)
		want string
	}{
		{"missing TLS files", func(c *config.Config) {
			c.Security.TLSCert, c.Security.TLSKey = filepath.Join(dir, "none.pem"), filepath.Join(dir, "none.key")
		}, "none.pem"},
		{"port in use", func(c *config.Config) { c.Server.Listen = busy.Addr().String() }, "server.listen"},
		// Issue 29 item 1: with a summary stream, a start that fails
		// before the cache exists sent a last report from Close and
		// panicked on the missing cache.
		{"uninitialised data disk with a summary stream", func(c *config.Config) {
			c.Monitor.Summary = "127.0.0.1:9"
			c.Cache.DataDirs = []string{filepath.Join(dir, "disk0")}
		}, "disk init"},
		{"port in use with a summary stream", func(c *config.Config) {
			c.Monitor.Summary = "127.0.0.1:9"
			c.Server.Listen = busy.Addr().String()
		}, "server.listen"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := config.Default()
			c.Cache.Dir = filepath.Join(dir, "cache")
			c.Origin.Default = "file://" + dir
			c.Server.Listen = "127.0.0.1:0"
			tc.mut(c)
			s, err := New(c, slog.New(slog.DiscardHandler))
			if err == nil {
				s.Close()
				t.Fatal("New succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

// TestGoroutineDump: what a shutdown that does not finish logs names the
// goroutines' stacks (this test's among them) and stays within its bound.
func TestGoroutineDump(t *testing.T) {
	d := goroutineDump(1 << 20)
	if !strings.Contains(d, "goroutine profile:") || !strings.Contains(d, "TestGoroutineDump") {
		t.Fatalf("dump without the stacks:\n%.500s", d)
	}
	if d := goroutineDump(100); len(d) > 100+len("\n[cut]") || !strings.HasSuffix(d, "[cut]") {
		t.Fatalf("dump of %d bytes past its bound of 100", len(d))
	}
}
