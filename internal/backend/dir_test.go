package backend

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/hepcache/hepcache/origin"
)

func newTestDir(tb testing.TB, chunk int) (*Dir, string) {
	tb.Helper()
	dir := tb.TempDir()
	d, err := newDir(dir, chunk)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Close() })
	return d, dir
}

func TestDirStatListRead(t *testing.T) {
	ctx := context.Background()
	d, dir := newTestDir(t, 1000)
	data := bytes.Repeat([]byte("0123456789abcdef"), 1000) // 16000 bytes
	if err := os.MkdirAll(filepath.Join(dir, "a/sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a/f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a/empty"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	fi, err := d.Stat(ctx, Request{Path: "/a/f"})
	if err != nil || fi.Size != int64(len(data)) || fi.IsDir() {
		t.Fatalf("stat /a/f = %+v, %v", fi, err)
	}
	fi, err = d.Stat(ctx, Request{Path: "/a"})
	if err != nil || !fi.IsDir() {
		t.Fatalf("stat /a = %+v, %v", fi, err)
	}
	ents, err := d.List(ctx, Request{Path: "/a"}, true)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name)
	}
	if got := filepath.Join(names...); got != "empty/f/sub" {
		t.Fatalf("list /a = %v", names)
	}
	if ents[1].Size != int64(len(data)) || !ents[2].IsDir() {
		t.Fatalf("list /a with stat = %+v", ents)
	}

	f, err := d.Open(ctx, Request{Path: "/a/f"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := make([]byte, 100)
	if n, err := f.ReadAt(ctx, p, 15950); n != 50 || err != io.EOF || !bytes.Equal(p[:n], data[15950:]) {
		t.Fatalf("ReadAt at the end = %d, %v", n, err)
	}
	var got []byte
	var chunks int
	n, err := f.Stream(ctx, 10, 20000, func(p []byte) error {
		chunks++
		got = append(got, p...)
		return nil
	})
	if err != nil || n != int64(len(data)-10) || !bytes.Equal(got, data[10:]) {
		t.Fatalf("Stream = %d, %v (%d bytes)", n, err, len(got))
	}
	if chunks != 16 {
		t.Fatalf("Stream delivered %d chunks, want 16 of at most 1000 bytes", chunks)
	}
	stop := errors.New("stop")
	if n, err := f.Stream(ctx, 0, 5000, func(p []byte) error { return stop }); n != 0 || err != stop {
		t.Fatalf("Stream with failing fn = %d, %v", n, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}

	sum, err := d.Checksum(ctx, Request{Path: "/a/f"}, "adler32")
	if err != nil || sum != "01a41fd0" { // zlib.adler32 in Python
		t.Fatalf("adler32 = %q, %v", sum, err)
	}
	if _, err := d.Checksum(ctx, Request{Path: "/a/f"}, "foo"); !errors.Is(err, origin.ErrUnsupported) {
		t.Fatalf("checksum foo = %v", err)
	}
}

func TestDirErrors(t *testing.T) {
	ctx := context.Background()
	d, dir := newTestDir(t, 1000)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		path string
		want error
	}{
		{"missing", "/nope", origin.ErrNotFound},
		{"directory", "/d", origin.ErrIsDir},
		{"symlink out of the root", "/link", ErrInvalidPath},
		{"dot dot", "/../etc/passwd", ErrInvalidPath},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := d.Open(ctx, Request{Path: tt.path})
			if err == nil {
				f.Close()
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("open %s = %v, want %v", tt.path, err, tt.want)
			}
		})
	}
}
