package config

import (
	"errors"
	"strings"
	"testing"
)

// TestCheckReportsEverySlipAtOnce: the reproductions, in one file,
// each refused with its key and fix in one error.
func TestCheckReportsEverySlipAtOnce(t *testing.T) {
	dir := t.TempDir()
	c, err := Parse([]byte(`
[cache]
dir = "` + dir + `/cache"
data_dirs = ["` + dir + `/d1", "` + dir + `/d2"]
[space]
capacity = "0.5"
watermarks = "90,95"
max_age = "30d"
[origin]
default = "127.0.0.1:21094"
`))
	if err != nil {
		t.Fatal(err)
	}
	c.Normalize()
	if c.Origin.Default != "root://127.0.0.1:21094" {
		t.Errorf("host:port origin normalized to %q", c.Origin.Default)
	}
	if c.Space.MaxAge.String() != "720h0m0s" {
		t.Errorf("max_age 30d = %v", c.Space.MaxAge)
	}
	problems, _ := c.HostChecks()
	err = errors.Join(append(problems, c.Validate())...)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		"space.capacity = 1: below one block",
		`space.watermarks = "90,95": sizes of 90 and 95 bytes, below one block`,
		"are on one file system",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}

// TestCheckCapacityAboveFileSystem (issue 29 item 4): a capacity larger
// than the file system is a warning, not a problem: serve starts with it
// (and the file systems may be short of a disk out of service), and check
// agrees.
func TestCheckCapacityAboveFileSystem(t *testing.T) {
	dir := t.TempDir()
	c := Default()
	c.Cache.Dir = dir + "/not/yet"
	c.Origin.Default = "root://o:1094"
	c.Space.Capacity = 1 << 60
	problems, warns := c.HostChecks()
	if len(problems) != 0 || len(warns) != 1 || !strings.Contains(warns[0], "space.capacity = 1024P: more than the file system holding") {
		t.Fatalf("capacity 1E: %v %v", problems, warns)
	}
	c.Space.Capacity = 1 << 30
	if problems, warns := c.HostChecks(); len(problems)+len(warns) != 0 {
		t.Fatalf("capacity 1G: %v %v", problems, warns)
	}
}

func TestWarningsOriginParts(t *testing.T) {
	c := Default()
	c.Origin.Default = "root://h:1094//store"
	c.Origin.Fallback = []string{"https://u:pw@h2/api/v1.0/director/origin", "https://h3/data"}
	w := c.Warnings()
	if len(w) != 2 {
		t.Fatalf("Warnings() = %q; want 2 (the root path, the credentials)", w)
	}
	if !strings.Contains(w[0], "origin.default") || !strings.Contains(w[0], `"//store"`) {
		t.Errorf("warning %q does not name origin.default and its path", w[0])
	}
	if !strings.Contains(w[1], "origin.fallback[0]") || strings.Contains(w[1], "pw") {
		t.Errorf("warning %q does not name the key or shows the password", w[1])
	}
}
