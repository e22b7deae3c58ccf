package posix

import (
	"bytes"
	"context"
	"errors"
	"github.com/hepcache/hepcache/internal/realclient"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hepcache/hepcache/origin"
)

const secret = "outside the root: must never be served"

// fixture builds
//
//	base/secret             outside the root
//	base/outdir/secret      outside the root
//	base/root/data/f        "hello, world"
//	base/root/data/empty
//	base/root/data/sub/
//	base/root/in      -> data/f          (relative, inside)
//	base/root/indir   -> data            (relative, inside)
//	base/root/out     -> ../secret       (relative, escapes)
//	base/root/outd    -> ../outdir       (relative, escapes)
//	base/root/abs     -> base/secret     (absolute)
//	base/root/absin   -> base/root/data/f (absolute, inside: refused too)
//	base/root/dangle  -> nowhere
//	base/root/loop    -> loop
//
// and returns the origin and base.
func fixture(tb testing.TB) (*Origin, string) {
	tb.Helper()
	base := tb.TempDir()
	root := filepath.Join(base, "root")
	must := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(base, "secret"), []byte(secret), 0o644))
	must(os.MkdirAll(filepath.Join(base, "outdir"), 0o755))
	must(os.WriteFile(filepath.Join(base, "outdir", "secret"), []byte(secret), 0o644))
	must(os.MkdirAll(filepath.Join(root, "data", "sub"), 0o755))
	must(os.WriteFile(filepath.Join(root, "data", "f"), []byte("hello, world"), 0o644))
	must(os.WriteFile(filepath.Join(root, "data", "empty"), nil, 0o600))
	for link, target := range map[string]string{
		"in":     "data/f",
		"indir":  "data",
		"out":    "../secret",
		"outd":   "../outdir",
		"abs":    filepath.Join(base, "secret"),
		"absin":  filepath.Join(root, "data", "f"),
		"dangle": "nowhere",
		"loop":   "loop",
	} {
		must(os.Symlink(target, filepath.Join(root, link)))
	}
	o, err := New(root)
	must(err)
	tb.Cleanup(func() { o.Close() })
	return o, base
}

func TestNew(t *testing.T) {
	base := t.TempDir()
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, root string
		ok         bool
	}{
		{"dir", base, true},
		{"missing", filepath.Join(base, "nope"), false},
		{"file", file, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := New(tc.root)
			if (err == nil) != tc.ok {
				t.Fatalf("New(%q) = %v, want ok=%v", tc.root, err, tc.ok)
			}
			if err != nil {
				return
			}
			defer o.Close()
			if got, want := o.String(), "file://"+base; got != want {
				t.Errorf("String() = %q, want %q", got, want)
			}
		})
	}
	t.Run("relative", func(t *testing.T) {
		t.Chdir(base)
		o, err := New(".")
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		if got, want := o.String(), "file://"+base; got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	})
}

// TestPathSafety drives every entry point with hostile paths: none may reach
// a file outside the root, and each must fail with the documented sentinel.
func TestPathSafety(t *testing.T) {
	o, base := fixture(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		path string
		want error // nil: served, and content is "hello, world"
		list bool  // also List the path (directories)
	}{
		{"dotdot", "/../secret", origin.ErrInvalid, false},
		{"dotdot relative", "../secret", origin.ErrInvalid, false},
		{"dotdot inside", "/data/../../secret", origin.ErrInvalid, false},
		{"dotdot harmless", "/data/../data/f", origin.ErrInvalid, false},
		{"dotdot dir", "/..", origin.ErrInvalid, true},
		{"dotdot trailing", "/data/..", origin.ErrInvalid, true},
		{"double slash", "//data//f", nil, false},
		{"dot elements", "/./data/./f", nil, false},
		{"no leading slash", "data/f", nil, false},
		{"host path under root", filepath.Join(base, "secret"), origin.ErrNotFound, false},
		{"host path double slash", "/" + filepath.Join(base, "secret"), origin.ErrNotFound, false},
		{"etc passwd", "/etc/passwd", origin.ErrNotFound, false},
		{"nul", "/data/f\x00.txt", origin.ErrInvalid, false},
		{"nul only", "\x00", origin.ErrInvalid, true},
		{"long path", "/" + strings.Repeat("a/", maxPathLen/2+1) + "f", origin.ErrInvalid, true},
		{"long element", "/data/" + strings.Repeat("x", maxNameLen+1), origin.ErrInvalid, false},
		{"symlink inside", "/in", nil, false},
		{"symlink dir inside", "/indir/f", nil, false},
		{"symlink escapes", "/out", origin.ErrInvalid, false},
		{"symlink dir escapes", "/outd/secret", origin.ErrInvalid, false},
		{"symlink dir escapes list", "/outd", origin.ErrInvalid, true},
		{"symlink absolute", "/abs", origin.ErrInvalid, false},
		{"symlink absolute inside", "/absin", origin.ErrInvalid, false},
		{"symlink dangling", "/dangle", origin.ErrNotFound, false},
		{"symlink loop", "/loop", origin.ErrInvalid, false},
		{"file as dir", "/data/f/x", origin.ErrNotFound, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := func(op string, err error) {
				t.Helper()
				if tc.want == nil {
					if err != nil {
						t.Errorf("%s(%q): %v", op, tc.path, err)
					}
					return
				}
				if !errors.Is(err, tc.want) {
					t.Errorf("%s(%q) = %v, want %v", op, tc.path, err, tc.want)
				}
			}
			_, err := o.Stat(ctx, tc.path)
			check("Stat", err)

			f, err := o.Open(ctx, tc.path)
			check("Open", err)
			if err == nil {
				buf := make([]byte, 64)
				n, err := f.ReadAt(ctx, buf, 0)
				if err != io.EOF {
					t.Errorf("ReadAt: %v, want io.EOF", err)
				}
				if got := string(buf[:n]); got != "hello, world" {
					t.Errorf("read %q", got)
				}
				f.Close()
			}

			_, err = o.Checksum(ctx, tc.path, "adler32")
			check("Checksum", err)

			if tc.list {
				_, err := o.List(ctx, tc.path, true)
				check("List", err)
			}
		})
	}
}

func TestStat(t *testing.T) {
	o, _ := fixture(t)
	mtime := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(o.dir, "data", "f"), mtime, mtime); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		want       origin.FileInfo
	}{
		{"file", "/data/f", origin.FileInfo{Name: "/data/f", Size: 12, Mode: 0o644, ModTime: mtime}},
		{"cleaned name", "//data/./f", origin.FileInfo{Name: "/data/f", Size: 12, Mode: 0o644, ModTime: mtime}},
		{"empty file", "/data/empty", origin.FileInfo{Name: "/data/empty", Size: 0, Mode: 0o600}},
		{"dir", "/data/sub", origin.FileInfo{Name: "/data/sub", Mode: fs.ModeDir | 0o755}},
		{"root", "/", origin.FileInfo{Name: "/", Mode: fs.ModeDir | 0o755}},
		{"root empty", "", origin.FileInfo{Name: "/", Mode: fs.ModeDir | 0o755}},
		{"symlink followed", "/in", origin.FileInfo{Name: "/in", Size: 12, Mode: 0o644, ModTime: mtime}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := o.Stat(context.Background(), tc.path)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want.ModTime.IsZero() {
				tc.want.ModTime = got.ModTime
			}
			if !got.ModTime.Equal(tc.want.ModTime) {
				t.Errorf("ModTime = %v, want %v", got.ModTime, tc.want.ModTime)
			}
			got.ModTime, tc.want.ModTime = time.Time{}, time.Time{}
			if tc.want.IsDir() {
				got.Size = 0 // directory sizes are file-system specific
			}
			if got != tc.want {
				t.Errorf("Stat(%q) = %+v, want %+v", tc.path, got, tc.want)
			}
		})
	}
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := o.Stat(ctx, "/data/f"); !errors.Is(err, context.Canceled) {
			t.Errorf("Stat with cancelled ctx = %v", err)
		}
	})
}

func writeRandom(tb testing.TB, name string, n int) []byte {
	tb.Helper()
	data := make([]byte, n)
	r := rand.NewChaCha8([32]byte{1})
	r.Read(data)
	if err := os.WriteFile(name, data, 0o644); err != nil {
		tb.Fatal(err)
	}
	return data
}

func TestReadAt(t *testing.T) {
	o, _ := fixture(t)
	ctx := context.Background()
	const size = 100_000
	data := writeRandom(t, filepath.Join(o.dir, "data", "big"), size)
	f, err := o.Open(ctx, "/data/big")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := f.Info(); got.Size != size || got.Name != "/data/big" || got.IsDir() {
		t.Errorf("Info() = %+v", got)
	}
	for _, tc := range []struct {
		name    string
		off     int64
		n       int
		wantN   int
		wantErr error
	}{
		{"start", 0, 4096, 4096, nil},
		{"middle", 12345, 50_000, 50_000, nil},
		{"whole", 0, size, size, nil},
		{"exactly to end", size - 10, 10, 10, nil},
		{"across end", size - 10, 100, 10, io.EOF},
		{"at end", size, 10, 0, io.EOF},
		{"past end", size + 1000, 10, 0, io.EOF},
		{"empty buffer", 10, 0, 0, nil},
		{"negative offset", -1, 10, 0, origin.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf := make([]byte, tc.n)
			n, err := f.ReadAt(ctx, buf, tc.off)
			if n != tc.wantN {
				t.Errorf("n = %d, want %d", n, tc.wantN)
			}
			switch {
			case tc.wantErr == io.EOF:
				if err != io.EOF { // the contract: callers may compare with ==
					t.Errorf("err = %v, want io.EOF itself", err)
				}
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Errorf("err = %v, want %v", err, tc.wantErr)
				}
			case err != nil:
				t.Errorf("err = %v", err)
			}
			if tc.off >= 0 && n > 0 && !bytes.Equal(buf[:n], data[tc.off:tc.off+int64(n)]) {
				t.Errorf("wrong bytes")
			}
		})
	}

	t.Run("concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				buf := make([]byte, 777)
				for i := range 50 {
					off := int64((g*50 + i) * 97 % (size - len(buf)))
					if _, err := f.ReadAt(ctx, buf, off); err != nil {
						t.Error(err)
						return
					}
					if !bytes.Equal(buf, data[off:off+int64(len(buf))]) {
						t.Errorf("wrong bytes at %d", off)
						return
					}
				}
			})
		}
		wg.Wait()
	})

	t.Run("readv", func(t *testing.T) {
		segs := []origin.Segment{
			{Offset: 0, Buf: make([]byte, 10)},
			{Offset: 99_000, Buf: make([]byte, 1000)},
			{Offset: 500, Buf: make([]byte, 3000)},
		}
		if err := f.ReadV(ctx, segs); err != nil {
			t.Fatal(err)
		}
		for _, s := range segs {
			if !bytes.Equal(s.Buf, data[s.Offset:s.Offset+int64(len(s.Buf))]) {
				t.Errorf("segment at %d: wrong bytes", s.Offset)
			}
		}
		err := f.ReadV(ctx, []origin.Segment{{Offset: size - 5, Buf: make([]byte, 10)}})
		if err == nil {
			t.Error("ReadV past the end succeeded")
		}
	})

	t.Run("cancelled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := f.ReadAt(cctx, make([]byte, 10), 0); !errors.Is(err, context.Canceled) {
			t.Errorf("ReadAt with cancelled ctx = %v", err)
		}
	})
}

func TestClose(t *testing.T) {
	o, _ := fixture(t)
	ctx := context.Background()
	f, err := o.Open(ctx, "/data/f")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if _, err := f.ReadAt(ctx, make([]byte, 1), 0); err == nil {
		t.Error("ReadAt after Close succeeded")
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Stat(ctx, "/data/f"); !errors.Is(err, origin.ErrUnavailable) {
		t.Errorf("Stat after origin Close = %v, want ErrUnavailable", err)
	}
}

func TestOpenErrors(t *testing.T) {
	o, _ := fixture(t)
	if err := syscall.Mkfifo(filepath.Join(o.dir, "data", "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		want       error
	}{
		{"dir", "/data", origin.ErrIsDir},
		{"root", "/", origin.ErrIsDir},
		{"symlink to dir", "/indir", origin.ErrIsDir},
		{"fifo", "/data/fifo", origin.ErrInvalid}, // must not block waiting for a writer
		{"missing", "/data/nope", origin.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := o.Open(context.Background(), tc.path)
			if !errors.Is(err, tc.want) {
				t.Errorf("Open(%q) = %v, want %v", tc.path, err, tc.want)
			}
			if err == nil {
				f.Close()
			}
			if _, err := o.Checksum(context.Background(), tc.path, "crc32c"); !errors.Is(err, tc.want) {
				t.Errorf("Checksum(%q) = %v, want %v", tc.path, err, tc.want)
			}
		})
	}
}

func TestPermissionDenied(t *testing.T) {
	if os.Geteuid() == 0 {
		// Root bypasses permission bits: run this test again as nobody.
		if os.Getenv("POSIX_TEST_AS_NOBODY") != "" {
			t.Fatal("still root after dropping privileges")
		}
		// Copy the test binary where nobody can execute it.
		dir, err := os.MkdirTemp("", "posix-nobody-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		bin := filepath.Join(dir, "posix.test")
		exe, err := os.ReadFile(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, exe, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-test.run=^TestPermissionDenied$", "-test.count=1")
		cmd.Env = append(os.Environ(), "POSIX_TEST_AS_NOBODY=1", "TMPDIR=/tmp")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("as nobody: %v\n%s", err, out)
		}
		return
	}
	o, _ := fixture(t)
	if err := os.Chmod(filepath.Join(o.dir, "data", "f"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Open(context.Background(), "/data/f"); !errors.Is(err, origin.ErrNotAuthorized) {
		t.Errorf("Open of mode 000 file = %v, want ErrNotAuthorized", err)
	}
}

func TestErrorMapping(t *testing.T) {
	o := &Origin{dir: "/srv"}
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"ENOENT", syscall.ENOENT, origin.ErrNotFound},
		{"ENOTDIR", syscall.ENOTDIR, origin.ErrNotFound},
		{"EACCES", syscall.EACCES, origin.ErrNotAuthorized},
		{"EPERM", syscall.EPERM, origin.ErrNotAuthorized},
		{"EISDIR", syscall.EISDIR, origin.ErrIsDir},
		{"ENAMETOOLONG", syscall.ENAMETOOLONG, origin.ErrInvalid},
		{"ELOOP", syscall.ELOOP, origin.ErrInvalid},
		{"EIO", syscall.EIO, origin.ErrUnavailable},
		{"closed", os.ErrClosed, origin.ErrUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := o.wrap("open", "/a/b", &fs.PathError{Op: "openat", Path: "a/b", Err: tc.err})
			if !errors.Is(err, tc.want) {
				t.Errorf("wrap(%v) = %v, want %v", tc.err, err, tc.want)
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("wrap(%v) = %v lost the cause", tc.err, err)
			}
			if !strings.Contains(err.Error(), "open file:///srv/a/b") {
				t.Errorf("wrap(%v) = %q lacks the operation and path", tc.err, err)
			}
		})
	}
}

func TestList(t *testing.T) {
	o, _ := fixture(t)
	ctx := context.Background()
	mtime := time.Date(2021, 5, 6, 7, 8, 9, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(o.dir, "data", "f"), mtime, mtime); err != nil {
		t.Fatal(err)
	}
	type ent struct {
		name string
		size int64
		dir  bool
	}
	for _, tc := range []struct {
		name     string
		path     string
		withStat bool
		want     []ent
	}{
		{"data", "/data", true, []ent{{"empty", 0, false}, {"f", 12, false}, {"sub", -1, true}}},
		{"data no stat", "/data/", false, []ent{{"empty", 0, false}, {"f", 0, false}, {"sub", 0, true}}},
		// Escaping, absolute, dangling and looping links are left out.
		{"root", "/", true, []ent{{"data", -1, true}, {"in", 12, false}, {"indir", -1, true}}},
		{"root no stat", "", false, []ent{{"data", 0, true}, {"in", 0, false}, {"indir", 0, true}}},
		{"through symlink", "/indir", true, []ent{{"empty", 0, false}, {"f", 12, false}, {"sub", -1, true}}},
		{"empty dir", "/data/sub", true, []ent{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := o.List(ctx, tc.path, tc.withStat)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("List(%q) = %+v, want %d entries", tc.path, got, len(tc.want))
			}
			for i, w := range tc.want {
				g := got[i]
				if g.Name != w.name || g.IsDir() != w.dir || (w.size >= 0 && g.Size != w.size) {
					t.Errorf("entry %d = %+v, want %+v", i, g, w)
				}
				if tc.withStat && !w.dir && g.Mode.Perm() == 0 {
					t.Errorf("entry %q: no permission bits with stat", g.Name)
				}
				if tc.withStat && g.Name == "f" && !g.ModTime.Equal(mtime) {
					t.Errorf("entry f: ModTime %v, want %v", g.ModTime, mtime)
				}
			}
		})
	}
	for _, tc := range []struct {
		name, path string
		want       error
	}{
		{"missing", "/nope", origin.ErrNotFound},
		{"file", "/data/f", origin.ErrInvalid},
		{"escaping link", "/outd", origin.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := o.List(ctx, tc.path, true); !errors.Is(err, tc.want) {
				t.Errorf("List(%q) = %v, want %v", tc.path, err, tc.want)
			}
		})
	}
}

func TestChecksum(t *testing.T) {
	o, _ := fixture(t)
	ctx := context.Background()
	if err := os.WriteFile(filepath.Join(o.dir, "data", "nine"), []byte("123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, algo, want string
	}{
		{"adler32 check value", "/data/nine", "adler32", "091e01de"},
		{"crc32c check value", "/data/nine", "crc32c", "e3069283"},
		{"adler32 upper-case name", "/data/nine", "ADLER32", "091e01de"},
		{"adler32 empty", "/data/empty", "adler32", "00000001"},
		{"crc32c empty", "/data/empty", "crc32c", "00000000"},
		{"adler32 text", "/data/f", "adler32", "1d540489"}, // xrdadler32 of "hello, world"
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := o.Checksum(ctx, tc.path, tc.algo)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("Checksum(%q, %q) = %q, want %q", tc.path, tc.algo, got, tc.want)
			}
		})
	}
	t.Run("unsupported", func(t *testing.T) {
		for _, algo := range []string{"md5", "sha256", ""} {
			if _, err := o.Checksum(ctx, "/data/f", algo); !errors.Is(err, origin.ErrUnsupported) {
				t.Errorf("Checksum(%q) = %v, want ErrUnsupported", algo, err)
			}
		}
	})
	t.Run("missing", func(t *testing.T) {
		if _, err := o.Checksum(ctx, "/data/nope", "adler32"); !errors.Is(err, origin.ErrNotFound) {
			t.Errorf("Checksum of missing file = %v", err)
		}
	})

	// A multi-buffer file against XRootD's own tools, which is what a
	// client compares our checksums with.
	t.Run("xrootd tools", func(t *testing.T) {
		big := filepath.Join(o.dir, "data", "big")
		writeRandom(t, big, 3*checksumBufSize+12345)
		for algo, tool := range map[string]string{"adler32": "xrdadler32", "crc32c": "xrdcrc32c"} {
			bin := realclient.Require(t, tool) // Debian xrootd-client
			out, err := exec.Command(bin, big).Output()
			if err != nil {
				t.Fatalf("%s: %v", tool, err)
			}
			want := strings.Fields(string(out))[0]
			got, err := o.Checksum(ctx, "/data/big", algo)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("%s = %s, %s says %s", algo, got, tool, want)
			}
		}
	})
}
