package server

import (
	"slices"
	"testing"

	"github.com/hepcache/hepcache/internal/config"
)

// TestRestartOnlyNamesFullKeys: a reload names each key it cannot apply by
// its full key (the issue: "the warning names the section, not the key"),
// and none of those it applies ([space] with capacity, origin timeouts,
// the token issuers since authorization reloads).
func TestRestartOnlyNamesFullKeys(t *testing.T) {
	cur := config.Default()
	next := config.Default()
	next.Cache.RAM = 1 << 30
	next.Server.Listen = ":2094"
	next.Security.Issuers = append(next.Security.Issuers, config.IssuerConfig{Issuer: "https://iss"})
	next.Space.Capacity = 20 << 40
	next.Space.VerifyChecksum = "crc32c"
	next.Space.PurgeInterval = config.Duration(5e9)
	next.Space.DirStatsMax = 7
	next.Origin.Timeout = config.Duration(5e9)
	next.Origin.FailureLogInterval = config.Duration(5e9)
	next.Log.Level = "debug"
	next.Limits.MaxConnections = 5
	got := restartOnly(cur, next)
	want := []string{"server.listen", "cache.ram", "space.dir_stats_max"}
	if !slices.Equal(got, want) {
		t.Fatalf("restart keys %q, want %q", got, want)
	}
}
