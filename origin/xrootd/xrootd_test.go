package xrootd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/adler32"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/xrdtest"
	"github.com/hepcache/hepcache/internal/xrootd/proto"
	"github.com/hepcache/hepcache/origin"
)

func setup(t *testing.T) (*xrdtest.Server, map[string][]byte, *Origin) {
	t.Helper()
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(7))
	files := map[string][]byte{}
	for name, size := range map[string]int{
		"store/a.root": 1<<20 + 333,
		"store/b.root": 4095,
		"store/empty":  0,
		"store/sub/c":  12,
	} {
		b := make([]byte, size)
		rng.Read(b)
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		files["/"+name] = b
	}
	srv := xrdtest.StartOrigin(t, dir)
	o, err := New(&Config{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	return srv, files, o
}

func TestOrigin(t *testing.T) {
	srv, files, o := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	if o.String() != "root://"+srv.Addr {
		t.Fatalf("String() = %q", o.String())
	}
	t.Run("stat", func(t *testing.T) {
		fi, err := o.Stat(ctx, "/store/a.root")
		if err != nil {
			t.Fatal(err)
		}
		if fi.Name != "/store/a.root" || fi.Size != int64(len(files["/store/a.root"])) || fi.IsDir() || fi.Mode.Perm()&0o444 == 0 || fi.ModTime.IsZero() {
			t.Fatalf("%+v", fi)
		}
		if fi, err := o.Stat(ctx, "/store/sub"); err != nil || !fi.IsDir() {
			t.Fatalf("dir: %+v %v", fi, err)
		}
	})
	t.Run("errors", func(t *testing.T) {
		_, err := o.Open(ctx, "/store/nope")
		if !errors.Is(err, origin.ErrNotFound) {
			t.Fatalf("open missing: %v", err)
		}
		if want := "open " + o.String() + "//store/nope: "; !strings.HasPrefix(err.Error(), want) {
			t.Fatalf("error %q lacks context %q", err, want)
		}
		var pe *proto.Error
		if !errors.As(err, &pe) || pe.Code != proto.ErrNotFound {
			t.Fatalf("no kXR code in %v", err)
		}
		if _, err := o.Stat(ctx, "/store/nope"); !errors.Is(err, origin.ErrNotFound) {
			t.Fatalf("stat missing: %v", err)
		}
		if _, err := o.Open(ctx, "/store/sub"); !errors.Is(err, origin.ErrIsDir) {
			t.Fatalf("open dir: %v", err)
		}
		if _, err := o.List(ctx, "/store/a.root", false); err == nil {
			t.Fatal("listing a file succeeded")
		}
	})
	t.Run("read", func(t *testing.T) {
		for name, want := range files {
			f, err := o.Open(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if f.Info().Size != int64(len(want)) {
				t.Fatalf("%s: info %+v", name, f.Info())
			}
			got := make([]byte, len(want))
			if n, err := f.ReadAt(ctx, got, 0); n != len(want) || err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s: whole: %d %v", name, n, err)
			}
			buf := make([]byte, 1000)
			off := max(0, len(want)-300)
			n, err := f.ReadAt(ctx, buf, int64(off))
			if n != len(want)-off || err != io.EOF || !bytes.Equal(buf[:n], want[off:]) {
				t.Fatalf("%s: across EOF: %d %v", name, n, err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("readv", func(t *testing.T) {
		want := files["/store/a.root"]
		f, err := o.Open(ctx, "/store/a.root")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		segs := []origin.Segment{
			{Offset: 0, Buf: make([]byte, 10)},
			{Offset: 5000, Buf: make([]byte, 3<<18)}, // above readv_ior_max? no: split only if needed
			{Offset: int64(len(want)) - 1, Buf: make([]byte, 1)},
			{Offset: 77, Buf: make([]byte, 4096)},
		}
		if err := f.ReadV(ctx, segs); err != nil {
			t.Fatal(err)
		}
		for i, s := range segs {
			if !bytes.Equal(s.Buf, want[s.Offset:s.Offset+int64(len(s.Buf))]) {
				t.Fatalf("segment %d differs", i)
			}
		}
		err = f.ReadV(ctx, []origin.Segment{{Offset: int64(len(want)) - 1, Buf: make([]byte, 2)}})
		if !errors.Is(err, origin.ErrInvalid) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("readv past EOF: %v", err)
		}
	})
	t.Run("list", func(t *testing.T) {
		for _, withStat := range []bool{false, true} {
			fis, err := o.List(ctx, "/store", withStat)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, fi := range fis {
				names = append(names, fi.Name)
				if withStat && fi.Name == "a.root" && fi.Size != int64(len(files["/store/a.root"])) {
					t.Fatalf("a.root %+v", fi)
				}
				if withStat && fi.Name == "sub" && !fi.IsDir() {
					t.Fatalf("sub %+v", fi)
				}
			}
			sort.Strings(names)
			if fmt.Sprint(names) != "[a.root b.root empty sub]" {
				t.Fatalf("names %v", names)
			}
		}
	})
	t.Run("checksum", func(t *testing.T) {
		for _, algo := range []string{"adler32", "ADLER32"} {
			v, err := o.Checksum(ctx, "/store/b.root", algo)
			if want := fmt.Sprintf("%08x", adler32.Checksum(files["/store/b.root"])); err != nil || v != want {
				t.Fatalf("%s: %q %v, want %q", algo, v, err, want)
			}
		}
		// The server computes adler32 only.
		if _, err := o.Checksum(ctx, "/store/b.root", "md5"); !errors.Is(err, origin.ErrUnsupported) {
			t.Fatalf("md5: %v", err)
		}
		if _, err := o.Checksum(ctx, "/store/nope", "adler32"); !errors.Is(err, origin.ErrNotFound) {
			t.Fatalf("missing file: %v", err)
		}
	})
}

func TestRedirectAndDeath(t *testing.T) {
	srv, files, _ := setup(t)
	port, _ := strconv.Atoi(srv.Addr[strings.LastIndex(srv.Addr, ":")+1:])
	redirector := xrdtest.StartFake(t, func(h proto.RequestHeader, data []byte) ([]byte, bool) {
		if h.RequestID == proto.ReqProtocol || h.RequestID == proto.ReqLogin {
			return nil, false
		}
		return proto.AppendRedirect(nil, h.StreamID, int32(port), "127.0.0.1"), false
	})
	o, err := New(&Config{URL: "root://" + redirector.Addr})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	ctx := context.Background()
	f, err := o.Open(ctx, "/store/a.root")
	if err != nil {
		t.Fatal(err)
	}
	want := files["/store/a.root"]
	buf := make([]byte, 64<<10)
	if n, err := f.ReadAt(ctx, buf, 100); n != len(buf) || err != nil || !bytes.Equal(buf, want[100:100+len(buf)]) {
		t.Fatalf("read via redirect: %d %v", n, err)
	}
	srv.Stop()
	if _, err := f.ReadAt(ctx, buf, 0); !errors.Is(err, origin.ErrUnavailable) {
		t.Fatalf("read from a killed server: %v", err)
	}
	if _, err := o.Stat(ctx, "/store/a.root"); !errors.Is(err, origin.ErrUnavailable) {
		t.Fatalf("stat via redirect to a killed server: %v", err)
	}
	redirector.Close()
	if _, err := o.Stat(ctx, "/store/a.root"); !errors.Is(err, origin.ErrUnavailable) {
		t.Fatalf("stat on a closed port: %v", err)
	}
}

func TestParseURL(t *testing.T) {
	for in, want := range map[string]string{
		"root://Host.Example": "root://host.example:1094",
		"root://h:2094":       "root://h:2094",
		"xroot://h:1/store":   "root://h:1",
		"root://[::1]:1094":   "root://[::1]:1094",
	} {
		o, err := New(&Config{URL: in})
		if err != nil || o.String() != want {
			t.Errorf("New(%q) = %v %v, want %s", in, o, err, want)
		}
	}
	for _, bad := range []string{"", "http://h", "root://", "root:///x"} {
		if _, err := New(&Config{URL: bad}); !errors.Is(err, origin.ErrInvalid) {
			t.Errorf("New(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}
