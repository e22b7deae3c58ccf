package cache

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hepcache/hepcache/origin"
)

// TestPlantedLinksNotFollowed: links planted in the cache directory in
// place of a cached file's data, of a sidecar, and of a directory on a new
// file's path are never followed: the outside files keep their bytes,
// clients get the origin's bytes, and the links are reported.
func TestPlantedLinksNotFollowed(t *testing.T) {
	m := origin.NewMem("mem://o")
	a, b := randomData(1, 3*testBlock), randomData(2, 2*testBlock)
	m.Put("/a", a, time.Now())
	m.Put("/dir/b", b, time.Now())
	dir := t.TempDir()
	c := newTestCache(t, dir, m, nil)
	readAllVia(t, c, "/a")
	waitIdle(t, c)
	c.Close()

	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	os.WriteFile(victim, []byte("must stay as it is"), 0o644)
	k := Key{Origin: "mem://o", Path: "/a"}
	// The data of /a becomes a link to the outside file, its sidecar a
	// link to a copy of itself outside; the directory of /dir/b a link to
	// the outside directory.
	data, meta := DataPath(dir, k), MetaPath(dir, k)
	side, _ := os.ReadFile(meta)
	os.WriteFile(filepath.Join(outside, "side"), side, 0o644)
	for link, target := range map[string]string{data: victim, meta: filepath.Join(outside, "side")} {
		os.Remove(link)
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(filepath.Dir(data), "dir")); err != nil {
		t.Fatal(err)
	}

	c = newTestCache(t, dir, m, nil)
	if got := readAllVia(t, c, "/a"); !bytes.Equal(got, a) {
		t.Fatal("/a: wrong bytes")
	}
	if got := readAllVia(t, c, "/dir/b"); !bytes.Equal(got, b) {
		t.Fatal("/dir/b: wrong bytes")
	}
	waitIdle(t, c)
	if v, _ := os.ReadFile(victim); string(v) != "must stay as it is" {
		t.Fatalf("the outside file was written through a link: %q", v)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 2 {
		t.Fatalf("files appeared outside the cache: %v", ents)
	}
	if n := c.Stats().LinksRefused.Load(); n == 0 {
		t.Fatal("no link reported")
	}
}
