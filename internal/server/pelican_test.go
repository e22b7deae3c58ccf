package server

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/internal/pelican"
	"github.com/hepcache/hepcache/internal/pelicantest"
	"github.com/hepcache/hepcache/internal/syncbuf"
)

// TestPelicanMember: a server with [pelican] and no origin.default reads
// through the director; its configuration as written is what a reload of
// the same file compares with (no key "needs a restart"); Shutdown sends
// the director a "shutting down" ad.
func TestPelicanMember(t *testing.T) {
	fed := pelicantest.Start(t, pelicantest.Options{})
	dir := t.TempDir()
	cert, key := fed.CA.Host(t, "localhost", "127.0.0.1").WriteFiles(t, dir, "host")
	c := config.Default()
	c.Cache.Dir = filepath.Join(dir, "cache")
	c.Server.Listen, c.Server.HTTPListen = "127.0.0.1:0", "127.0.0.1:0"
	c.Security.TLSCert, c.Security.TLSKey = cert, key
	c.Security.OriginCAPaths = []string{fed.CAFile}
	c.Pelican.Federation, c.Pelican.Site, c.Pelican.DataURL = fed.URL, "srv", "https://localhost:8443"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	s, err := New(c, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if c.Origin.Default != "" {
		t.Fatalf("the caller's configuration was changed: origin.default %q", c.Origin.Default)
	}
	eventually.True(t, func() bool { return s.pel.Status().State == pelican.StateAdvertising }, "advertising")
	next := *c
	if err := s.Reload(&next); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "restart") {
		t.Fatalf("a reload of the same configuration asks for a restart:\n%s", logs)
	}
	if err := s.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	ads := fed.Ads()
	if last := ads[len(ads)-1].Body["status"]; last != "shutting down" {
		t.Fatalf("the last ad says %v; want shutting down", last)
	}
	if errs := fed.Errors(); len(errs) > 0 {
		t.Fatalf("%s", strings.Join(errs, "\n"))
	}
}
