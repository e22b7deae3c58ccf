package httpfront

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/adler32"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/internal/nginxtest"
	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/upstream"
	httporigin "github.com/hepcache/hepcache/origin/http"
)

// curl runs curl and returns the response headers and body files' content.
func curl(t *testing.T, args ...string) (status string, headers string, body []byte) {
	t.Helper()
	bin := requireTool(t, "curl")
	dir := t.TempDir()
	hf, bf := filepath.Join(dir, "h"), filepath.Join(dir, "b")
	out, err := run(t, nil, bin, append([]string{"-sS", "-D", hf, "-o", bf, "-w", "%{http_code}"}, args...)...)
	if err != nil {
		t.Fatalf("curl %q: %v\n%s", args, err, out)
	}
	h, _ := os.ReadFile(hf)
	b, _ := os.ReadFile(bf)
	return strings.TrimSpace(out), string(h), b
}

func header(headers, name string) string {
	for _, l := range strings.Split(headers, "\r\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.EqualFold(k, name) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func TestCurl(t *testing.T) {
	requireTool(t, "curl")
	e := newEnv(t, envOpts{})
	const size = 1<<20 + 999
	data := e.put("/store/data/f.root", size, 21)
	e.put("/store/data/g.root", 10, 22)
	u := e.url + "/store/data/f.root"

	t.Run("GET", func(t *testing.T) {
		code, h, b := curl(t, u)
		if code != "200" || !bytes.Equal(b, data) || header(h, "Content-Length") != fmt.Sprint(size) {
			t.Fatalf("%s, %d bytes, headers\n%s", code, len(b), h)
		}
	})
	t.Run("range", func(t *testing.T) {
		code, h, b := curl(t, "-r", "1000-1999", u)
		if code != "206" || !bytes.Equal(b, data[1000:2000]) || header(h, "Content-Range") != fmt.Sprintf("bytes 1000-1999/%d", size) {
			t.Fatalf("%s, %d bytes, headers\n%s", code, len(b), h)
		}
	})
	t.Run("multi-range", func(t *testing.T) {
		code, h, b := curl(t, "-r", "0-9,500000-500009", u)
		if code != "206" || !strings.HasPrefix(header(h, "Content-Type"), "multipart/byteranges; boundary=") {
			t.Fatalf("%s, headers\n%s", code, h)
		}
		if !bytes.Contains(b, data[:10]) || !bytes.Contains(b, data[500000:500010]) || !bytes.Contains(b, []byte("Content-Range: bytes 500000-500009/")) {
			t.Fatalf("multipart body lacks the ranges:\n%q", b)
		}
	})
	var tag string
	t.Run("HEAD", func(t *testing.T) {
		code, h, b := curl(t, "-I", u)
		tag = header(h, "ETag")
		// curl -I writes the headers as its output: no body.
		if code != "200" || !bytes.Equal(bytes.TrimSpace(b), bytes.TrimSpace([]byte(h))) || header(h, "Content-Length") != fmt.Sprint(size) || tag == "" || header(h, "Last-Modified") == "" || header(h, "Accept-Ranges") != "bytes" {
			t.Fatalf("%s, headers\n%s", code, h)
		}
	})
	t.Run("304", func(t *testing.T) {
		if code, h, _ := curl(t, "-H", "If-None-Match: "+tag, u); code != "304" {
			t.Fatalf("If-None-Match: %s\n%s", code, h)
		}
		// curl -z sends If-Modified-Since.
		if code, h, _ := curl(t, "-z", "Wed, 01 May 2024 12:00:00 GMT", u); code != "304" {
			t.Fatalf("-z: %s\n%s", code, h)
		}
	})
	t.Run("416", func(t *testing.T) {
		code, h, _ := curl(t, "-r", fmt.Sprintf("%d-", size+5), u)
		if code != "416" || header(h, "Content-Range") != fmt.Sprintf("bytes */%d", size) {
			t.Fatalf("%s\n%s", code, h)
		}
	})
	t.Run("404", func(t *testing.T) {
		if code, _, b := curl(t, e.url+"/store/nope"); code != "404" {
			t.Fatalf("%s %s", code, b)
		}
	})
	t.Run("digest", func(t *testing.T) {
		code, h, _ := curl(t, "-I", "-H", "Want-Digest: adler32", u)
		if want := fmt.Sprintf("adler32=%08x", adler32.Checksum(data)); code != "200" || header(h, "Digest") != want {
			t.Fatalf("%s Digest %q; want %q", code, header(h, "Digest"), want)
		}
		code, h, _ = curl(t, "-I", "-H", "Want-Digest: crc32c, adler32", u)
		if want := fmt.Sprintf("crc32c=%08x,adler32=%08x", crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)), adler32.Checksum(data)); code != "200" || header(h, "Digest") != want {
			t.Fatalf("%s Digest %q; want %q", code, header(h, "Digest"), want)
		}
	})
	t.Run("Age", func(t *testing.T) {
		// The file was read whole above: held, it has an Age of at least 1.
		eventually.True(t, func() bool { _, h, _ := curl(t, "-I", u); return header(h, "Age") != "" }, "an Age header on a held file")
		code, h, _ := curl(t, "-I", u)
		if a, err := strconv.Atoi(header(h, "Age")); code != "200" || err != nil || a < 1 {
			t.Fatalf("%s Age %q; want >= 1", code, header(h, "Age"))
		}
	})
	t.Run("PROPFIND", func(t *testing.T) {
		code, _, b := curl(t, "-X", "PROPFIND", "-H", "Depth: 1", e.url+"/store/data")
		s := string(b)
		if code != "207" || !strings.Contains(s, "<D:href>/store/data/f.root</D:href>") || !strings.Contains(s, fmt.Sprintf("<D:getcontentlength>%d</D:getcontentlength>", size)) || !strings.Contains(s, "<D:href>/store/data/g.root</D:href>") {
			t.Fatalf("%s\n%s", code, s)
		}
	})
	// The file went through the cache once; every later GET was a hit.
	st := e.cache.Stats()
	if st.Misses.Load() != 1 || st.Hits.Load() < 3 {
		t.Errorf("misses %d hits %d; want 1 miss, the rest hits", st.Misses.Load(), st.Hits.Load())
	}
}

// nginxEnv serves dir through nginx -> origin/http -> cache -> front end.
func nginxEnv(t *testing.T, dir string) (*env, *nginxtest.Server) {
	t.Helper()
	ng := nginxtest.Start(t, dir, nginxtest.Options{WebDAV: true})
	o, err := httporigin.New(&httporigin.Config{URL: ng.URL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	return newEnv(t, envOpts{origin: o}), ng
}

func nginxGets(t *testing.T, ng *nginxtest.Server) int {
	n := 0
	for _, r := range ng.Requests(t) {
		if r.Method == "GET" {
			n++
		}
	}
	return n
}

const makeROOT = `
import sys, numpy as np, uproot
with uproot.recreate(sys.argv[1]) as f:
    f["events"] = {"px": np.arange(200000, dtype=np.float64) * 0.5, "n": np.arange(200000, dtype=np.int32) % 7}
`

const readROOT = `
import json, sys, uproot
opts = {}
if sys.argv[2] == "HTTPSource":
    opts["handler"] = uproot.source.http.HTTPSource
with uproot.open(sys.argv[1], **opts) as f:
    t = f["events"]
    px = t["px"].array(library="np")
    n = t["n"].array(library="np")
    print(json.dumps({"entries": int(t.num_entries), "px_sum": float(px.sum()), "n_sum": int(n.sum()), "handler": type(f.file.source).__name__}))
`

// TestUproot: uproot reads a ROOT file over http through the cache, with
// its default handler (fsspec + aiohttp) and with HTTPSource (multi-range
// GETs); the origin is a real nginx.
func TestUproot(t *testing.T) {
	py := realclient.Python(t, realclient.VenvPython(), "uproot", "aiohttp")
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "store"), 0o755)
	file := filepath.Join(root, "store", "events.root")
	if out, err := run(t, nil, py, "-c", makeROOT, file); err != nil {
		t.Fatalf("create ROOT file: %v\n%s", err, out)
	}
	e, ng := nginxEnv(t, root)
	want := map[string]any{"entries": 200000.0, "px_sum": 0.5 * 199999 * 200000 / 2, "n_sum": float64(sumMod7(200000))}
	for i, handler := range []string{"default", "HTTPSource", "HTTPSource"} {
		out, err := run(t, nil, py, "-c", readROOT, e.url+"/store/events.root", handler)
		if err != nil {
			t.Fatalf("uproot (%s): %v\n%s", handler, err, out)
		}
		var got map[string]any
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
			t.Fatalf("uproot output %q: %v", out, err)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("uproot (%s) %s = %v; want %v", handler, k, got[k], v)
			}
		}
		t.Logf("uproot run %d: %v", i, got)
		if i == 1 {
			// From now on everything comes from the cache.
			gets := nginxGets(t, ng)
			t.Cleanup(func() {
				if g := nginxGets(t, ng); g != gets {
					t.Errorf("nginx GETs went from %d to %d while the file was cached", gets, g)
				}
			})
		}
	}
	st := e.cache.Stats()
	if st.Hits.Load() == 0 {
		t.Errorf("no cache hit after three uproot reads (misses %d partial %d)", st.Misses.Load(), st.PartialHits.Load())
	}
	reqs := e.metric(t, `hepcache_requests_total{protocol="http",operation="get",outcome="ok"}`)
	t.Logf("front end served %s GETs; cache hits %d partial %d misses %d", reqs, st.Hits.Load(), st.PartialHits.Load(), st.Misses.Load())
}

func sumMod7(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += i % 7
	}
	return s
}

func TestDavix(t *testing.T) {
	get := requireTool(t, "davix-get")
	ls := requireTool(t, "davix-ls")
	e := newEnv(t, envOpts{})
	data := e.put("/store/d/f.root", 3<<20+1, 31)
	e.put("/store/d/other", 5, 32)
	out := filepath.Join(t.TempDir(), "f.root")
	if msg, err := run(t, nil, get, e.url+"/store/d/f.root", out); err != nil {
		t.Fatalf("davix-get: %v\n%s", err, msg)
	}
	if b, _ := os.ReadFile(out); !bytes.Equal(b, data) {
		t.Fatalf("davix-get wrote %d bytes; want the file's %d", len(b), len(data))
	}
	msg, err := run(t, nil, ls, "-l", e.url+"/store/d")
	if err != nil {
		t.Fatalf("davix-ls: %v\n%s", err, msg)
	}
	if !strings.Contains(msg, "f.root") || !strings.Contains(msg, fmt.Sprint(len(data))) || !strings.Contains(msg, "other") {
		t.Fatalf("davix-ls -l output:\n%s", msg)
	}
	if msg, err := run(t, nil, get, e.url+"/store/d/nope", filepath.Join(t.TempDir(), "x")); err == nil {
		t.Fatalf("davix-get of a missing file succeeded:\n%s", msg)
	}
}

func TestGfal(t *testing.T) {
	cp := requireTool(t, "gfal-copy")
	ls := requireTool(t, "gfal-ls")
	sum := requireTool(t, "gfal-sum")
	e := newEnv(t, envOpts{})
	data := e.put("/store/g/f.root", 2<<20+7, 41)
	e.put("/store/g/sub/x", 5, 42)
	dst := filepath.Join(t.TempDir(), "copy.root")
	// gfal reads X509/token settings from the environment; none here.
	if msg, err := run(t, nil, cp, "-f", e.url+"/store/g/f.root", "file://"+dst); err != nil {
		t.Fatalf("gfal-copy: %v\n%s", err, msg)
	}
	if b, _ := os.ReadFile(dst); !bytes.Equal(b, data) {
		t.Fatalf("gfal-copy wrote %d bytes; want %d", len(b), len(data))
	}
	msg, err := run(t, nil, ls, "-l", e.url+"/store/g")
	if err != nil || !strings.Contains(msg, "f.root") || !strings.Contains(msg, "sub") {
		t.Fatalf("gfal-ls: %v\n%s", err, msg)
	}
	msg, err = run(t, nil, sum, e.url+"/store/g/f.root", "ADLER32")
	if want := fmt.Sprintf("%08x", adler32.Checksum(data)); err != nil || !strings.Contains(msg, want) {
		t.Fatalf("gfal-sum: %v\n%s\nwant %s", err, msg, want)
	}
	if e.cache.Stats().Misses.Load() != 1 {
		t.Errorf("misses %d; want 1", e.cache.Stats().Misses.Load())
	}
}

// TestForwardingOverHTTP: GET /http://host:port/path reads path from the
// origin the URL names when the forwarding allow-list permits it (here a
// real nginx reached through origin/http), and is refused otherwise.
func TestForwardingOverHTTP(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "data"), 0o755)
	data := randomBytes(300000, 61)
	os.WriteFile(filepath.Join(root, "data", "f.bin"), data, 0o644)
	ng := nginxtest.Start(t, root, nginxtest.Options{})
	set, err := upstream.New(upstream.Config{
		ForwardAllow: []string{"127.0.0.1"},
		Dial:         map[string]upstream.DialFunc{"http": httporigin.Dial(httporigin.Config{})},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { set.Close() })
	e := newEnv(t, envOpts{cache: func(c *cache.Config) { c.Origins = set }})
	code, h, b := curl(t, e.url+"/"+ng.URL+"/data/f.bin")
	if code != "200" || !bytes.Equal(b, data) {
		t.Fatalf("forwarded GET: %s, %d bytes\n%s", code, len(b), h)
	}
	code, _, b = curl(t, "-r", "5-9", e.url+"/"+ng.URL+"/data/f.bin")
	if code != "206" || !bytes.Equal(b, data[5:10]) {
		t.Fatalf("forwarded range: %s %q", code, b)
	}
	if st := e.cache.Stats(); st.Misses.Load() != 1 || st.Hits.Load() != 1 {
		t.Errorf("misses %d hits %d; want 1 and 1", st.Misses.Load(), st.Hits.Load())
	}
	if code, _, b := curl(t, e.url+"/http://localhost:1/data/f.bin"); code != "403" || !strings.Contains(string(b), "not allowed") {
		t.Errorf("forwarding to a host not allowed: %s %s", code, b)
	}
	if code, _, _ := curl(t, e.url+"/data/f.bin"); code != "403" {
		t.Errorf("no default origin: %s; want 403", code)
	}
}
