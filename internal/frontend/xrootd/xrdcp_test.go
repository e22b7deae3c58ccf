package xrootd

import (
	"path/filepath"
	"testing"

	"github.com/hepcache/hepcache/internal/realclient"
)

// Sizes around the page (4 KiB), message and chunk boundaries, and empty.
var copySizes = []struct {
	name string
	size int
}{
	{"empty", 0},
	{"one byte", 1},
	{"page minus one", 4095},
	{"page", 4096},
	{"page plus one", 4097},
	{"odd", 1234567},
	{"chunk boundary plus one", 8<<20 + 1},
	{"large odd", 21*1000*1000 + 7},
}

func TestXrdcp(t *testing.T) {
	xrdcp := realclient.Require(t, "xrdcp")
	ts := startServer(t, "", nil)
	sums := map[string]string{}
	for _, s := range copySizes {
		sums[s.name] = writeRandom(t, ts.dir, "data/"+s.name, s.size)
	}
	modes := []struct {
		name string
		env  []string
	}{
		{"pgread", nil},
		{"plain read", []string{"XRD_CPUSEPGWRTRD=0"}},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			for _, s := range copySizes {
				t.Run(s.name, func(t *testing.T) {
					dst := filepath.Join(t.TempDir(), "out")
					realclient.MustRun(t, realclient.Env(m.env...), xrdcp, "-s", "-f", ts.url+"//data/"+s.name, dst)
					if got := fileSHA(t, dst); got != sums[s.name] {
						t.Fatalf("sha256 of the copy = %s, want %s", got, sums[s.name])
					}
				})
			}
		})
	}
}
