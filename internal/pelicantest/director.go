package pelicantest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"
)

// What the director does to a cache on its own initiative: its test cycle
// (director/monitor.go LaunchPeriodicDirectorTest with
// cache_monitor.go runCacheTest and evictCacheTestFile), its presence
// check (stat.go sendHeadReq: a HEAD whose Age > 0 means held), and its
// Prometheus scrape of the load (web_ui/prometheus.go).

func (f *Federation) client() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: f.Pool()}}}
}

// lastAd returns the data and web URLs of the newest ad.
func (f *Federation) lastAd() (data, web string, err error) {
	ads := f.Ads()
	if len(ads) == 0 {
		return "", "", fmt.Errorf("no cache advertised")
	}
	b := ads[len(ads)-1].Body
	data, _ = b["data-url"].(string)
	web, _ = b["web-url"].(string)
	if web == "" {
		web = data
	}
	return strings.TrimRight(data, "/"), strings.TrimRight(web, "/"), nil
}

// DirectorTest runs one director test cycle against the advertised
// cache: it reads a fresh test object through the cache, checks its
// body, reports the result to the cache's web URL with a federation token
// (scope pelican.director_test_report, audience the web URL) and returns
// the test object's path and the result reported ("ok" or "error").
func (f *Federation) DirectorTest(ctx context.Context) (testPath, status string, err error) {
	data, web, err := f.lastAd()
	if err != nil {
		return "", "", err
	}
	now := time.Now().UTC()
	testPath = path.Join("/pelican/monitoring/directorTest/double", now.Format("2006-01-02"), "director-test-"+now.Format(time.RFC3339Nano)+".txt")
	status, msg := "ok", "Director test cycle succeeded at "+now.Format(time.RFC3339)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, data+testPath, nil)
	resp, err := f.client().Do(req)
	if err != nil {
		status, msg = "error", err.Error()
	} else {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		if resp.StatusCode != 200 || strings.TrimSuffix(string(b), "\n") != DirectorTestBody {
			status, msg = "error", fmt.Sprintf("cache answered %d %q", resp.StatusCode, b)
		}
	}
	f.mu.Lock()
	f.health = map[string]string{"ok": "OK", "error": "Error"}[status]
	f.mu.Unlock()
	body, _ := json.Marshal(map[string]any{"status": status, "message": msg, "timestamp": now.Unix()})
	code, rb, err := f.post(ctx, web+"/api/v1.0/cache/directorTest", f.FederationToken("pelican.director_test_report", web), body)
	if err != nil {
		return testPath, status, err
	}
	if code != 200 {
		return testPath, status, fmt.Errorf("the cache refused the director test report: %d %s", code, rb)
	}
	return testPath, status, nil
}

// EvictTestFile asks the cache to drop a director test object.
func (f *Federation) EvictTestFile(ctx context.Context, testPath string) error {
	_, web, err := f.lastAd()
	if err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]string{"path": testPath})
	code, rb, err := f.post(ctx, web+"/api/v1.0/cache/evictTestFile", f.FederationToken("pelican.director_test_report", web), body)
	if err != nil {
		return err
	}
	if code != 200 {
		return fmt.Errorf("evictTestFile: %d %s", code, rb)
	}
	return nil
}

func (f *Federation) post(ctx context.Context, u, tok string, body []byte) (int, []byte, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := f.client().Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, b, nil
}

// Holds is the director's presence check: a HEAD of the object at the
// advertised cache (with tok, "" for none, and Want-Digest crc32c); the
// cache holds it when it answers 200 with Age > 0. It returns the status
// and headers for the test to look at.
func (f *Federation) Holds(ctx context.Context, p, tok string) (held bool, status int, hdr http.Header, err error) {
	data, _, err := f.lastAd()
	if err != nil {
		return false, 0, nil, err
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodHead, data+p, nil)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	req.Header.Set("Want-Digest", "crc32c")
	resp, err := f.client().Do(req)
	if err != nil {
		return false, 0, nil, err
	}
	resp.Body.Close()
	age, aerr := strconv.Atoi(resp.Header.Get("Age"))
	return resp.StatusCode == 200 && aerr == nil && age > 0, resp.StatusCode, resp.Header, nil
}

// Scrape reads the cache's load as the director's Prometheus does: GET
// <web>/metrics with a federation token (audience "prometheus", scope
// monitoring.scrape); it returns xrootd_server_io_total.
func (f *Federation) Scrape(ctx context.Context) (int64, error) {
	_, web, err := f.lastAd()
	if err != nil {
		return 0, err
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, web+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+f.FederationToken("monitoring.scrape", "prometheus"))
	resp, err := f.client().Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return 0, fmt.Errorf("scrape: %d %s", resp.StatusCode, b)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "xrootd_server_io_total "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("scrape: no xrootd_server_io_total")
}

// Transfer is what a Pelican client saw of one get (client/handle_http.go).
type Transfer struct {
	// Cache is where the director's object redirect sent the client.
	Cache string
	// Status and Body of the GET.
	Status int
	Body   []byte
	// Server is the Server header, which the client records as the
	// server's version.
	Server string
	// ProbeAge and Age are the Age of the client's one-byte probe and of
	// its GET, -1 without one: the client logs a get without Age as a
	// cache miss, with one as a hit.
	ProbeAge, Age int
	// TransferStatus is the X-Transfer-Status trailer of the GET.
	TransferStatus string
}

// Get reads the object at p as `pelican object get` does: the director's
// object redirect names a cache; a one-byte probe (objectCached) asks it
// whether it holds the object; the GET then asks for the X-Transfer-Status
// trailer (X-Transfer-Status: true, TE: trailers) with an X-Pelican-Timeout.
// A GET answered without a Server header, or whose body is not followed by
// the trailer, is recorded in Errors (the client reads both). tok ("" for
// none) goes with every request.
func (f *Federation) Get(ctx context.Context, p, tok string) (*Transfer, error) {
	cl := f.client()
	cl.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	send := func(method, u string, hdr map[string]string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, method, u, nil)
		if err != nil {
			return nil, err
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		req.Header.Set("User-Agent", "pelican-client/7.16.0")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		return cl.Do(req)
	}
	resp, err := send(http.MethodGet, f.URL+"/api/v1.0/director/object"+p, nil)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect {
		return nil, fmt.Errorf("the director's object redirect: %d", resp.StatusCode)
	}
	t := &Transfer{Cache: resp.Header.Get("Location"), ProbeAge: -1, Age: -1}
	ageOf := func(h http.Header) int {
		if a, err := strconv.Atoi(h.Get("Age")); err == nil {
			return a
		}
		return -1
	}
	if resp, err = send(http.MethodGet, t.Cache, map[string]string{"Range": "bytes=0-0"}); err != nil {
		return t, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	t.ProbeAge = ageOf(resp.Header)
	if resp, err = send(http.MethodGet, t.Cache, map[string]string{"X-Transfer-Status": "true", "TE": "trailers", "X-Pelican-Timeout": "9.5s"}); err != nil {
		return t, err
	}
	defer resp.Body.Close()
	t.Status, t.Server, t.Age = resp.StatusCode, resp.Header.Get("Server"), ageOf(resp.Header)
	if t.Body, err = io.ReadAll(resp.Body); err != nil {
		return t, fmt.Errorf("GET %s: body: %w", t.Cache, err)
	}
	t.TransferStatus = resp.Trailer.Get("X-Transfer-Status")
	if t.Server == "" {
		f.check("client get %s: no Server header (the client records it as the server's version)", p)
	}
	if t.Status == http.StatusOK && t.TransferStatus == "" {
		f.check("client get %s: no X-Transfer-Status trailer, though asked for (the client reads it to know the body is whole)", p)
	}
	return t, nil
}
