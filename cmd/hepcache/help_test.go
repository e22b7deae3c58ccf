package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestHelpEverywhere: every subcommand (and bench and sim's verbs) answers
// --help with its usage and exit status 0; --version prints the version.
func TestHelpEverywhere(t *testing.T) {
	bin := os.Getenv("HEPCACHE_BIN")
	if bin == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("HEPCACHE_BIN not set")
		}
		t.Skip("HEPCACHE_BIN not set (make test sets it)")
	}
	cmds := [][]string{{"--help"}, {"bench", "throughput"}, {"sim", "generate"}}
	for name := range subcommands {
		cmds = append(cmds, []string{name})
	}
	for _, c := range cmds {
		args := append(append([]string(nil), c...), "--help")
		if c[0] == "--help" {
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
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "hepcache ") {
		t.Errorf("hepcache --version: %v %s", err, out)
	}
}
