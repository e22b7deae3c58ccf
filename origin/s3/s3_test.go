package s3origin

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/s3proc"
	"github.com/hepcache/hepcache/internal/s3test"
	"github.com/hepcache/hepcache/internal/sigv4"
	"github.com/hepcache/hepcache/origin"
)

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// newTestOrigin returns an Origin on bucket/prefix of s signed with the
// server's root key; mut adjusts its config.
func newTestOrigin(tb testing.TB, s *s3proc.Server, url string, mut func(*Config)) *Origin {
	tb.Helper()
	cfg := &Config{URL: url, Endpoint: s.Endpoint(), Credentials: Static(s.Credentials()),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if mut != nil {
		mut(cfg)
	}
	o, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { o.Close() })
	return o
}

func TestAgainstVersitygw(t *testing.T) {
	s := s3test.Start(t, "data")
	ctx := context.Background()
	obj := randomBytes(1, 3<<20+17)
	s3test.Put(t, s, "data", "store/run1/f.root", obj)
	s3test.Put(t, s, "data", "store/run1/sub/g.root", []byte("g"))
	s3test.Put(t, s, "data", "store/odd name+$&=.root", []byte("odd"))
	o := newTestOrigin(t, s, "s3://data/store", nil)

	t.Run("stat", func(t *testing.T) {
		fi, err := o.Stat(ctx, "/run1/f.root")
		if err != nil || fi.Size != int64(len(obj)) || fi.ETag == "" || fi.ModTime.IsZero() || fi.IsDir() {
			t.Fatalf("stat: %+v %v", fi, err)
		}
		for _, dir := range []string{"/", "/run1", "/run1/sub"} {
			if fi, err := o.Stat(ctx, dir); err != nil || !fi.IsDir() {
				t.Fatalf("stat %s: %+v %v", dir, fi, err)
			}
		}
		if _, err := o.Stat(ctx, "/run1/nope.root"); !errors.Is(err, origin.ErrNotFound) {
			t.Fatalf("missing object: %v", err)
		}
	})
	t.Run("read", func(t *testing.T) {
		f, err := o.Open(ctx, "/run1/f.root")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for _, r := range []struct{ off, n int }{{0, 10}, {1 << 20, 1 << 20}, {len(obj) - 5, 5}} {
			buf := make([]byte, r.n)
			if n, err := f.ReadAt(ctx, buf, int64(r.off)); err != nil || n != r.n || !bytes.Equal(buf, obj[r.off:r.off+r.n]) {
				t.Fatalf("ReadAt %d@%d: n=%d err=%v", r.n, r.off, n, err)
			}
		}
		buf := make([]byte, 100)
		if n, err := f.ReadAt(ctx, buf, int64(len(obj)-40)); err != io.EOF || n != 40 || !bytes.Equal(buf[:40], obj[len(obj)-40:]) {
			t.Fatalf("ReadAt over the end: n=%d err=%v", n, err)
		}
		segs := []origin.Segment{{Offset: 3, Buf: make([]byte, 7)}, {Offset: 2 << 20, Buf: make([]byte, 4096)}}
		if err := f.ReadV(ctx, segs); err != nil {
			t.Fatal(err)
		}
		for _, sg := range segs {
			if !bytes.Equal(sg.Buf, obj[sg.Offset:sg.Offset+int64(len(sg.Buf))]) {
				t.Fatalf("ReadV segment at %d differs", sg.Offset)
			}
		}
		g, err := o.Open(ctx, "/odd name+$&=.root")
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 3)
		if _, err := g.ReadAt(ctx, b, 0); err != nil || string(b) != "odd" {
			t.Fatalf("key with odd characters: %q %v", b, err)
		}
		if _, err := o.Open(ctx, "/run1"); !errors.Is(err, origin.ErrIsDir) {
			t.Fatalf("open of a directory: %v", err)
		}
	})
	t.Run("replaced", func(t *testing.T) {
		s3test.Put(t, s, "data", "store/v.root", randomBytes(2, 1<<20))
		f, err := o.Open(ctx, "/v.root")
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1000)
		if _, err := f.ReadAt(ctx, buf, 0); err != nil {
			t.Fatal(err)
		}
		s3test.Put(t, s, "data", "store/v.root", randomBytes(3, 1<<20))
		_, err = f.ReadAt(ctx, buf, 5000)
		if !errors.Is(err, origin.ErrChanged) || !errors.Is(err, origin.ErrNotFound) {
			t.Fatalf("read of a replaced object: %v", err)
		}
		t.Log(err)
		if err := s.Delete("data", "store/v.root"); err != nil {
			t.Fatal(err)
		}
		if _, err = f.ReadAt(ctx, buf, 5000); !errors.Is(err, errChanged) {
			t.Fatalf("read of a deleted object: %v", err)
		}
	})
	t.Run("list", func(t *testing.T) {
		entries, err := o.List(ctx, "/run1", true)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, fmt.Sprintf("%s:%v:%d", e.Name, e.IsDir(), e.Size))
		}
		sort.Strings(names)
		if got := strings.Join(names, " "); got != fmt.Sprintf("f.root:false:%d sub:true:0", len(obj)) {
			t.Fatalf("list: %s", got)
		}
		if _, err := o.List(ctx, "/nope", false); !errors.Is(err, origin.ErrNotFound) {
			t.Fatalf("list of nothing: %v", err)
		}
	})
	t.Run("list pages", func(t *testing.T) {
		for i := range 7 {
			s3test.Put(t, s, "data", fmt.Sprintf("store/many/f%02d", i), []byte{byte(i)})
		}
		s3test.Put(t, s, "data", "store/many/d/x", nil)
		small := newTestOrigin(t, s, "s3://data/store", func(c *Config) { c.listPageSize = 3 })
		entries, err := small.List(ctx, "/many/", true)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 8 {
			t.Fatalf("listed %d entries over pages of 3, want 8: %+v", len(entries), entries)
		}
	})
	t.Run("checksum", func(t *testing.T) {
		body := randomBytes(4, 100000)
		var c [4]byte
		binary.BigEndian.PutUint32(c[:], crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
		if _, err := s.Put("data", "store/sum.root", body, http.Header{"X-Amz-Checksum-Crc32c": {base64.StdEncoding.EncodeToString(c[:])}}); err != nil {
			t.Fatal(err)
		}
		got, err := o.Checksum(ctx, "/sum.root", "crc32c")
		if err != nil || got != fmt.Sprintf("%x", c[:]) {
			t.Fatalf("crc32c: %q %v, want %x", got, err, c)
		}
		if _, err := o.Checksum(ctx, "/run1/f.root", "crc32c"); !errors.Is(err, origin.ErrUnsupported) {
			t.Fatalf("crc32c of an object stored without: %v", err)
		}
		if _, err := o.Checksum(ctx, "/run1/f.root", "adler32"); !errors.Is(err, origin.ErrUnsupported) {
			t.Fatalf("adler32: %v", err)
		}
	})
	t.Run("wrong secret", func(t *testing.T) {
		bad := newTestOrigin(t, s, "s3://data/store", func(c *Config) {
			c.Credentials = Static(sigv4.Credentials{AccessKeyID: s.AccessKey, SecretAccessKey: "not-the-secret"})
		})
		_, err := bad.Open(ctx, "/run1/f.root")
		if !errors.Is(err, origin.ErrNotAuthorized) || !strings.Contains(err.Error(), `bucket "data"`) ||
			!strings.Contains(err.Error(), "SignatureDoesNotMatch") || strings.Contains(err.Error(), "not-the-secret") {
			t.Fatalf("wrong secret: %v", err)
		}
		t.Log(err)
	})
	t.Run("anonymous", func(t *testing.T) {
		anon := newTestOrigin(t, s, "s3://data/store", func(c *Config) { c.Credentials = Anonymous() })
		_, err := anon.Open(ctx, "/run1/f.root")
		if !errors.Is(err, origin.ErrNotAuthorized) || !strings.Contains(err.Error(), `bucket "data"`) {
			t.Fatalf("anonymous read of a private bucket: %v", err)
		}
		t.Log(err)
		if err := s.CreateBucket("public"); err != nil {
			t.Fatal(err)
		}
		if err := s.MakePublic("public"); err != nil {
			t.Fatal(err)
		}
		s3test.Put(t, s, "public", "open/p.root", obj[:1000])
		pub := newTestOrigin(t, s, "s3://public/open", func(c *Config) { c.Credentials = Anonymous() })
		f, err := pub.Open(ctx, "/p.root")
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1000)
		if _, err := f.ReadAt(ctx, buf, 0); err != nil || !bytes.Equal(buf, obj[:1000]) {
			t.Fatalf("anonymous read of a public bucket: %v", err)
		}
		if entries, err := pub.List(ctx, "/", false); err != nil || len(entries) != 1 {
			t.Fatalf("anonymous listing of a public bucket: %v %v", entries, err)
		}
	})
	t.Run("missing bucket", func(t *testing.T) {
		nb := newTestOrigin(t, s, "s3://nobucket", nil)
		_, err := nb.Open(ctx, "/f")
		if !errors.Is(err, origin.ErrNotFound) || !strings.Contains(err.Error(), "NoSuchBucket") {
			t.Fatalf("missing bucket: %v", err)
		}
	})
}
