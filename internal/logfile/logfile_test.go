package logfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestReopenAfterRotation: lines before the move stay in the moved file,
// lines after Reopen go to a new file at the path.
func TestReopenAfterRotation(t *testing.T) {
	p := filepath.Join(t.TempDir(), "hepcache.log")
	l, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Write([]byte("one\n"))
	if err := os.Rename(p, p+".1"); err != nil {
		t.Fatal(err)
	}
	l.Write([]byte("two\n")) // still the moved file, as before any SIGHUP
	if err := l.Reopen(); err != nil {
		t.Fatal(err)
	}
	l.Write([]byte("three\n"))
	if b, _ := os.ReadFile(p + ".1"); string(b) != "one\ntwo\n" {
		t.Errorf("rotated file: %q", b)
	}
	if b, _ := os.ReadFile(p); string(b) != "three\n" {
		t.Errorf("new file: %q", b)
	}
}
