package e2e

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/internal/realclient"
)

// listGate is a proxy in front of the object store that counts the
// ListObjectsV2 requests (not the one-key probes of a stat) per prefix and
// holds back the continuation pages of one prefix until released.
type listGate struct {
	hold    string // prefix whose second and later pages wait
	release chan struct{}
	once    sync.Once
	mu      sync.Mutex
	lists   map[string]int
}

func (g *listGate) count(prefix string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lists[prefix]
}

func (g *listGate) open() { g.once.Do(func() { close(g.release) }) }

func startListGate(t *testing.T, target, hold string) (*listGate, string) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	g := &listGate{hold: hold, release: make(chan struct{}), lists: map[string]int{}}
	p := httputil.NewSingleHostReverseProxy(u)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("list-type") == "2" && q.Get("max-keys") != "1" {
			prefix := q.Get("prefix")
			g.mu.Lock()
			g.lists[prefix]++
			g.mu.Unlock()
			if prefix == g.hold && q.Get("continuation-token") != "" {
				<-g.release
			}
		}
		p.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { g.open(); ts.Close() })
	return g, ts.URL
}

// TestS3ListingStreamedAndBounded (issue 27, item 8): a PROPFIND Depth: 1
// of a prefix of more objects than one ListObjectsV2 page is answered as
// the listing arrives: the client has the 207 and the first page's
// entries while the object store still holds back the second page. Before,
// the whole listing was collected and rendered first (about 70 MB for
// 100k objects, per request, without bound). And at most
// origin.max_listings listings run at once: with 1, an xrdfs ls started
// meanwhile waits, asking the store nothing, until the first is done;
// then both complete.
func TestS3ListingStreamedAndBounded(t *testing.T) {
	var gate *listGate
	s := startS3Stack(t, "", nil, func(c *config.Config) {
		gate, c.Origin.S3Endpoint = startListGate(t, c.Origin.S3Endpoint, "cms/store/many/")
		c.Origin.MaxListings = 1
	})
	const n = 1003
	s.putMany(t, "cms/store/many/", n)
	s.putObject(t, "/store/other/a.root", 10, 1, "")

	// The PROPFIND: its answer starts while the second page is held.
	req, _ := http.NewRequest("PROPFIND", s.httpURL()+"/store/many/", nil)
	req.Header.Set("Depth", "1")
	type answer struct {
		resp *http.Response
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		got <- answer{resp, err}
	}()
	var a answer
	select {
	case a = <-got:
	case <-time.After(time.Minute):
		t.Fatal("no PROPFIND answer while the object store holds back the second page of the listing: the listing is not streamed")
	}
	if a.err != nil || a.resp.StatusCode != http.StatusMultiStatus {
		t.Fatalf("PROPFIND: %v %v", a.resp, a.err)
	}
	defer a.resp.Body.Close()
	br := bufio.NewReader(a.resp.Body)
	var body strings.Builder
	for !strings.Contains(body.String(), "f0000.root") {
		line, err := br.ReadString('>')
		if err != nil {
			t.Fatalf("PROPFIND body before the second page: %v\n%.500s", err, body.String())
		}
		body.WriteString(line)
	}
	eventually.True(t, func() bool { return gate.count("cms/store/many/") == 2 }, "the second page to be asked for (and held)")

	// A second listing waits for the first's slot, asking nothing.
	ls := make(chan realclient.Result, 1)
	go func() { ls <- realclient.Run(t, realclient.Env(), "xrdfs", s.url, "ls", "/store/other") }()
	eventually.True(t, func() bool { return s.srv.Cache().Stats().ListingsWaiting.Load() == 1 }, "xrdfs ls to wait for a listing slot")
	if n := gate.count("cms/store/other/"); n != 0 {
		t.Fatalf("the waiting listing asked the store %d times", n)
	}
	gate.open()
	for {
		line, err := br.ReadString('>')
		body.WriteString(line)
		if err != nil {
			break
		}
	}
	if c := strings.Count(body.String(), "<D:response>"); c != n+1 || !strings.HasSuffix(strings.TrimSpace(body.String()), "</D:multistatus>") {
		t.Fatalf("PROPFIND: %d responses, want %d (the directory and its objects), or no end:\n...%s", c, n+1, body.String()[max(0, body.Len()-300):])
	}
	r := <-ls
	if r.Err != nil || !strings.Contains(string(r.Stdout), "/store/other/a.root") {
		t.Fatalf("xrdfs ls after the first listing ended: %s", r)
	}
	if w := s.srv.Cache().Stats().ListingsWaiting.Load(); w != 0 {
		t.Fatalf("%d listings still waiting", w)
	}
}
