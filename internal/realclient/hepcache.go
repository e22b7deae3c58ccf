package realclient

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// HepcacheMain is a TestMain body for packages that run the hepcache binary
// as a separate process: it sets *bin to $HEPCACHE_BIN (set by `make test`)
// or to a binary built for this test run, runs the tests and exits.
func HepcacheMain(m *testing.M, bin *string) {
	*bin = os.Getenv("HEPCACHE_BIN")
	var tmp string
	if *bin == "" {
		var err error
		if tmp, err = os.MkdirTemp("", "hepcache-bin-"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		*bin = filepath.Join(tmp, "hepcache")
		cmd := exec.Command("go", "build", "-o", *bin, "github.com/hepcache/hepcache/cmd/hepcache")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build hepcache:", err)
			os.RemoveAll(tmp)
			os.Exit(1)
		}
	}
	code := m.Run()
	if tmp != "" {
		os.RemoveAll(tmp)
	}
	os.Exit(code)
}
