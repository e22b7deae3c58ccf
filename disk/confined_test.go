package disk

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestConfinedRefusesLinks: planted links (to a file outside, to a
// directory outside, as a file's name) are neither read nor written
// through; paths outside the trees are refused; a link can be removed
// itself. With openat2 and with os.Root (kernels before 5.6).
func TestConfinedRefusesLinks(t *testing.T) {
	for _, mode := range []struct {
		name string
		ok   int32
	}{{"openat2", 0}, {"os.Root", 2}} {
		t.Run(mode.name, func(t *testing.T) {
			prev := openat2OK.Load()
			openat2OK.Store(mode.ok)
			defer openat2OK.Store(prev)
			testConfinedRefusesLinks(t)
			if mode.ok == 0 && openat2OK.Load() != 1 {
				t.Fatal("openat2 was not used")
			}
		})
	}
}

func testConfinedRefusesLinks(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	os.WriteFile(secret, []byte("outside"), 0o644)
	dir := filepath.Join(t.TempDir(), "cache")
	c, err := NewConfined(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.MkdirAll(filepath.Join(dir, "data/o"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "data/o/f")
	os.Symlink(secret, link)
	os.Symlink(outside, filepath.Join(dir, "data/d"))

	for _, p := range []string{link, filepath.Join(dir, "data/d/secret")} {
		if _, err := c.OpenFile(p, os.O_RDONLY, 0); !errors.Is(err, ErrLink) {
			t.Errorf("read through %s: %v, want ErrLink", p, err)
		}
		if _, err := c.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644); !errors.Is(err, ErrLink) {
			t.Errorf("write through %s: %v, want ErrLink", p, err)
		}
	}
	if err := WriteFileAtomic(c, filepath.Join(dir, "data/d/x"), []byte("x"), false); !errors.Is(err, ErrLink) {
		t.Errorf("atomic write through a directory link: %v", err)
	}
	if b, _ := os.ReadFile(secret); string(b) != "outside" {
		t.Fatalf("the outside file was changed: %q", b)
	}
	if _, err := os.Stat(filepath.Join(outside, "x")); err == nil {
		t.Fatal("a file was created outside")
	}
	if fi, err := c.Stat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("Stat of a link: %v %v, want the link itself", fi, err)
	}
	if _, err := c.OpenFile(secret, os.O_RDONLY, 0); err == nil {
		t.Fatal("a path outside the cache directories was opened")
	}
	if err := c.Remove(link); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(link); !os.IsNotExist(err) {
		t.Fatal("link not removed")
	}
	if _, err := os.Stat(secret); err != nil {
		t.Fatal("removing the link removed its target")
	}
	f, err := c.OpenFile(link, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	// The other operations on the tree.
	if err := c.MkdirAll(filepath.Join(dir, "meta/a/b/c"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(c, filepath.Join(dir, "meta/a/b/c/s"), []byte("side"), true); err != nil {
		t.Fatal(err)
	}
	if err := c.Rename(filepath.Join(dir, "meta/a/b/c/s"), filepath.Join(dir, "meta/a/s2")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "meta/a/s2")); string(b) != "side" {
		t.Fatalf("renamed file holds %q", b)
	}
	for _, p := range []string{"meta/a/b/c", "meta/a/b"} {
		if err := c.Remove(filepath.Join(dir, p)); err != nil {
			t.Fatalf("remove directory %s: %v", p, err)
		}
	}
	if ents, err := c.ReadDir(filepath.Join(dir, "meta/a")); err != nil || len(ents) != 1 {
		t.Fatalf("ReadDir: %v %v", ents, err)
	}
	if err := c.SyncDir(filepath.Join(dir, "meta/a")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.OpenFile(filepath.Join(dir, "meta/../../x"), os.O_RDWR|os.O_CREATE, 0o644); err == nil {
		t.Fatal("a path escaping with .. was opened")
	}
}

// TestWriteFileInPlace: the content is replaced whole, the file cut only
// when it was longer (or its length is not known).
func TestWriteFileInPlace(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s")
	for _, tc := range []struct {
		data   string
		oldLen int
	}{{"a long first content", 0}, {"short", 20}, {"longer than short", 5}, {"x", -1}} {
		if err := WriteFileInPlace(OS{}, p, []byte(tc.data), tc.oldLen); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(p); string(b) != tc.data {
			t.Fatalf("after writing %q (old length %d): %q", tc.data, tc.oldLen, b)
		}
	}
}
