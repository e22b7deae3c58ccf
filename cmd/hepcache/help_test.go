package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/realclient"
)

// TestHelpEverywhere: every subcommand, every bench benchmark and every sim
// verb answers -h and --help with its usage and exit status 0; --version
// and -version print the version.
func TestHelpEverywhere(t *testing.T) {
	bin := hepcacheBin(t)
	cmds := [][]string{{}, {"help"}}
	for name := range subcommands {
		cmds = append(cmds, []string{name})
	}
	for _, b := range []string{"throughput", "workflow", "resources", "scale", "layouts", "job", "generate", "purge", "files", "cluster", "wan", "soak"} {
		cmds = append(cmds, []string{"bench", b})
	}
	for _, v := range []string{"generate", "run", "sweep", "bench"} {
		cmds = append(cmds, []string{"sim", v})
	}
	for _, v := range []string{"register", "status", "downtime"} {
		cmds = append(cmds, []string{"pelican", v})
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

// TestHelpLayout: every command and verb prints the one layout (its
// summary, its usage lines, a description where it has one, its flags),
// the admin commands list --config, and no default is printed twice (the
// issue: serve had no description, inspect/evict no --config, demo
// "(default 64M) (default 64M)").
func TestHelpLayout(t *testing.T) {
	bin := hepcacheBin(t)
	for name := range summaries {
		if name == "help" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			out, _ := exec.Command(bin, append(strings.Fields(name), "-h")...).CombinedOutput()
			h := string(out)
			if !strings.HasPrefix(h, "hepcache "+name+": "+summaries[name]+"\n\nusage: hepcache "+name) {
				t.Fatalf("help does not start with its summary and usage:\n%s", h)
			}
			if strings.Contains(h, "-") && !strings.Contains(h, "\nflags:\n  -") && name != "bench" && name != "sim" && name != "pelican" {
				t.Errorf("no flags section:\n%s", h)
			}
			for _, l := range strings.Split(h, "\n") {
				if strings.Count(l, "(default ") > 1 {
					t.Errorf("a default printed twice: %q", l)
				}
			}
			switch name {
			case "serve", "inspect", "evict", "verify", "prestage", "reload", "disk", "check", "pelican register", "pelican status", "pelican downtime":
				if !strings.Contains(h, "  --config ") {
					t.Errorf("no --config flag:\n%s", h)
				}
			}
			if name == "serve" && !strings.Contains(h, "\n\nServes root://") {
				t.Errorf("serve has no description:\n%s", h)
			}
		})
	}
}

// TestManPages: `hepcache help --man DIR` writes hepcache.1 and a page per
// command from its -h text, each rendering without a groff warning.
func TestManPages(t *testing.T) {
	bin := hepcacheBin(t)
	groff := realclient.Require(t, "groff")
	dir := t.TempDir()
	if out, err := exec.Command(bin, "help", "--man", dir).CombinedOutput(); err != nil {
		t.Fatalf("help --man: %v\n%s", err, out)
	}
	pages := []string{"hepcache.1"}
	for _, n := range commandNames() {
		pages = append(pages, "hepcache-"+n+".1")
	}
	for _, p := range pages {
		b, err := os.ReadFile(dir + "/" + p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if !strings.HasPrefix(string(b), ".TH HEPCACHE") || !strings.Contains(string(b), ".SH NAME\n") {
			t.Errorf("%s is not a man page:\n%s", p, b)
		}
		out, err := exec.Command(groff, "-man", "-Tutf8", "-ww", "-z", dir+"/"+p).CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Errorf("groff %s: %v %s", p, err, out)
		}
	}
	b, _ := os.ReadFile(dir + "/hepcache-serve.1")
	for _, want := range []string{".SH SYNOPSIS", ".SH DESCRIPTION", ".SH OPTIONS", `\-cache\-dir`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("hepcache-serve.1 lacks %q", want)
		}
	}
}
