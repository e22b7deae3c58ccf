package buildinfo

import (
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	in := Info{Version: "1.2.3", Revision: "0123456789abcdef", Time: "2026-11-24T12:00:00Z", Modified: true, GoVersion: "go1.26"}
	if got, want := in.String(), "hepcache 1.2.3 (0123456789ab, 2026-11-24T12:00:00Z, modified) go1.26"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
	if g := Get(); g.Version == "" || !strings.HasPrefix(g.GoVersion, "go") {
		t.Fatalf("Get() = %+v", g)
	}
}
