package main

import (
	"github.com/hepcache/hepcache/internal/realclient"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestHelpEverywhere: every subcommand, every bench benchmark and every sim
// verb answers -h and --help with its usage and exit status 0; --version
// and -version print the version.
func TestHelpEverywhere(t *testing.T) {
	bin := os.Getenv("HEPCACHE_BIN")
	if bin == "" {
		if realclient.InCI() {
			t.Fatal("HEPCACHE_BIN not set")
		}
		t.Skip("HEPCACHE_BIN not set (make test sets it)")
	}
	cmds := [][]string{{}, {"help"}}
	for name := range subcommands {
		cmds = append(cmds, []string{name})
	}
	for _, b := range []string{"throughput", "workflow", "resources", "scale", "layouts", "job", "generate", "purge", "cluster", "wan", "soak"} {
		cmds = append(cmds, []string{"bench", b})
	}
	for _, v := range []string{"generate", "run", "sweep", "bench"} {
		cmds = append(cmds, []string{"sim", v})
	}
	for _, c := range cmds {
		for _, h := range []string{"-h", "--help"} {
			args := append(append([]string(nil), c...), h)
			if len(c) == 1 && c[0] == "help" {
				args = c
			}
			out, err := exec.Command(bin, args...).CombinedOutput()
			if err != nil {
				t.Errorf("hepcache %s: %v\n%s", strings.Join(args, " "), err, out)
				continue
			}
			if !strings.Contains(strings.ToLower(string(out)), "usage") {
				t.Errorf("hepcache %s prints no usage:\n%s", strings.Join(args, " "), out)
			}
		}
	}
	for _, v := range []string{"--version", "-version", "version"} {
		out, err := exec.Command(bin, v).CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "hepcache ") {
			t.Errorf("hepcache %s: %v %s", v, err, out)
		}
	}
}
