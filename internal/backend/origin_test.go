package backend_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/origin"
	"github.com/hepcache/hepcache/origin/posix"
)

// TestFromOrigin: a local directory served as a Backend streams files in
// chunks, hands out its files for sendfile, and refuses directories and
// missing files with the origin's errors.
func TestFromOrigin(t *testing.T) {
	dir := t.TempDir()
	data := bytes.Repeat([]byte("hepcache"), 100000)
	os.MkdirAll(filepath.Join(dir, "d"), 0o755)
	os.WriteFile(filepath.Join(dir, "d/f"), data, 0o644)
	o, err := posix.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	be := backend.FromOrigin(o)
	ctx := context.Background()
	f, err := be.Open(ctx, backend.Request{Path: "/d/f"})
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	n, err := f.Stream(ctx, 10, int64(len(data)), func(p []byte) error { got.Write(p); return nil })
	if err != nil || n != int64(len(data))-10 || !bytes.Equal(got.Bytes(), data[10:]) {
		t.Fatalf("stream: %d %v", n, err)
	}
	if of, ok := f.(backend.OSFiler).OSFile(0, 100); !ok || of == nil {
		t.Fatal("a local file not handed out for sendfile")
	}
	f.Close()
	if err := f.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, err := be.Open(ctx, backend.Request{Path: "/d"}); !errors.Is(err, origin.ErrIsDir) {
		t.Fatalf("open of a directory: %v", err)
	}
	if _, err := be.Open(ctx, backend.Request{Path: "/nope"}); !errors.Is(err, origin.ErrNotFound) {
		t.Fatalf("open of a missing file: %v", err)
	}
	if ents, err := be.List(ctx, backend.Request{Path: "/d"}, true); err != nil || len(ents) != 1 || ents[0].Size != int64(len(data)) {
		t.Fatalf("list: %v %v", ents, err)
	}
}
