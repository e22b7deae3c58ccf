package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// hepcacheBin is the hepcache binary the process tests run: $HEPCACHE_BIN
// (set by `make test`) or one built for this test run.
var hepcacheBin string

func TestMain(m *testing.M) {
	hepcacheBin = os.Getenv("HEPCACHE_BIN")
	var tmp string
	if hepcacheBin == "" {
		var err error
		tmp, err = os.MkdirTemp("", "hepcache-e2e-")
		if err != nil {
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
