package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// hepcacheBin returns the binary under test: $HEPCACHE_BIN (set by `make
// test`), else one built into a temporary directory.
func hepcacheBin(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("HEPCACHE_BIN"); b != "" {
		return b
	}
	bin := filepath.Join(t.TempDir(), "hepcache")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func hepcache(t *testing.T, bin string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// TestSimCommandLine drives `hepcache sim` the way a site admin would: generate
// a trace, replay it, sweep it with a report, and feed it bad input.
func TestSimCommandLine(t *testing.T) {
	bin := hepcacheBin(t)
	dir := t.TempDir()
	tracePath := filepath.Join(dir, "trace.csv.gz")
	if _, stderr, err := hepcache(t, bin, "sim", "generate", "--out", tracePath, "--accesses", "30000", "--days", "10", "--seed", "7"); err != nil {
		t.Fatalf("generate: %v\n%s", err, stderr)
	}

	t.Run("run json", func(t *testing.T) {
		out, stderr, err := hepcache(t, bin, "sim", "run", "--trace", tracePath, "--size", "20TB", "--policy", "lru", "--json")
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		var res map[string]any
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("stdout is not one JSON object: %v\n%s", err, out)
		}
		for _, k := range []string{"requests", "hits", "hit_rate", "byte_hit_rate", "bytes_in", "bytes_out"} {
			if _, ok := res[k]; !ok {
				t.Errorf("JSON lacks %q", k)
			}
		}
		if res["requests"].(float64) != 30000 || res["policy"] != "lru" {
			t.Errorf("requests %v policy %v", res["requests"], res["policy"])
		}
		if stderr != "" {
			t.Errorf("stderr not empty without a terminal: %q", stderr)
		}
	})

	t.Run("run table every policy", func(t *testing.T) {
		for _, p := range []string{"xcache", "fifo", "lfu", "sieve", "s3fifo", "arc", "gdsf", "admit-on-second-access", "infinite", "opt"} {
			out, stderr, err := hepcache(t, bin, "sim", "run", "--trace", tracePath, "--size", "5TB", "--policy", p, "--block")
			if err != nil {
				t.Fatalf("policy %s: %v\n%s", p, err, stderr)
			}
			if !strings.Contains(out, "hit rate") || !strings.Contains(out, "block") {
				t.Errorf("policy %s: %s", p, out)
			}
		}
	})

	t.Run("sweep report", func(t *testing.T) {
		rep := filepath.Join(dir, "report")
		out, stderr, err := hepcache(t, bin, "sim", "sweep", "--trace", tracePath, "--sizes", "1TB,5TB,20TB,50TB", "--policies", "xcache,opt", "--report", rep, "--progress", "always")
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		for _, want := range []string{"50.0 TiB", "recommendation:", "knee of the curve", "report: " + rep + "/index.html"} {
			if !strings.Contains(out, want) {
				t.Errorf("sweep output lacks %q:\n%s", want, out)
			}
		}
		if !strings.Contains(stderr, "100%") {
			t.Errorf("--progress always drew no bar: %q", stderr)
		}
		if _, err := os.Stat(filepath.Join(rep, "index.html")); err != nil {
			t.Error(err)
		}
	})

	t.Run("bad lines", func(t *testing.T) {
		bad := filepath.Join(dir, "bad.csv")
		content := "time,path,size\n1700000000,/a,10\n1700000001,/b,oops\n1700000002,/a,10\n"
		if err := os.WriteFile(bad, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		_, stderr, err := hepcache(t, bin, "sim", "run", "--trace", bad, "--size", "1GB")
		if err == nil || !strings.Contains(stderr, "line 3") || !strings.Contains(stderr, "too many bad lines") {
			t.Fatalf("bad line not reported: %v\n%s", err, stderr)
		}
		out, stderr, err := hepcache(t, bin, "sim", "run", "--trace", bad, "--size", "1GB", "--max-bad", "0.5")
		if err != nil || !strings.Contains(out, "line 3") {
			t.Fatalf("with --max-bad 0.5: %v\n%s%s", err, out, stderr)
		}
	})

	t.Run("usage errors", func(t *testing.T) {
		for _, args := range [][]string{
			{"sim"}, {"sim", "frobnicate"}, {"sim", "run", "--size", "1TB"},
			{"sim", "run", "--trace", tracePath}, {"sim", "run", "--trace", tracePath, "--size", "1TB", "--policy", "mru"},
			{"sim", "sweep", "--trace", tracePath, "--shards", "2"},
		} {
			if _, _, err := hepcache(t, bin, args...); err == nil {
				t.Errorf("%v succeeded", args)
			}
		}
	})
}
