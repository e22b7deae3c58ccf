package httpfront

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha1"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"hash/adler32"
	"hash/crc32"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/origin"
)

func do(tb testing.TB, method, url string, hdr map[string]string, body io.Reader) (*http.Response, []byte) {
	tb.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		tb.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("%s %s: body: %v", method, url, err)
	}
	return resp, b
}

func TestGetRanges(t *testing.T) {
	e := newEnv(t, envOpts{})
	const size = 3<<20 + 17
	data := e.put("/store/f.root", size, 1)
	u := e.url + "/store/f.root"
	cr := func(a, b int64) string { return fmt.Sprintf("bytes %d-%d/%d", a, b, size) }

	cases := []struct {
		name      string
		rng       string
		code      int
		body      []byte
		contRange string
	}{
		{"whole", "", 200, data, ""},
		{"first bytes", "bytes=0-99", 206, data[:100], cr(0, 99)},
		{"middle", "bytes=1048570-2097160", 206, data[1048570:2097161], cr(1048570, 2097160)},
		{"open ended", fmt.Sprintf("bytes=%d-", size-10), 206, data[size-10:], cr(size-10, size-1)},
		{"suffix", "bytes=-5", 206, data[size-5:], cr(size-5, size-1)},
		{"last past end", fmt.Sprintf("bytes=%d-%d", size-3, size+100), 206, data[size-3:], cr(size-3, size-1)},
		{"unsatisfiable", fmt.Sprintf("bytes=%d-", size), 416, nil, fmt.Sprintf("bytes */%d", size)},
		{"malformed is ignored", "bytes=abc", 200, data, ""},
		{"other unit is ignored", "items=0-1", 200, data, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hdr := map[string]string{}
			if c.rng != "" {
				hdr["Range"] = c.rng
			}
			resp, body := do(t, "GET", u, hdr, nil)
			if resp.StatusCode != c.code {
				t.Fatalf("status %d; want %d (%s)", resp.StatusCode, c.code, body)
			}
			if got := resp.Header.Get("Content-Range"); got != c.contRange {
				t.Errorf("Content-Range %q; want %q", got, c.contRange)
			}
			if c.code == 416 {
				return
			}
			if !bytes.Equal(body, c.body) {
				t.Errorf("body: %d bytes, want %d (equal prefix: %v)", len(body), len(c.body), bytes.HasPrefix(c.body, body[:min(len(body), 10)]))
			}
			if cl := resp.Header.Get("Content-Length"); cl != strconv.Itoa(len(c.body)) {
				t.Errorf("Content-Length %s; want %d", cl, len(c.body))
			}
			if resp.Header.Get("Accept-Ranges") != "bytes" || resp.Header.Get("ETag") == "" || resp.Header.Get("Last-Modified") != "Wed, 01 May 2024 12:00:00 GMT" {
				t.Errorf("headers %v", resp.Header)
			}
		})
	}
}

func TestMultiRange(t *testing.T) {
	e := newEnv(t, envOpts{})
	const size = 2 << 20
	data := e.put("/f", size, 2)
	// Out of order, as uproot may send them; the answer keeps the order.
	want := [][2]int64{{1500000, 1500099}, {0, 9}, {size - 4, size - 1}}
	var parts []string
	for _, r := range want {
		parts = append(parts, fmt.Sprintf("%d-%d", r[0], r[1]))
	}
	resp, body := do(t, "GET", e.url+"/f", map[string]string{"Range": "bytes=" + strings.Join(parts, ", ")}, nil)
	if resp.StatusCode != 206 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if cl, _ := strconv.Atoi(resp.Header.Get("Content-Length")); cl != len(body) {
		t.Fatalf("Content-Length %d, body %d bytes", cl, len(body))
	}
	mt, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/byteranges" {
		t.Fatalf("Content-Type %q", resp.Header.Get("Content-Type"))
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	for i, r := range want {
		p, err := mr.NextPart()
		if err != nil {
			t.Fatalf("part %d: %v", i, err)
		}
		if got := p.Header.Get("Content-Range"); got != fmt.Sprintf("bytes %d-%d/%d", r[0], r[1], size) {
			t.Errorf("part %d Content-Range %q", i, got)
		}
		b, _ := io.ReadAll(p)
		if !bytes.Equal(b, data[r[0]:r[1]+1]) {
			t.Errorf("part %d: wrong bytes", i)
		}
	}
	if _, err := mr.NextPart(); err != io.EOF {
		t.Errorf("after the last part: %v; want EOF", err)
	}

	// HEAD announces the same length without a body.
	hresp, hbody := do(t, "HEAD", e.url+"/f", map[string]string{"Range": "bytes=" + strings.Join(parts, ", ")}, nil)
	if hresp.StatusCode != 206 || len(hbody) != 0 || hresp.Header.Get("Content-Length") == "" {
		t.Errorf("HEAD multi-range: %d, %d body bytes, Content-Length %q", hresp.StatusCode, len(hbody), hresp.Header.Get("Content-Length"))
	}
	// Too many ranges.
	many := strings.Repeat("0-0,", defaultMaxRanges+1)
	if resp, _ := do(t, "GET", e.url+"/f", map[string]string{"Range": "bytes=" + many}, nil); resp.StatusCode != 416 {
		t.Errorf("%d ranges: status %d; want 416", defaultMaxRanges+1, resp.StatusCode)
	}
}

func TestConditional(t *testing.T) {
	e := newEnv(t, envOpts{})
	data := e.put("/f", 1000, 3)
	resp, _ := do(t, "HEAD", e.url+"/f", nil, nil)
	tag := resp.Header.Get("ETag")
	lm := resp.Header.Get("Last-Modified")
	if !strings.HasPrefix(tag, `"`) || lm == "" {
		t.Fatalf("ETag %q Last-Modified %q", tag, lm)
	}
	cases := []struct {
		name string
		hdr  map[string]string
		code int
		body []byte
	}{
		{"If-None-Match matches", map[string]string{"If-None-Match": tag}, 304, nil},
		{"If-None-Match weak matches", map[string]string{"If-None-Match": `"x", W/` + tag}, 304, nil},
		{"If-None-Match star", map[string]string{"If-None-Match": "*"}, 304, nil},
		{"If-None-Match other", map[string]string{"If-None-Match": `"other"`}, 200, data},
		{"If-Modified-Since same", map[string]string{"If-Modified-Since": lm}, 304, nil},
		{"If-Modified-Since earlier", map[string]string{"If-Modified-Since": "Mon, 01 Jan 2024 00:00:00 GMT"}, 200, data},
		{"If-None-Match wins over If-Modified-Since", map[string]string{"If-None-Match": `"other"`, "If-Modified-Since": lm}, 200, data},
		{"If-Range matches", map[string]string{"Range": "bytes=0-9", "If-Range": tag}, 206, data[:10]},
		{"If-Range date matches", map[string]string{"Range": "bytes=0-9", "If-Range": lm}, 206, data[:10]},
		{"If-Range stale", map[string]string{"Range": "bytes=0-9", "If-Range": `"old"`}, 200, data},
		{"If-Range weak never matches", map[string]string{"Range": "bytes=0-9", "If-Range": "W/" + tag}, 200, data},
		{"If-Match matches", map[string]string{"If-Match": tag, "Range": "bytes=0-9"}, 206, data[:10]},
		{"If-Match other", map[string]string{"If-Match": `"other"`}, 412, nil},
		{"If-Unmodified-Since earlier", map[string]string{"If-Unmodified-Since": "Mon, 01 Jan 2024 00:00:00 GMT"}, 412, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := do(t, "GET", e.url+"/f", c.hdr, nil)
			if resp.StatusCode != c.code {
				t.Fatalf("status %d; want %d", resp.StatusCode, c.code)
			}
			if c.code == 304 && (resp.Header.Get("ETag") != tag || len(body) != 0) {
				t.Errorf("304 with ETag %q and %d body bytes", resp.Header.Get("ETag"), len(body))
			}
			if c.body != nil && !bytes.Equal(body, c.body) {
				t.Errorf("body %d bytes; want %d", len(body), len(c.body))
			}
		})
	}
	// A revalidation answered 304 did not open the file.
	if opens := e.cache.Stats().Hits.Load() + e.cache.Stats().Misses.Load() + e.cache.Stats().PartialHits.Load(); opens != 8 {
		t.Errorf("%d opens; want 8 (one per 200/206 GET, none for HEAD, 304 or 412)", opens)
	}
}

// TestDigest: Want-Digest is answered with every algorithm asked for that
// can be had: of a file the cache holds whole all from its own bytes (md5,
// crc32 and SHA-1 too: the origin, which would say otherwise here, is not
// asked), of a file it does not hold from the origin.
func TestDigest(t *testing.T) {
	e := newEnv(t, envOpts{})
	data := e.put("/f", 100000, 4)
	e.put("/cold", 10, 5)
	ad := fmt.Sprintf("adler32=%08x", adler32.Checksum(data))
	cc := fmt.Sprintf("crc32c=%08x", crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)))
	sha, md := sha1.Sum(data), md5.Sum(data)
	e.mem.SetChecksum("/f", "crc32", "0a1b2c3d")
	e.mem.SetChecksum("/f", "md5", "00000000000000000000000000000000")
	e.mem.SetChecksum("/cold", "crc32", "0a1b2c3d")
	if resp, _ := do(t, "GET", e.url+"/f", nil, nil); resp.StatusCode != 200 {
		t.Fatalf("GET: %d", resp.StatusCode)
	}
	pelican := fmt.Sprintf("md5=%s,%s,crc32=%08x,sha=%s", base64.StdEncoding.EncodeToString(md[:]), cc,
		crc32.ChecksumIEEE(data), base64.StdEncoding.EncodeToString(sha[:]))
	for _, c := range []struct{ path, want, got string }{
		{"/f", "adler32", ad}, {"/f", "ADLER32", ad}, {"/f", "crc32c", cc}, {"/f", "crc32c;q=0.3, adler32;q=0.9", ad + "," + cc},
		{"/f", "md5", "md5=" + base64.StdEncoding.EncodeToString(md[:])}, {"/f", "adler32;q=0", ""},
		// What the Pelican client asks: every algorithm it knows.
		{"/f", "md5,crc32c,crc32,sha", pelican},
		// Not held: the origin's, of those it gives (not md5 here).
		{"/cold", "md5,crc32", "crc32=0a1b2c3d"},
	} {
		for _, m := range []string{"HEAD", "GET"} {
			if m == "GET" && c.path == "/cold" {
				continue // a GET would cache it
			}
			resp, _ := do(t, m, e.url+c.path, map[string]string{"Want-Digest": c.want}, nil)
			if got := resp.Header.Get("Digest"); got != c.got {
				t.Errorf("%s %s Want-Digest %q: Digest %q; want %q", m, c.path, c.want, got, c.got)
			}
		}
	}
}

// TestAge: a file the cache holds whole is answered with an Age header
// (GET and HEAD alike, at least 1: a Pelican director's presence check
// counts a cache only with Age > 0); a file it does not hold, or holds in
// part, has none.
func TestAge(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.put("/f", 3<<20, 5)
	// A small file is whole before its first response goes out: that
	// response is still a download, not a hit.
	e.put("/small", 100, 6)
	if resp, _ := do(t, "GET", e.url+"/small", nil, nil); resp.StatusCode != 200 || resp.Header.Get("Age") != "" {
		t.Fatalf("the GET that fetched a small file: %d, Age %q", resp.StatusCode, resp.Header.Get("Age"))
	}
	for _, m := range []string{"HEAD", "GET"} {
		if resp, _ := do(t, m, e.url+"/f", map[string]string{"Range": "bytes=0-9"}, nil); resp.Header.Get("Age") != "" {
			t.Fatalf("%s of a file not held whole: Age %q", m, resp.Header.Get("Age"))
		}
	}
	if resp, _ := do(t, "GET", e.url+"/f", nil, nil); resp.StatusCode != 200 {
		t.Fatalf("GET: %d", resp.StatusCode)
	}
	// The last block may land on disk just after the body has gone out.
	eventually.True(t, func() bool {
		resp, _ := do(t, "HEAD", e.url+"/f", nil, nil)
		return resp.Header.Get("Age") != ""
	}, "the cache to hold the file whole")
	for _, m := range []string{"HEAD", "GET"} {
		resp, _ := do(t, m, e.url+"/f", nil, nil)
		if a, err := strconv.Atoi(resp.Header.Get("Age")); err != nil || a < 1 {
			t.Errorf("%s of a file held whole: Age %q; want a number of seconds >= 1", m, resp.Header.Get("Age"))
		}
	}
	now := time.Unix(1000, 0)
	for _, c := range []struct {
		ago  time.Duration
		want int64
	}{{0, 1}, {-time.Second, 1}, {time.Millisecond, 1}, {time.Second, 1}, {1001 * time.Millisecond, 2}, {time.Hour, 3600}} {
		if got := age(now.Add(-c.ago), now); got != c.want {
			t.Errorf("age of a copy %v old = %d; want %d", c.ago, got, c.want)
		}
	}
}

func TestErrors(t *testing.T) {
	var mu sync.Mutex
	var next error
	failing := func(b backend.Backend) backend.Backend { return &errBackend{Backend: b, mu: &mu, err: &next} }
	e := newEnv(t, envOpts{backend: failing, server: func(c *Config) {
		c.Authorizer = AuthorizerFunc(func(r *http.Request, req *backend.Request, op string) error {
			if strings.HasPrefix(req.Path, "/secret") {
				return errors.New("no token with storage.read:/secret")
			}
			req.User = "tester"
			return nil
		})
	}})
	e.put("/f", 10, 5)
	cases := []struct {
		name   string
		path   string
		err    error
		code   int
		header string
		value  string
		body   string
	}{
		{"not found", "/nope", nil, 404, "", "", "not found"},
		{"authorizer denies", "/secret/x", nil, 403, "", "", "storage.read:/secret"},
		{"backend forbids", "/f", fmt.Errorf("denied by rule 3: %w", backend.ErrForbidden), 403, "", "", "rule 3"},
		{"origin refuses", "/f", fmt.Errorf("x: %w", origin.ErrNotAuthorized), 403, "", "", ""},
		{"origin wants a credential", "/f", fmt.Errorf("x: %w", origin.ErrUnauthenticated), 401, "WWW-Authenticate", "Bearer", ""},
		{"origin down", "/f", fmt.Errorf("dial: %w", origin.ErrUnavailable), 502, "", "", "dial"},
		{"busy", "/f", backend.ErrBusy, 503, "Retry-After", "1", ""},
		{"wait", "/f", &backend.WaitError{Seconds: 7, Reason: "staging"}, 503, "Retry-After", "7", "staging"},
		{"overloaded", "/f", &backend.WaitError{Seconds: 2, Reason: "fetches queued", Err: backend.ErrOverloaded}, 429, "Retry-After", "2", `"error":"cache_overloaded"`},
		{"redirect", "/f", &backend.RedirectError{URL: "http://node2:8000/f"}, 307, "Location", "http://node2:8000/f", ""},
		{"invalid", "/f", fmt.Errorf("bad: %w", backend.ErrInvalidPath), 400, "", "", ""},
		{"forwarding off", "/root://site.example:1094//store/f", nil, 403, "", "", "forwarding"},
		{"dot dot", "/a/../f", nil, 400, "", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mu.Lock()
			next = c.err
			mu.Unlock()
			for _, m := range []string{"GET", "HEAD", "PROPFIND"} {
				resp, body := do(t, m, e.url+c.path, nil, nil)
				if resp.StatusCode != c.code {
					t.Fatalf("%s: status %d; want %d (%s)", m, resp.StatusCode, c.code, body)
				}
				if c.header != "" && resp.Header.Get(c.header) != c.value {
					t.Errorf("%s: %s %q; want %q", m, c.header, resp.Header.Get(c.header), c.value)
				}
				if m == "GET" && !strings.Contains(string(body), c.body) {
					t.Errorf("%s: body %q; want it to contain %q", m, body, c.body)
				}
			}
		})
	}
	mu.Lock()
	next = nil
	mu.Unlock()
	if resp, _ := do(t, "PUT", e.url+"/f", nil, strings.NewReader("x")); resp.StatusCode != 405 || !strings.Contains(resp.Header.Get("Allow"), "PROPFIND") {
		t.Errorf("PUT: %d Allow %q; want 405", resp.StatusCode, resp.Header.Get("Allow"))
	}
	if got := e.metric(t, `hepcache_requests_total{protocol="http",operation="get",outcome="forbidden"}`); got != "5" {
		t.Errorf("forbidden GETs counted %q; want 5", got)
	}
}

// errBackend fails every call with *err when it is set.
type errBackend struct {
	backend.Backend
	mu  *sync.Mutex
	err *error
}

func (b *errBackend) fail() error { b.mu.Lock(); defer b.mu.Unlock(); return *b.err }

func (b *errBackend) Open(ctx context.Context, req backend.Request) (backend.File, error) {
	if err := b.fail(); err != nil {
		return nil, err
	}
	return b.Backend.Open(ctx, req)
}

func (b *errBackend) Stat(ctx context.Context, req backend.Request) (origin.FileInfo, error) {
	if err := b.fail(); err != nil {
		return origin.FileInfo{}, err
	}
	return b.Backend.Stat(ctx, req)
}

type msResponse struct {
	Href     string `xml:"href"`
	Propstat []struct {
		Status string `xml:"status"`
		Prop   struct {
			Length       string    `xml:"getcontentlength"`
			ETag         string    `xml:"getetag"`
			Collection   *struct{} `xml:"resourcetype>collection"`
			LastModified string    `xml:"getlastmodified"`
		} `xml:"prop"`
	} `xml:"propstat"`
}

func propfind(t *testing.T, url, depth string) []msResponse {
	t.Helper()
	resp, body := do(t, "PROPFIND", url, map[string]string{"Depth": depth}, strings.NewReader(`<?xml version="1.0"?><propfind xmlns="DAV:"><allprop/></propfind>`))
	if resp.StatusCode != 207 {
		t.Fatalf("PROPFIND %s: %d %s", url, resp.StatusCode, body)
	}
	var ms struct {
		Responses []msResponse `xml:"response"`
	}
	if err := xml.Unmarshal(body, &ms); err != nil {
		t.Fatalf("multistatus: %v\n%s", err, body)
	}
	return ms.Responses
}

func TestPropfind(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.put("/d/a file.root", 1234, 6)
	e.put("/d/sub/b", 1, 7)
	r := propfind(t, e.url+"/d/a%20file.root", "0")
	if len(r) != 1 || r[0].Href != "/d/a%20file.root" || r[0].Propstat[0].Prop.Length != "1234" || r[0].Propstat[0].Prop.ETag == "" || r[0].Propstat[0].Prop.Collection != nil {
		t.Errorf("depth 0 on a file: %+v", r)
	}
	r = propfind(t, e.url+"/d", "1")
	var got []string
	for _, x := range r {
		got = append(got, fmt.Sprintf("%s dir=%v len=%s", x.Href, x.Propstat[0].Prop.Collection != nil, x.Propstat[0].Prop.Length))
	}
	want := "/d/ dir=true len=|/d/a%20file.root dir=false len=1234|/d/sub/ dir=true len="
	if strings.Join(got, "|") != want {
		t.Errorf("depth 1 on a dir:\n%s\nwant\n%s", strings.Join(got, "|"), want)
	}
	if r := propfind(t, e.url+"/d", "0"); len(r) != 1 {
		t.Errorf("depth 0 on a dir: %d responses; want 1", len(r))
	}
	if resp, _ := do(t, "PROPFIND", e.url+"/d", nil, strings.NewReader("<not xml")); resp.StatusCode != 400 {
		t.Errorf("malformed body: %d; want 400", resp.StatusCode)
	}
	resp, _ := do(t, "OPTIONS", e.url+"/d", nil, nil)
	if resp.Header.Get("DAV") != "1" || !strings.Contains(resp.Header.Get("Allow"), "PROPFIND") {
		t.Errorf("OPTIONS headers %v", resp.Header)
	}
	// GET on a directory lists it.
	resp, body := do(t, "GET", e.url+"/d", nil, nil)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `href="/d/a%20file.root"`) {
		t.Errorf("GET dir: %d %s", resp.StatusCode, body)
	}
}

// holdBeyond makes m's reads reaching past from wait until release is
// closed (or their context ends): an origin still sending the rest.
func holdBeyond(m *origin.Mem, from int64, release <-chan struct{}) {
	m.OnRead(func(ctx context.Context, _ string, off int64, n int) error {
		if off+int64(n) <= from {
			return nil
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}

// TestStreamThrough: a client receives the start of a cold file while the
// origin still holds back the rest.
func TestStreamThrough(t *testing.T) {
	mem := origin.NewMem("mem://slow")
	release := make(chan struct{})
	holdBeyond(mem, 1<<20, release)
	e := newEnv(t, envOpts{origin: mem})
	data := randomBytes(4<<20, 8)
	mem.Put("/big", data, time.Unix(1, 0))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // deadlock guard only
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.url+"/big", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := make([]byte, 512<<10)
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatalf("first 512 KiB while the origin holds back the rest: %v", err)
	}
	close(release)
	rest, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(append(first, rest...), data) {
		t.Fatal("wrong bytes")
	}
}

// TestCutOff: when the origin fails mid-body the client sees a broken
// response, never a short body that looks complete.
func TestCutOff(t *testing.T) {
	mem := origin.NewMem("mem://flaky")
	var from atomic.Int64 // reads reaching past it fail
	from.Store(2 << 20)
	mem.OnRead(func(_ context.Context, _ string, off int64, n int) error {
		if off+int64(n) > from.Load() {
			return fmt.Errorf("connection reset: %w", origin.ErrUnavailable)
		}
		return nil
	})
	e := newEnv(t, envOpts{origin: mem, cache: func(c *cache.Config) { c.Prefetch = -1; c.FetchRetries = -1 }})
	mem.Put("/f", randomBytes(4<<20, 9), time.Unix(1, 0))
	resp, err := http.Get(e.url + "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	b, err := io.ReadAll(resp.Body)
	if err == nil {
		t.Fatalf("read %d bytes without error; want a broken body", len(b))
	}
	if len(b) >= 4<<20 {
		t.Fatalf("got %d bytes", len(b))
	}
	if got := e.metric(t, `hepcache_requests_total{protocol="http",operation="get",outcome="error"}`); got != "1" {
		t.Errorf("cut-off GETs counted %q; want 1", got)
	}
	// A failure before the first byte is a proper error status.
	from.Store(0)
	mem.Put("/g", randomBytes(1000, 10), time.Unix(1, 0))
	if resp, body := do(t, "GET", e.url+"/g", nil, nil); resp.StatusCode != 502 {
		t.Errorf("origin failing at once: %d %s; want 502", resp.StatusCode, body)
	}
}

// TestHitAfterHTTP: a file read through HTTP is a cache hit afterwards.
func TestHitAfterHTTP(t *testing.T) {
	e := newEnv(t, envOpts{})
	data := e.put("/f", 2<<20+3, 11)
	for i := 0; i < 2; i++ {
		if resp, body := do(t, "GET", e.url+"/f", nil, nil); resp.StatusCode != 200 || !bytes.Equal(body, data) {
			t.Fatalf("GET %d: %d", i, resp.StatusCode)
		}
	}
	st := e.cache.Stats()
	if st.Misses.Load() != 1 || st.Hits.Load() != 1 {
		t.Fatalf("misses %d hits %d; want 1 and 1", st.Misses.Load(), st.Hits.Load())
	}
	if got := e.metric(t, `hepcache_opens_total{result="hit"}`); got != "1" {
		t.Errorf("metrics hit opens %q; want 1", got)
	}
}

// TestShutdown: Shutdown lets a request in flight finish.
func TestShutdown(t *testing.T) {
	mem := origin.NewMem("mem://slow")
	release := make(chan struct{})
	holdBeyond(mem, 1<<20, release)
	e := newEnv(t, envOpts{origin: mem})
	data := randomBytes(2<<20, 12)
	mem.Put("/f", data, time.Unix(1, 0))
	resp, err := http.Get(e.url + "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	head := make([]byte, 1000)
	if _, err := io.ReadFull(resp.Body, head); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		done <- e.srv.Shutdown(ctx)
	}()
	close(release)
	rest, err := io.ReadAll(resp.Body)
	if err != nil || !bytes.Equal(append(head, rest...), data) {
		t.Fatalf("in-flight body during shutdown: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(e.url + "/f"); err == nil {
		t.Fatal("server still accepts after Shutdown")
	}
}

func TestClientsTracked(t *testing.T) {
	mem := origin.NewMem("mem://slow")
	release := make(chan struct{})
	holdBeyond(mem, 1<<20, release)
	e := newEnv(t, envOpts{origin: mem})
	mem.Put("/f", randomBytes(2<<20, 13), time.Unix(1, 0))
	resp, err := http.Get(e.url + "/f")
	if err != nil {
		t.Fatal(err)
	}
	io.ReadFull(resp.Body, make([]byte, 1000))
	list := e.reg.Clients().List()
	found := false
	for _, c := range list {
		if c.Protocol == "http" && c.Activity == "GET /f" {
			found = true
		}
	}
	if !found {
		t.Errorf("clients %+v; want one http client reading /f", list)
	}
	close(release)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"bytes=0-0", "bytes=-5", "bytes=5-", "bytes=1-2, 4-5,,", "bytes=99999999999999999999-", "bytes= 3 - 4", "bytes=-0"} {
		f.Add(s, int64(100))
	}
	f.Fuzz(func(t *testing.T, s string, size int64) {
		if size < 0 {
			return
		}
		rs, err := parseRange(s, size)
		if err != nil {
			return
		}
		for _, r := range rs {
			if r.start < 0 || r.length <= 0 || r.start+r.length > size {
				t.Fatalf("parseRange(%q, %d) gave %+v", s, size, r)
			}
		}
	})
}

// TestDenyListing: with listings denied (http.listingdeny), PROPFIND with
// depth and GET of a directory are refused; files and depth-0 PROPFIND
// are not.
func TestDenyListing(t *testing.T) {
	e := newEnv(t, envOpts{server: func(c *Config) { c.DenyListing = true }})
	e.put("/d/a.root", 1234, 6)
	for _, tc := range []struct {
		method, path, depth string
		want                int
	}{
		{"PROPFIND", "/d", "1", 403},
		{"PROPFIND", "/d", "", 403},
		{"GET", "/d/", "", 403},
		{"PROPFIND", "/d", "0", 207},
		{"GET", "/d/a.root", "", 200},
	} {
		hdr := map[string]string{}
		if tc.depth != "" {
			hdr["Depth"] = tc.depth
		}
		if resp, body := do(t, tc.method, e.url+tc.path, hdr, nil); resp.StatusCode != tc.want {
			t.Errorf("%s %s depth %q: %d %.100s, want %d", tc.method, tc.path, tc.depth, resp.StatusCode, body, tc.want)
		}
	}
}
