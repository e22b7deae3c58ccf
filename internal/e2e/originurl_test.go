package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckWarnsIgnoredOriginParts: `hepcache check` keeps the path of an
// https:// origin (a director's redirect endpoint) and says so, and warns
// about every part of an origin URL that is ignored: the path of a root://
// origin, credentials (never shown), a query.
func TestCheckWarnsIgnoredOriginParts(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hepcache.toml")
	os.WriteFile(cfg, []byte(`[server]
listen = "127.0.0.1:0"
[cache]
dir = "`+dir+`/cache"
[origin]
default = "https://director.example:8444/api/v1.0/director/origin"
fallback = ["root://h.example:1094//store", "https://u:hunter2@web.example/data?x=1"]
`), 0o644)
	out, err := exec.Command(hepcacheBin, "check", "--config", cfg).CombinedOutput()
	if err != nil {
		t.Fatalf("check: %v\n%s", err, out)
	}
	s := string(out)
	for _, want := range []string{
		`origin "https://director.example:8444/api/v1.0/director/origin"`,
		`origin.fallback[0] = "root://h.example:1094//store": the path "//store"`,
		`origin.fallback[1]`, `the user information`, `the query "?x=1"`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("check output lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "hunter2") {
		t.Errorf("check output shows the password:\n%s", s)
	}
	if strings.Contains(s, "director/origin\" is ignored") || strings.Count(s, "warning:") != 3 {
		t.Errorf("want exactly 3 warnings, none about the https path:\n%s", s)
	}
}
