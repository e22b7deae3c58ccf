package server

import (
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// TestGoroutineGroups: what a shutdown that does not finish logs names
// the goroutines' stacks without the runtime's frames (this test's among
// them, with its file and line), largest group first, within its bound.
func TestGoroutineGroups(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	for range 3 {
		go func() { <-block }()
	}
	var gs []goroutineGroup
	for i := 0; i < 500 && (len(gs) == 0 || gs[0].n < 3); i++ {
		time.Sleep(10 * time.Millisecond) // until the three are parked alike
		gs = goroutineGroups(100)
	}
	if len(gs) == 0 || gs[0].n < 3 || !strings.Contains(gs[0].stack, "TestGoroutineGroups.func") {
		t.Fatalf("largest group first: %+v", gs)
	}
	found := false
	for _, g := range gs {
		if strings.Contains(g.stack, "runtime.") {
			t.Fatalf("a runtime frame kept: %s", g.stack)
		}
		found = found || strings.Contains(g.stack, "TestGoroutineGroups") && strings.Contains(g.stack, "server_test.go:")
	}
	if !found {
		t.Fatalf("this test's stack missing: %+v", gs)
	}
	if n := len(goroutineGroups(1)); n != 1 {
		t.Fatalf("%d groups past a bound of 1", n)
	}
}
