package httporigin_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/nginxtest"
	"github.com/hepcache/hepcache/origin"
	httporigin "github.com/hepcache/hepcache/origin/http"
)

// tree writes a served directory: /data/a.bin (size n), /data/sub/b.txt,
// /data/empty and returns the root and a.bin's bytes.
func tree(tb testing.TB, n int) (string, []byte) {
	tb.Helper()
	root := tb.TempDir()
	data := make([]byte, n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	must := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "data", "sub"), 0o755))
	must(os.WriteFile(filepath.Join(root, "data", "a.bin"), data, 0o644))
	must(os.WriteFile(filepath.Join(root, "data", "sub", "b.txt"), []byte("hello\n"), 0o644))
	must(os.WriteFile(filepath.Join(root, "data", "empty"), nil, 0o644))
	return root, data
}

func newOrigin(tb testing.TB, url string, mut func(*httporigin.Config)) *httporigin.Origin {
	tb.Helper()
	cfg := &httporigin.Config{URL: url}
	if mut != nil {
		mut(cfg)
	}
	o, err := httporigin.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { o.Close() })
	return o
}

func TestNginxStatOpenRead(t *testing.T) {
	root, data := tree(t, 3<<20+123)
	ng := nginxtest.Start(t, root, nginxtest.Options{})
	o := newOrigin(t, ng.URL, nil)
	ctx := context.Background()

	st, err := os.Stat(filepath.Join(root, "data", "a.bin"))
	if err != nil {
		t.Fatal(err)
	}
	fi, err := o.Stat(ctx, "/data/a.bin")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size != int64(len(data)) || fi.IsDir() || fi.ETag == "" || !fi.ModTime.Equal(st.ModTime().Truncate(time.Second)) {
		t.Fatalf("stat a.bin = %+v; want size %d, an ETag, mtime %v", fi, len(data), st.ModTime().Truncate(time.Second))
	}
	for _, p := range []string{"/data/sub", "/data/sub/", "/data"} {
		fi, err := o.Stat(ctx, p)
		if err != nil || !fi.IsDir() {
			t.Errorf("stat %s = %+v, %v; want a directory", p, fi, err)
		}
	}
	if _, err := o.Stat(ctx, "/data/nope"); !errors.Is(err, origin.ErrNotFound) {
		t.Errorf("stat missing: %v; want ErrNotFound", err)
	}
	if _, err := o.Open(ctx, "/data/sub"); !errors.Is(err, origin.ErrIsDir) {
		t.Errorf("open dir: %v; want ErrIsDir", err)
	}

	f, err := o.Open(ctx, "/data/a.bin")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Info().ETag != fi.ETag {
		t.Errorf("open ETag %q, stat ETag %q", f.Info().ETag, fi.ETag)
	}
	cases := []struct {
		name    string
		off     int64
		n       int
		wantN   int
		wantEOF bool
	}{
		{"start", 0, 4096, 4096, false},
		{"middle", 1<<20 + 7, 300000, 300000, false},
		{"tail exact", int64(len(data)) - 100, 100, 100, false},
		{"past end", int64(len(data)) - 100, 1000, 100, true},
		{"at end", int64(len(data)), 10, 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			buf := make([]byte, c.n)
			n, err := f.ReadAt(ctx, buf, c.off)
			if n != c.wantN || (err == io.EOF) != c.wantEOF || (err != nil && err != io.EOF) {
				t.Fatalf("ReadAt(%d@%d) = %d, %v; want %d, eof %v", c.n, c.off, n, err, c.wantN, c.wantEOF)
			}
			if !bytes.Equal(buf[:n], data[c.off:c.off+int64(n)]) {
				t.Fatalf("ReadAt(%d@%d): wrong bytes", c.n, c.off)
			}
		})
	}

	// Every ranged GET carried a Range header and got 206.
	for _, r := range ng.Requests(t) {
		if r.Method == "GET" && (r.Status != 206 || !strings.HasPrefix(r.Range, "bytes=")) {
			t.Errorf("nginx saw %+v; want ranged GETs answered 206", r)
		}
	}
}

func TestNginxReadV(t *testing.T) {
	root, data := tree(t, 1<<20)
	ng := nginxtest.Start(t, root, nginxtest.Options{})
	o := newOrigin(t, ng.URL, func(c *httporigin.Config) { c.MaxReadVRanges = 3 })
	ctx := context.Background()
	f, err := o.Open(ctx, "/data/a.bin")
	if err != nil {
		t.Fatal(err)
	}
	offs := []int64{5, 100000, 200000, 700001, 1<<20 - 10}
	segs := make([]origin.Segment, len(offs))
	for i, off := range offs {
		segs[i] = origin.Segment{Offset: off, Buf: make([]byte, 10)}
	}
	before := len(ng.Requests(t))
	if err := f.ReadV(ctx, segs); err != nil {
		t.Fatal(err)
	}
	for _, s := range segs {
		if !bytes.Equal(s.Buf, data[s.Offset:s.Offset+10]) {
			t.Errorf("segment @%d: wrong bytes", s.Offset)
		}
	}
	reqs := ng.Requests(t)[before:]
	// 5 segments, 3 per request: one multi-range GET of 3 and one of 2.
	if len(reqs) != 2 || strings.Count(reqs[0].Range, ",") != 2 || strings.Count(reqs[1].Range, ",") != 1 {
		t.Errorf("nginx saw %+v; want two multi-range GETs (3 and 2 ranges)", reqs)
	}
	bad := []origin.Segment{{Offset: 1 << 20, Buf: make([]byte, 1)}}
	if err := f.ReadV(ctx, bad); !errors.Is(err, origin.ErrInvalid) {
		t.Errorf("readv past the end: %v; want ErrInvalid", err)
	}
}

// TestNginxFileChanged: reads after the origin's file changed fail rather
// than mixing two versions' bytes.
func TestNginxFileChanged(t *testing.T) {
	root, _ := tree(t, 64<<10)
	ng := nginxtest.Start(t, root, nginxtest.Options{})
	o := newOrigin(t, ng.URL, nil)
	ctx := context.Background()
	f, err := o.Open(ctx, "/data/a.bin")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, "data", "a.bin")
	if err := os.WriteFile(p, bytes.Repeat([]byte("x"), 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(p, later, later); err != nil {
		t.Fatal(err)
	}
	_, err = f.ReadAt(ctx, make([]byte, 100), 0)
	if !errors.Is(err, origin.ErrNotFound) || !strings.Contains(err.Error(), "changed") {
		t.Fatalf("read after change: %v; want a 'changed' error wrapping ErrNotFound", err)
	}
}

// TestNginxConnectionReuse: sequential reads use one connection, parallel
// reads at most MaxConns.
func TestNginxConnectionReuse(t *testing.T) {
	root, _ := tree(t, 1<<20)
	ng := nginxtest.Start(t, root, nginxtest.Options{})
	o := newOrigin(t, ng.URL, func(c *httporigin.Config) { c.MaxConns = 4 })
	ctx := context.Background()
	f, err := o.Open(ctx, "/data/a.bin")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for i := 0; i < 30; i++ {
		if _, err := f.ReadAt(ctx, buf, int64(i)*4096); err != nil {
			t.Fatal(err)
		}
	}
	conns := map[int]bool{}
	for _, r := range ng.Requests(t) {
		conns[r.Conn] = true
	}
	if len(conns) != 1 {
		t.Errorf("31 sequential requests used %d connections; want 1", len(conns))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := make([]byte, 8192)
			for i := 0; i < 4; i++ {
				if _, err := f.ReadAt(ctx, b, int64(g*4+i)*8192); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	conns = map[int]bool{}
	for _, r := range ng.Requests(t) {
		conns[r.Conn] = true
	}
	if len(conns) > 4 {
		t.Errorf("16 parallel readers used %d connections; want at most MaxConns=4", len(conns))
	}
}

func TestNginxList(t *testing.T) {
	root, data := tree(t, 5000)
	ctx := context.Background()
	t.Run("no webdav", func(t *testing.T) {
		ng := nginxtest.Start(t, root, nginxtest.Options{})
		o := newOrigin(t, ng.URL, nil)
		if _, err := o.List(ctx, "/data", true); !errors.Is(err, origin.ErrUnsupported) {
			t.Fatalf("list without WebDAV: %v; want ErrUnsupported", err)
		}
	})
	t.Run("webdav", func(t *testing.T) {
		ng := nginxtest.Start(t, root, nginxtest.Options{WebDAV: true})
		o := newOrigin(t, ng.URL, nil)
		got, err := o.List(ctx, "/data", true)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, fi := range got {
			lines = append(lines, fmt.Sprintf("%s dir=%v size=%d mtime=%v", fi.Name, fi.IsDir(), fi.Size, !fi.ModTime.IsZero()))
		}
		want := []string{"a.bin dir=false size=" + fmt.Sprint(len(data)) + " mtime=true", "empty dir=false size=0 mtime=true", "sub dir=true size=0 mtime=true"}
		if strings.Join(lines, "\n") != strings.Join(want, "\n") {
			t.Fatalf("list /data =\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
		}
		if _, err := o.List(ctx, "/nope", false); !errors.Is(err, origin.ErrNotFound) {
			t.Errorf("list missing dir: %v; want ErrNotFound", err)
		}
	})
}

func TestNginxChecksumUnsupported(t *testing.T) {
	root, _ := tree(t, 10)
	ng := nginxtest.Start(t, root, nginxtest.Options{})
	o := newOrigin(t, ng.URL, nil)
	if _, err := o.Checksum(context.Background(), "/data/a.bin", "adler32"); !errors.Is(err, origin.ErrUnsupported) {
		t.Fatalf("checksum from nginx: %v; want ErrUnsupported", err)
	}
}

// TestTimeout: a server that accepts but never answers is cut off by ctx
// with ErrUnavailable.
func TestTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	o := newOrigin(t, "http://"+l.Addr().String(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := o.Stat(ctx, "/x"); !errors.Is(err, origin.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stat of a silent server: %v; want ErrUnavailable wrapping DeadlineExceeded", err)
	}
}

func TestDigestValue(t *testing.T) {
	cases := []struct {
		name, algo string
		hdr        []string
		want       string
		ok         bool
	}{
		{"adler32", "adler32", []string{"adler32=0a1B2c3d"}, "0a1b2c3d", true},
		{"short adler32 padded", "adler32", []string{"ADLER32=1b2c3d"}, "001b2c3d", true},
		{"second item", "crc32c", []string{"adler32=00000001, crc32c=deadbeef"}, "deadbeef", true},
		{"second header", "crc32c", []string{"adler32=00000001", "crc32c=deadbeef"}, "deadbeef", true},
		{"md5 base64", "md5", []string{"md5=1B2M2Y8AsgTpgAmY7PhCfg=="}, "d41d8cd98f00b204e9800998ecf8427e", true},
		{"absent", "adler32", []string{"md5=1B2M2Y8AsgTpgAmY7PhCfg=="}, "", false},
		{"bad hex", "adler32", []string{"adler32=xyz"}, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := httporigin.DigestValue(c.hdr, c.algo)
			if got != c.want || ok != c.ok {
				t.Fatalf("DigestValue(%q, %s) = %q, %v; want %q, %v", c.hdr, c.algo, got, ok, c.want, c.ok)
			}
		})
	}
}

// TestCacheOverNginx: the block cache over a real nginx; a second read of
// the file is a hit and nginx sees no more GETs.
func TestCacheOverNginx(t *testing.T) {
	root, data := tree(t, 3<<20+5)
	ng := nginxtest.Start(t, root, nginxtest.Options{})
	o := newOrigin(t, ng.URL, nil)
	cfg := cache.DefaultConfig()
	cfg.Dir = t.TempDir()
	cfg.Origins = origin.ResolverFunc(func(ctx context.Context, u string) (origin.Origin, error) { return o, nil })
	cfg.Capacity = 1 << 30
	cfg.VerifyChecksum = "none"
	c, err := cache.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	read := func() []byte {
		f, err := c.Open(ctx, backend.Request{Path: "/data/a.bin", Protocol: "http"})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var out bytes.Buffer
		if _, err := f.Stream(ctx, 0, f.Info().Size, func(p []byte) error { out.Write(p); return nil }); err != nil {
			t.Fatal(err)
		}
		return out.Bytes()
	}
	if got := read(); !bytes.Equal(got, data) {
		t.Fatal("first read through the cache: wrong bytes")
	}
	gets := func() int {
		n := 0
		for _, r := range ng.Requests(t) {
			if r.Method == "GET" {
				n++
			}
		}
		return n
	}
	g1 := gets()
	if g1 == 0 {
		t.Fatal("nginx saw no GET for a cold read")
	}
	if got := read(); !bytes.Equal(got, data) {
		t.Fatal("second read through the cache: wrong bytes")
	}
	st := c.Stats()
	if st.Hits.Load() != 1 || st.Misses.Load() != 1 {
		t.Errorf("hits %d misses %d; want 1 and 1", st.Hits.Load(), st.Misses.Load())
	}
	if g2 := gets(); g2 != g1 {
		t.Errorf("nginx GETs went from %d to %d on a hit", g1, g2)
	}
}

// TestAuthorizeRedirects: an origin URL that is a redirector (a Pelican
// director) sends the cache to another host; the cache's credential goes
// there (over https) only with AuthorizeRedirects. The origin URL's path
// is kept: /api/v1.0/director/origin/f.
func TestAuthorizeRedirects(t *testing.T) {
	target := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer fed" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		w.Header().Set("ETag", `"v1"`)
		http.ServeContent(w, r, "f", time.Unix(1e9, 0), strings.NewReader("federated bytes"))
	}))
	defer target.Close()
	var seen []string
	director := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.URL.Path)
		http.Redirect(w, r, target.URL+"/data"+strings.TrimPrefix(r.URL.Path, "/api/v1.0/director/origin"), http.StatusTemporaryRedirect)
	}))
	defer director.Close()
	pool := director.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	auth := func(r *http.Request) error { r.Header.Set("Authorization", "Bearer fed"); return nil }
	base := director.URL + "/api/v1.0/director/origin"
	for _, follow := range []bool{false, true} {
		o := newOrigin(t, base, func(c *httporigin.Config) {
			c.Authorize, c.AuthorizeRedirects = auth, follow
			c.TLSConfig = &tls.Config{RootCAs: pool}
		})
		f, err := o.Open(context.Background(), "/f")
		if !follow {
			if !errors.Is(err, origin.ErrNotAuthorized) {
				t.Fatalf("without AuthorizeRedirects: %v; want not authorized (the token stays with the director)", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("with AuthorizeRedirects: %v", err)
		}
		buf := make([]byte, 15)
		if _, err := f.ReadAt(context.Background(), buf, 0); err != nil || string(buf) != "federated bytes" {
			t.Fatalf("read %q, %v", buf, err)
		}
	}
	if len(seen) == 0 || seen[0] != "/api/v1.0/director/origin/f" {
		t.Fatalf("the director saw %q; want the origin URL's path kept", seen)
	}
}

// TestForwardClientToken: with ForwardClientToken a client's token from
// the context goes to the origin as authz, on the open and on the reads of
// the file opened with it (which run without the client's context); it
// never shows in an error. Without, it is not sent.
func TestForwardClientToken(t *testing.T) {
	var got []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Query().Get("authz"))
		mu.Unlock()
		w.Header().Set("ETag", `"v1"`)
		http.ServeContent(w, r, "f", time.Unix(1e9, 0), strings.NewReader("0123456789"))
	}))
	defer srv.Close()
	ctx := origin.WithClientToken(context.Background(), "user-token")
	for _, fwd := range []bool{false, true} {
		got = nil
		o := newOrigin(t, srv.URL, func(c *httporigin.Config) { c.ForwardClientToken = fwd })
		f, err := o.Open(ctx, "/f")
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4)
		if _, err := f.ReadAt(context.Background(), buf, 2); err != nil {
			t.Fatal(err)
		}
		want := ""
		if fwd {
			want = "user-token"
		}
		if len(got) != 2 || got[0] != "HEAD "+want || got[1] != "GET "+want {
			t.Errorf("ForwardClientToken %v: requests %q", fwd, got)
		}
	}
	// An origin that does not answer: the error names the URL, not the
	// token.
	o := newOrigin(t, "http://127.0.0.1:1", func(c *httporigin.Config) { c.ForwardClientToken = true })
	if _, err := o.Stat(ctx, "/f"); err == nil || strings.Contains(err.Error(), "user-token") {
		t.Fatalf("error %v", err)
	}
}
