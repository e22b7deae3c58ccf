package httpfront

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/origin"
	httporigin "github.com/hepcache/hepcache/origin/http"
)

// pelicanHeaders are the headers the Pelican client sends with every GET
// (client/handle_http.go).
var pelicanHeaders = []string{"-H", "X-Transfer-Status: true", "-H", "TE: trailers", "-H", "X-Pelican-Timeout: 9.5s"}

// TestPelicanClientHeaders (issue 33 item 4): curl asking as the Pelican
// client does gets the Server header and, at the end of the body, the
// X-Transfer-Status trailer "200: OK"; a client that does not ask gets
// neither trailer nor chunking (Content-Length as before).
func TestPelicanClientHeaders(t *testing.T) {
	requireTool(t, "curl")
	e := newEnv(t, envOpts{})
	data := e.put("/public/f", 3<<20+7, 31)
	code, h, b := curl(t, append(pelicanHeaders, e.url+"/public/f")...)
	if code != "200" || !bytes.Equal(b, data) {
		t.Fatalf("%s, %d bytes", code, len(b))
	}
	if s := header(h, "Server"); !strings.HasPrefix(s, "hepcache/") {
		t.Errorf("Server %q; want hepcache/<version>\n%s", s, h)
	}
	if ts := header(h, "X-Transfer-Status"); ts != "200: OK" || header(h, "Trailer") != "X-Transfer-Status" {
		t.Errorf("trailer X-Transfer-Status %q (declared %q); want 200: OK\n%s", ts, header(h, "Trailer"), h)
	}
	code, h, b = curl(t, append([]string{"-r", "100-199"}, append(pelicanHeaders, e.url+"/public/f")...)...)
	if code != "206" || !bytes.Equal(b, data[100:200]) || header(h, "X-Transfer-Status") != "200: OK" {
		t.Errorf("a range: %s, %d bytes, headers\n%s", code, len(b), h)
	}
	code, h, _ = curl(t, e.url+"/public/f")
	if code != "200" || header(h, "X-Transfer-Status") != "" || header(h, "Content-Length") != fmt.Sprint(len(data)) || header(h, "Server") == "" {
		t.Errorf("without asking: %s, headers\n%s", code, h)
	}
	// A HEAD, and an error, carry Server too; the trailer is for bodies.
	code, h, _ = curl(t, append([]string{"-I"}, append(pelicanHeaders, e.url+"/public/nope")...)...)
	if code != "404" || header(h, "Server") == "" || header(h, "X-Transfer-Status") != "" {
		t.Errorf("HEAD of a missing file: %s, headers\n%s", code, h)
	}
}

// TestTransferStatusAfterFailure: when the origin fails after the headers
// went out, a client that asked for the trailer reads "500: <why>" in it
// (the Pelican client then fails the transfer); before, the connection
// was cut and the client was told nothing. A client that did not ask
// still gets a cut connection.
func TestTransferStatusAfterFailure(t *testing.T) {
	mem := origin.NewMem("mem://flaky")
	mem.OnRead(func(_ context.Context, _ string, off int64, n int) error {
		if off+int64(n) > 2<<20 {
			return fmt.Errorf("connection reset: %w", origin.ErrUnavailable)
		}
		return nil
	})
	e := newEnv(t, envOpts{origin: mem, cache: func(c *cache.Config) { c.Prefetch = -1; c.FetchRetries = -1 }})
	mem.Put("/f", randomBytes(4<<20, 9), time.Unix(1, 0))
	req, _ := http.NewRequest("GET", e.url+"/f", nil)
	req.Header.Set("X-Transfer-Status", "true")
	req.Header.Set("TE", "trailers")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d, body of %d bytes, %v; want a body ended for the trailer", resp.StatusCode, len(b), err)
	}
	if ts := resp.Trailer.Get("X-Transfer-Status"); !strings.HasPrefix(ts, "500: ") || len(b) >= 4<<20 {
		t.Fatalf("trailer %q after %d of %d bytes; want 500 and the reason", ts, len(b), 4<<20)
	}
	mem.Put("/g", randomBytes(4<<20, 10), time.Unix(2, 0))
	resp, err = http.Get(e.url + "/g")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Fatal("without the trailer asked for: a short body read without error")
	}
	resp.Body.Close()
}

// TestPelicanTimeout: an origin that does not answer within the client's
// X-Pelican-Timeout gets the client a 504 saying so, while the fetch goes
// on: the next request finds the file.
func TestPelicanTimeout(t *testing.T) {
	mem := origin.NewMem("mem://slow")
	release := make(chan struct{})
	holdBeyond(mem, 0, release)
	e := newEnv(t, envOpts{origin: mem})
	data := randomBytes(1<<20, 12)
	mem.Put("/f", data, time.Unix(3, 0))
	code, h, b := curl(t, "-H", "X-Pelican-Timeout: 200ms", e.url+"/f")
	if code != "504" || !strings.Contains(string(b), "X-Pelican-Timeout") {
		t.Fatalf("%s %q\n%s; want 504 naming X-Pelican-Timeout", code, b, h)
	}
	close(release)
	code, _, b = curl(t, "-H", "X-Pelican-Timeout: 1m0s", e.url+"/f")
	if code != "200" || !bytes.Equal(b, data) {
		t.Fatalf("after the origin answered: %s, %d bytes", code, len(b))
	}
}

// TestOrigin401: an origin that answers 401 (a token that does not fit)
// is answered 401, not 403.
func TestOrigin401(t *testing.T) {
	var asked atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		http.Error(w, "token does not fit", http.StatusUnauthorized)
	}))
	defer srv.Close()
	o, err := httporigin.New(&httporigin.Config{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOpts{origin: o})
	code, h, _ := curl(t, e.url+"/private/f")
	if code != "401" || header(h, "WWW-Authenticate") == "" || asked.Load() == 0 {
		t.Fatalf("%s\n%s; want 401 as the origin answered", code, h)
	}
}

// TestShedAnswers429 (issue 33 item 6): while the fetches clients wait
// for are queued beyond the cache's bound, curl asking for a file the
// cache does not hold gets 429 at once, with Retry-After and the reason
// Pelican's client reads (cache_overloaded), instead of joining the
// queue; a file held whole is served; the shed opens are counted in
// /metrics.
func TestShedAnswers429(t *testing.T) {
	requireTool(t, "curl")
	mem := origin.NewMem("mem://far")
	e := newEnv(t, envOpts{origin: mem, cache: func(c *cache.Config) {
		c.BlockSize, c.FetchMemory, c.RAM, c.Prefetch = 1<<20, 2<<20, 64<<20, -1
	}})
	held := randomBytes(1000, 40)
	mem.Put("/held", held, time.Unix(4, 0))
	if code, _, b := curl(t, e.url+"/held"); code != "200" || !bytes.Equal(b, held) {
		t.Fatalf("/held: %s", code)
	}
	for i := range 6 {
		mem.Put(fmt.Sprintf("/cold%d", i), randomBytes(1<<20, uint64(41+i)), time.Unix(4, 0))
	}
	release := mem.Gate()
	defer release()
	done := make(chan int, 5)
	for i := range 5 {
		go func() {
			resp, err := http.Get(fmt.Sprintf("%s/cold%d", e.url, i))
			if err != nil {
				done <- 0
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			done <- resp.StatusCode
		}()
	}
	// Two fetches in flight, three queued behind them: past the bound.
	eventually.True(t, func() bool { return e.cache.FetchWaiting() > 2<<20 }, "three fetches to queue")
	code, h, b := curl(t, e.url+"/cold5")
	if code != "429" || header(h, "Retry-After") == "" || !strings.Contains(string(b), `"error":"cache_overloaded"`) {
		t.Fatalf("%s %q\n%s; want 429 with Retry-After and cache_overloaded", code, b, h)
	}
	if code, _, b := curl(t, e.url+"/held"); code != "200" || !bytes.Equal(b, held) {
		t.Fatalf("a file held whole while overloaded: %s", code)
	}
	if got := e.metric(t, "hepcache_opens_shed_total"); got == "" || got == "0" {
		t.Errorf("hepcache_opens_shed_total %q; want the shed opens counted", got)
	}
	release()
	for range 5 {
		if c := <-done; c != 200 {
			t.Errorf("a queued GET: %d", c)
		}
	}
}

// TestTransferStatusOverHTTP2: over HTTPS with HTTP/2, as Go clients (the
// Pelican client among them) speak it, the trailer comes after the body
// and Content-Length stays (HTTP/2 frames trailers itself).
func TestTransferStatusOverHTTP2(t *testing.T) {
	cert, caFile := selfSigned(t)
	e := newEnv(t, envOpts{server: func(c *Config) { c.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}} }})
	data := e.put("/f", 3<<20, 52)
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	cl := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	req, _ := http.NewRequest("GET", e.url+"/f", nil)
	req.Header.Set("X-Transfer-Status", "true")
	req.Header.Set("TE", "trailers")
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Equal(b, data) || resp.ProtoMajor != 2 || resp.ContentLength != int64(len(data)) {
		t.Fatalf("%s, %d bytes, Content-Length %d, %v", resp.Proto, len(b), resp.ContentLength, err)
	}
	if ts := resp.Trailer.Get("X-Transfer-Status"); ts != "200: OK" {
		t.Fatalf("trailer %q over HTTP/2; want 200: OK", ts)
	}
}
