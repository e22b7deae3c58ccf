package clusterrun

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// hepcacheBin is the binary under test: $HEPCACHE_BIN (set by make test) or
// one built for this run.
var hepcacheBin string

func TestMain(m *testing.M) {
	hepcacheBin = os.Getenv("HEPCACHE_BIN")
	var tmp string
	if hepcacheBin == "" {
		var err error
		if tmp, err = os.MkdirTemp("", "hepcache-cluster-"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		hepcacheBin = filepath.Join(tmp, "hepcache")
		cmd := exec.Command("go", "build", "-o", hepcacheBin, "github.com/hepcache/hepcache/cmd/hepcache")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build hepcache:", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	if tmp != "" {
		os.RemoveAll(tmp)
	}
	os.Exit(code)
}
