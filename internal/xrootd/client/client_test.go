package client

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
	"sync"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/xrdtest"
	"github.com/hepcache/hepcache/internal/xrootd/proto"
	"github.com/hepcache/hepcache/origin"
)

// testData writes files of odd sizes into a new directory and returns it
// with their contents.
func testData(t *testing.T) (string, map[string][]byte) {
	t.Helper()
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(1))
	files := map[string][]byte{}
	for name, size := range map[string]int{
		"empty":        0,
		"one":          1,
		"odd.bin":      4096*3 + 17,
		"big.bin":      9<<20 + 12345,
		"sub/leaf.txt": 100,
	} {
		b := make([]byte, size)
		rng.Read(b)
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		files[name] = b
	}
	return dir, files
}

func newClient(t *testing.T, mut ...func(*Config)) *Client {
	t.Helper()
	cfg := DefaultConfig()
	for _, m := range mut {
		m(cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestAgainstXRootD(t *testing.T) {
	dir, files := testData(t)
	srv := xrdtest.StartOrigin(t, dir)
	c := newClient(t)
	ctx := ctxT(t)

	t.Run("stat", func(t *testing.T) {
		st, err := c.Stat(ctx, srv.Addr, "/odd.bin")
		if err != nil {
			t.Fatal(err)
		}
		if st.Size != int64(len(files["odd.bin"])) || st.IsDir() || st.Flags&proto.StatReadable == 0 {
			t.Fatalf("stat %+v", st)
		}
		fi, _ := os.Stat(filepath.Join(dir, "odd.bin"))
		if st.MTime != fi.ModTime().Unix() {
			t.Fatalf("mtime %d, file has %d", st.MTime, fi.ModTime().Unix())
		}
		st, err = c.Stat(ctx, srv.Addr, "/sub")
		if err != nil || !st.IsDir() {
			t.Fatalf("stat dir %+v %v", st, err)
		}
	})
	t.Run("not found", func(t *testing.T) {
		_, err := c.Stat(ctx, srv.Addr, "/nope")
		var pe *proto.Error
		if !errors.As(err, &pe) || pe.Code != proto.ErrNotFound {
			t.Fatalf("stat /nope: %v", err)
		}
		_, err = c.Open(ctx, srv.Addr, "/nope")
		if !errors.As(err, &pe) || pe.Code != proto.ErrNotFound {
			t.Fatalf("open /nope: %v", err)
		}
	})
	t.Run("read", func(t *testing.T) {
		for name, want := range files {
			f, err := c.Open(ctx, srv.Addr, "/"+name)
			if err != nil {
				t.Fatal(err)
			}
			if f.Info().Size != int64(len(want)) {
				t.Fatalf("%s: open stat size %d", name, f.Info().Size)
			}
			// Whole file in one ReadAt (split internally above MaxReadSize).
			got := make([]byte, len(want))
			if n, err := f.ReadAt(ctx, got, 0); n != len(want) || (err != nil && err != io.EOF) || !bytes.Equal(got, want) {
				t.Fatalf("%s: ReadAt all: %d %v", name, n, err)
			}
			// Across EOF: the bytes up to the end and io.EOF.
			if len(want) > 10 {
				buf := make([]byte, 100)
				n, err := f.ReadAt(ctx, buf, int64(len(want)-10))
				if n != 10 || err != io.EOF || !bytes.Equal(buf[:10], want[len(want)-10:]) {
					t.Fatalf("%s: across EOF: %d %v", name, n, err)
				}
			}
			// At and past EOF.
			if n, err := f.ReadAt(ctx, make([]byte, 5), int64(len(want))); n != 0 || err != io.EOF {
				t.Fatalf("%s: at EOF: %d %v", name, n, err)
			}
			if n, err := f.ReadAt(ctx, make([]byte, 5), int64(len(want))+1000); n != 0 || err != io.EOF {
				t.Fatalf("%s: past EOF: %d %v", name, n, err)
			}
			if st, err := f.Stat(ctx); err != nil || st.Size != int64(len(want)) {
				t.Fatalf("%s: fstat %+v %v", name, st, err)
			}
			if err := f.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(ctx); err != nil {
				t.Fatalf("second close: %v", err)
			}
			if _, err := f.ReadAt(ctx, got, 0); !errors.Is(err, ErrFileClosed) {
				t.Fatalf("read after close: %v", err)
			}
		}
	})
	t.Run("random reads", func(t *testing.T) {
		want := files["big.bin"]
		f, err := c.Open(ctx, srv.Addr, "/big.bin")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close(ctx)
		rng := rand.New(rand.NewSource(2))
		for i := 0; i < 200; i++ {
			off := rng.Intn(len(want))
			n := rng.Intn(3 << 20)
			buf := make([]byte, n)
			got, err := f.ReadAt(ctx, buf, int64(off))
			wantN := min(n, len(want)-off)
			if got != wantN || (got < n && err != io.EOF) || (got == n && err != nil) || !bytes.Equal(buf[:got], want[off:off+wantN]) {
				t.Fatalf("ReadAt %d@%d: %d %v", n, off, got, err)
			}
		}
	})
	t.Run("readv", func(t *testing.T) {
		want := files["big.bin"]
		f, err := c.Open(ctx, srv.Addr, "/big.bin")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close(ctx)
		rng := rand.New(rand.NewSource(3))
		for _, nseg := range []int{1, 7, 1024, 3000} {
			segs := make([]origin.Segment, nseg)
			for i := range segs {
				n := 1 + rng.Intn(4000)
				if i%97 == 0 {
					n = 1 + rng.Intn(3<<20) // above the per-element limit
				}
				segs[i] = origin.Segment{Offset: int64(rng.Intn(len(want) - n)), Buf: make([]byte, n)}
			}
			if err := f.ReadV(ctx, segs); err != nil {
				t.Fatalf("%d segments: %v", nseg, err)
			}
			for i, s := range segs {
				if !bytes.Equal(s.Buf, want[s.Offset:s.Offset+int64(len(s.Buf))]) {
					t.Fatalf("%d segments: segment %d (%d@%d) differs", nseg, i, len(s.Buf), s.Offset)
				}
			}
		}
		past := []origin.Segment{{Offset: int64(len(want)) - 5, Buf: make([]byte, 10)}}
		if err := f.ReadV(ctx, past); err == nil {
			t.Fatal("readv past EOF succeeded")
		}
	})
	t.Run("dirlist", func(t *testing.T) {
		for _, withStat := range []bool{false, true} {
			ents, err := c.Dirlist(ctx, srv.Addr, "/", withStat)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range ents {
				names = append(names, e.Name)
				if e.HasStat != withStat {
					t.Fatalf("withStat %v: entry %+v", withStat, e)
				}
				if withStat && e.Name == "big.bin" && e.Stat.Size != int64(len(files["big.bin"])) {
					t.Fatalf("big.bin size %d", e.Stat.Size)
				}
				if withStat && e.Name == "sub" && !e.Stat.IsDir() {
					t.Fatalf("sub not a dir: %+v", e.Stat)
				}
			}
			sort.Strings(names)
			if fmt.Sprint(names) != "[big.bin empty odd.bin one sub]" {
				t.Fatalf("withStat %v: names %v", withStat, names)
			}
		}
		if ents, err := c.Dirlist(ctx, srv.Addr, "/sub", true); err != nil || len(ents) != 1 || ents[0].Name != "leaf.txt" {
			t.Fatalf("/sub: %+v %v", ents, err)
		}
	})
	t.Run("checksum", func(t *testing.T) {
		for _, name := range []string{"odd.bin", "big.bin", "empty"} {
			algo, v, err := c.QueryChecksum(ctx, srv.Addr, "/"+name, "adler32")
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("%08x", adler32.Checksum(files[name])); algo != "adler32" || v != want {
				t.Fatalf("%s: %s %s, want adler32 %s", name, algo, v, want)
			}
		}
	})
	t.Run("query config", func(t *testing.T) {
		vals, err := c.QueryConfig(ctx, srv.Addr, "readv_iov_max", "readv_ior_max", "version")
		if err != nil {
			t.Fatal(err)
		}
		if vals[0] != "1024" || vals[2] == "version" {
			t.Fatalf("config %q", vals)
		}
		t.Logf("config %q", vals)
	})
	t.Run("locate", func(t *testing.T) {
		locs, err := c.Locate(ctx, srv.Addr, "/odd.bin", 0)
		if err != nil || len(locs) == 0 || locs[0].Type != 'S' {
			t.Fatalf("locate: %+v %v", locs, err)
		}
	})
	t.Run("ping", func(t *testing.T) {
		if err := c.Ping(ctx, srv.Addr); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		want := files["big.bin"]
		var wg sync.WaitGroup
		errs := make(chan error, 32)
		for g := 0; g < 32; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				f, err := c.Open(ctx, srv.Addr, "/big.bin")
				if err != nil {
					errs <- err
					return
				}
				defer f.Close(ctx)
				buf := make([]byte, 1<<20)
				for off := (g % 9) << 20; off < len(want); off += 9 << 20 {
					n, err := f.ReadAt(ctx, buf, int64(off))
					if (err != nil && err != io.EOF) || !bytes.Equal(buf[:n], want[off:off+n]) {
						errs <- fmt.Errorf("reader %d at %d: %d %v", g, off, n, err)
						return
					}
				}
			}(g)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}
