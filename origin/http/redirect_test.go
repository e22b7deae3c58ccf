package httporigin_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/nginxtest"
	"github.com/hepcache/hepcache/origin"
	httporigin "github.com/hepcache/hepcache/origin/http"
)

// TestRedirectorSeesOneRequestPerFile: the cache in front of a real nginx
// that redirects every request (as a Pelican director or a dCache door
// does) to another nginx holding the data. A cold 64 MiB read sends the
// redirector the open's HEAD and no block read (it sent one GET per block
// before, 64 of them); a hit sends it nothing.
func TestRedirectorSeesOneRequestPerFile(t *testing.T) {
	root, data := tree(t, 64<<20)
	data2 := nginxtest.Start(t, root, nginxtest.Options{})
	u, _ := url.Parse(data2.URL)
	redir := nginxtest.Start(t, t.TempDir(), nginxtest.Options{LocationExtra: "return 307 http://" + u.Host + "$request_uri;"})
	o := newOrigin(t, redir.URL, nil)
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
		t.Fatal("cold read through the redirector: wrong bytes")
	}
	cold := redir.Requests(t)
	if len(cold) == 0 || len(cold) > 4 {
		t.Errorf("the redirector saw %d requests for a cold 64 MiB read (first %+v); want 1 to 4", len(cold), cold[:min(len(cold), 3)])
	}
	gets := 0
	for _, r := range data2.Requests(t) {
		if r.Method == "GET" {
			gets++
		}
	}
	if gets < 64 {
		t.Errorf("the data server saw %d GETs; want the 64 blocks read there", gets)
	}
	if got := read(); !bytes.Equal(got, data) {
		t.Fatal("hit: wrong bytes")
	}
	if hit := redir.Requests(t)[len(cold):]; len(hit) != 0 {
		t.Errorf("a hit sent the redirector %d requests: %+v", len(hit), hit)
	}
}

// counter counts a test server's requests by method.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) add(method string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[method]++
}

func (c *counter) get(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[method]
}

// TestRedirectTargetFailsOrExpires: a kept target that stops answering is
// dropped and the read asked of the redirector again, which sends it to
// another target; a target past RedirectTTL is asked again too.
func TestRedirectTargetFailsOrExpires(t *testing.T) {
	body := strings.Repeat("0123456789", 1000)
	serve := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		http.ServeContent(w, r, "f", time.Unix(1e9, 0), strings.NewReader(body))
	}
	var aDown atomic.Bool
	var aReads, bReads counter
	a := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if aDown.Load() {
			http.Error(w, "gone", http.StatusServiceUnavailable)
			return
		}
		aReads.add(r.Method)
		serve(w, r)
	}))
	defer a.Close()
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bReads.add(r.Method)
		serve(w, r)
	}))
	defer b.Close()
	var dir counter
	director := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dir.add(r.Method)
		to := a.URL
		if aDown.Load() {
			to = b.URL
		}
		http.Redirect(w, r, to+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer director.Close()
	now := time.Unix(2e9, 0)
	var clock sync.Mutex
	o := newOrigin(t, director.URL, func(c *httporigin.Config) {
		c.RedirectTTL = time.Hour
		httporigin.SetClock(c, func() time.Time { clock.Lock(); defer clock.Unlock(); return now })
	})
	ctx := context.Background()
	f, err := o.Open(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	read := func(off int64) {
		t.Helper()
		buf := make([]byte, 100)
		if _, err := f.ReadAt(ctx, buf, off); err != nil || string(buf) != body[off:off+100] {
			t.Fatalf("read @%d: %q, %v", off, buf, err)
		}
	}
	for off := int64(0); off < 5000; off += 1000 {
		read(off)
	}
	if dir.get("HEAD") != 1 || dir.get("GET") != 0 || aReads.get("GET") != 5 {
		t.Fatalf("director saw %v, target %v; want the open's HEAD only, and 5 GETs at the target", dir.n, aReads.n)
	}
	aDown.Store(true)
	read(6000)
	read(7000)
	if dir.get("GET") != 1 || bReads.get("GET") != 2 {
		t.Fatalf("after the target failed: director %v, new target %v; want one GET asked of the director, then the new target kept", dir.n, bReads.n)
	}
	clock.Lock()
	now = now.Add(2 * time.Hour)
	clock.Unlock()
	read(8000)
	if dir.get("GET") != 2 {
		t.Fatalf("a target past RedirectTTL: director %v; want it asked again", dir.n)
	}
}

// TestSingleUseRedirects: a door whose redirects are good for one request
// (the first reuse of a target fails): the read is asked of the door again
// and targets are no longer kept, so no later read fails first.
func TestSingleUseRedirects(t *testing.T) {
	body := strings.Repeat("abcdefghij", 1000)
	var mu sync.Mutex
	used := map[string]bool{}
	failed := 0
	pool := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("mover")
		mu.Lock()
		once := !used[id]
		used[id] = true
		if !once {
			failed++
		}
		mu.Unlock()
		if !once {
			http.Error(w, "no such mover", http.StatusNotFound)
			return
		}
		w.Header().Set("ETag", `"v1"`)
		http.ServeContent(w, r, "f", time.Unix(1e9, 0), strings.NewReader(body))
	}))
	defer pool.Close()
	var n atomic.Int64
	door := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			w.Header().Set("ETag", `"v1"`)
			http.ServeContent(w, r, "f", time.Unix(1e9, 0), strings.NewReader(body))
			return
		}
		http.Redirect(w, r, fmt.Sprintf("%s%s?mover=%d", pool.URL, r.URL.Path, n.Add(1)), http.StatusFound)
	}))
	defer door.Close()
	o := newOrigin(t, door.URL, nil)
	ctx := context.Background()
	f, err := o.Open(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	for off := int64(0); off < 6000; off += 1000 {
		buf := make([]byte, 100)
		if _, err := f.ReadAt(ctx, buf, off); err != nil || string(buf) != body[off:off+100] {
			t.Fatalf("read @%d: %q, %v", off, buf, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if failed > 1 {
		t.Errorf("%d reads failed at the pool first; want the first reuse at most", failed)
	}
}

// TestRedirectCredentials (issue 36 item 5): with the Pelican member's
// settings (AuthorizeRedirects, ForwardClientToken) the federation token
// and the client's token follow the director's redirect to an https host
// it names, and from there to the same host; never to an http:// target
// (the token went there before), nor onward to a host only an origin
// named. A kept target gets them only if it got them when learnt.
func TestRedirectCredentials(t *testing.T) {
	type seen struct{ auth, authz string }
	var mu sync.Mutex
	got := map[string][]seen{}
	record := func(name string, r *http.Request) {
		mu.Lock()
		got[name] = append(got[name], seen{r.Header.Get("Authorization"), r.URL.Query().Get("authz")})
		mu.Unlock()
	}
	serve := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		http.ServeContent(w, r, "f", time.Unix(1e9, 0), strings.NewReader("federated bytes"))
	}
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { record("plain", r); serve(w, r) }))
	defer plain.Close()
	third := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { record("third", r); serve(w, r) }))
	defer third.Close()
	fedOrigin := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		record("origin", r)
		switch r.URL.Path {
		case "/onward":
			// An origin sending the cache on to a host nobody named.
			http.Redirect(w, r, third.URL+"/f?"+r.URL.RawQuery, http.StatusTemporaryRedirect)
		case "/hop":
			http.Redirect(w, r, "/f?"+r.URL.RawQuery, http.StatusTemporaryRedirect)
		default:
			serve(w, r)
		}
	}))
	defer fedOrigin.Close()
	director := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		record("director", r)
		p := strings.TrimPrefix(r.URL.Path, "/api/v1.0/director/origin")
		to := fedOrigin.URL + p
		if p == "/insecure" {
			to = plain.URL + "/f"
		}
		// As Pelican's director: the request's query (authz) is kept.
		http.Redirect(w, r, to+"?"+r.URL.RawQuery, http.StatusTemporaryRedirect)
	}))
	defer director.Close()
	pool := director.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	o := newOrigin(t, director.URL+"/api/v1.0/director/origin", func(c *httporigin.Config) {
		c.TLSConfig = &tls.Config{RootCAs: pool}
		c.Authorize = func(r *http.Request) error { r.Header.Set("Authorization", "Bearer fed"); return nil }
		c.AuthorizeRedirects, c.ForwardClientToken = true, true
	})
	ctx := origin.WithClientToken(context.Background(), "client")
	cases := []struct {
		path string
		// where each request of the open and one read went, and whether
		// it carried the credentials
		want map[string]bool
	}{
		{"/f", map[string]bool{"director": true, "origin": true}},
		{"/hop", map[string]bool{"director": true, "origin": true}},
		{"/insecure", map[string]bool{"director": true, "plain": false}},
		{"/onward", map[string]bool{"director": true, "origin": true, "third": false}},
	}
	for _, c := range cases {
		t.Run(strings.TrimPrefix(c.path, "/"), func(t *testing.T) {
			mu.Lock()
			got = map[string][]seen{}
			mu.Unlock()
			f, err := o.Open(ctx, c.path)
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 9)
			if _, err := f.ReadAt(context.Background(), buf, 0); err != nil || string(buf) != "federated" {
				t.Fatalf("read %q, %v", buf, err)
			}
			mu.Lock()
			defer mu.Unlock()
			for host, cred := range c.want {
				if len(got[host]) == 0 {
					t.Errorf("%s saw no request", host)
				}
				for _, s := range got[host] {
					if has := s.auth == "Bearer fed" && s.authz == "client"; has != cred || (!cred && (s.auth != "" || s.authz != "")) {
						t.Errorf("%s got Authorization %q authz %q; want credentials %v", host, s.auth, s.authz, cred)
					}
				}
			}
			for host := range got {
				if _, ok := c.want[host]; !ok {
					t.Errorf("%s saw %d requests; want none", host, len(got[host]))
				}
			}
		})
	}
}
