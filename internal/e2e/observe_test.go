package e2e

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"github.com/hepcache/hepcache/internal/eventually"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/sidecar"
)

// withHTTP turns on the HTTP listener (with /metrics and /health) and the
// access log.
func withHTTP(c *config.Config) {
	c.Server.HTTPListen = "127.0.0.1:0"
	c.Log.AccessLog = filepath.Join(filepath.Dir(c.Cache.Dir), filepath.Base(c.Cache.Dir)+"-access.log")
}

// httpURL is the cache's http:// base URL.
func (s *stack) httpURL() string { return "http://" + s.srv.HTTPAddr().String() }

// curlSum reads url with curl and returns the sha256 of the body.
func curlSum(tb testing.TB, url string) [32]byte {
	tb.Helper()
	r := realclient.MustRun(tb, realclient.Env(), "curl", "-sS", "--fail", url)
	return sha256.Sum256(r.Stdout)
}

// scrape fetches /metrics with curl and returns the samples by name and
// labels, e.g. m[`hepcache_opens_total{result="hit"}`].
func (s *stack) scrape(tb testing.TB) map[string]float64 {
	tb.Helper()
	r := realclient.MustRun(tb, realclient.Env(), "curl", "-sS", "--fail", s.httpURL()+"/metrics")
	m := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(r.Stdout))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			tb.Fatalf("metrics line %q: %v", line, err)
		}
		m[line[:i]] = v
	}
	return m
}

// health fetches /health with curl.
func (s *stack) health(tb testing.TB) (status string, reasons []string) {
	tb.Helper()
	r := realclient.Run(tb, realclient.Env(), "curl", "-sS", s.httpURL()+"/health")
	var h struct {
		Status  string   `json:"status"`
		Reasons []string `json:"reasons"`
	}
	if err := json.Unmarshal(r.Stdout, &h); err != nil {
		tb.Fatalf("/health: %v: %s", err, r)
	}
	return h.Status, h.Reasons
}

// waitComplete waits until the cache holds p complete and checksummed (the
// download, its sync and the checksum comparison with the origin finish
// after the client that caused them has closed).
func (s *stack) waitComplete(tb testing.TB, p string) {
	tb.Helper()
	eventually.True(tb, func() bool {
		infos, err := cache.Inspect(s.cfg.Cache.Dir, "", p)
		return err == nil && len(infos) == 1 && infos[0].Complete() && infos[0].ChecksumState != sidecar.ChecksumNone &&
			s.srv.Cache().Stats().OpenFiles.Load() == 0
	}, "%s complete and checksummed in the cache", p)
}

// accessRecord is a line of the access log (docs/access-log.md).
type accessRecord = cache.AccessRecord

// accessLines waits until the access log holds at least n lines and
// returns them, checking that every documented field is present in each.
func (s *stack) accessLines(tb testing.TB, n int) []accessRecord {
	tb.Helper()
	fields := []string{"time", "open_time", "path", "origin", "size", "bytes_read", "bytes_hit", "bytes_missed",
		"bytes_bypassed", "duration_s", "client", "user", "protocol", "status"}
	var b []byte
	eventually.True(tb, func() bool {
		b, _ = os.ReadFile(s.cfg.Log.AccessLog)
		return len(b) > 0 && len(strings.Split(strings.TrimSpace(string(b)), "\n")) >= n
	}, "%d lines in the access log", n)
	{
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		{
			var out []accessRecord
			for _, l := range lines {
				var raw map[string]any
				if err := json.Unmarshal([]byte(l), &raw); err != nil {
					tb.Fatalf("access log line %q: %v", l, err)
				}
				for _, f := range fields {
					if _, ok := raw[f]; !ok {
						tb.Errorf("access log line lacks %q: %s", f, l)
					}
				}
				var r accessRecord
				json.Unmarshal([]byte(l), &r)
				out = append(out, r)
			}
			return out
		}
	}
}

// TestCrossProtocol: one cache store behind both front ends. A file cached
// through root:// is a hit over HTTP and the other way round, the origin
// sending nothing more; the access log has one line per closed file for
// both protocols; root:// requests and clients show up in /metrics.
func TestCrossProtocol(t *testing.T) {
	realclient.Require(t, "curl")
	xrdfs := realclient.Require(t, "xrdfs")
	data := t.TempDir()
	const size = 5<<20 + 333
	sumA := writeFile(t, data, "store/a.root", size, 21)
	sumB := writeFile(t, data, "store/b.root", size, 22)
	s := startStack(t, data, withHTTP)

	// a.root: cold through root://, then hot over HTTP.
	if got := xrdcpSum(t, realclient.Env(), s.url+"//store/a.root"); got != sumA {
		t.Fatalf("xrdcp cold: sha256 %s, want %s", hex(got), hex(sumA))
	}
	s.waitComplete(t, "/store/a.root")
	m0, origin0 := s.scrape(t), s.originBytes()
	if got := curlSum(t, s.httpURL()+"/store/a.root"); got != sumA {
		t.Fatalf("curl of the root://-cached file: sha256 %s, want %s", hex(got), hex(sumA))
	}
	m1 := s.scrape(t)
	hit := `hepcache_opens_total{result="hit"}`
	fetched := "hepcache_origin_fetched_bytes_total"
	if m1[hit] != m0[hit]+1 || m1[fetched] != m0[fetched] || s.originBytes() != origin0 {
		t.Fatalf("HTTP read of a root://-cached file: hits %v -> %v, origin fetched %v -> %v, origin sent %d bytes",
			m0[hit], m1[hit], m0[fetched], m1[fetched], s.originBytes()-origin0)
	}

	// b.root: cold over HTTP, then hot through root://.
	if got := curlSum(t, s.httpURL()+"/store/b.root"); got != sumB {
		t.Fatalf("curl cold: sha256 %s, want %s", hex(got), hex(sumB))
	}
	s.waitComplete(t, "/store/b.root")
	m2, origin2 := s.scrape(t), s.originBytes()
	if got := xrdcpSum(t, realclient.Env(), s.url+"//store/b.root"); got != sumB {
		t.Fatalf("xrdcp of the HTTP-cached file: sha256 %s, want %s", hex(got), hex(sumB))
	}
	m3 := s.scrape(t)
	if m3[hit] != m2[hit]+1 || m3[fetched] != m2[fetched] || s.originBytes() != origin2 {
		t.Fatalf("root:// read of an HTTP-cached file: hits %v -> %v, origin fetched %v -> %v, origin sent %d bytes",
			m2[hit], m3[hit], m2[fetched], m3[fetched], s.originBytes()-origin2)
	}

	// root:// requests in /metrics, from xrdcp and xrdfs.
	realclient.MustRun(t, realclient.Env(), xrdfs, s.url, "stat", "/store/a.root")
	realclient.MustRun(t, realclient.Env(), xrdfs, s.url, "ls", "/store")
	if r := realclient.Run(t, realclient.Env(), xrdfs, s.url, "stat", "/store/none.root"); r.Err == nil {
		t.Fatal("xrdfs stat of a missing file succeeded")
	}
	m4 := s.scrape(t)
	for name, want := range map[string]float64{
		`hepcache_requests_total{protocol="root",operation="open",outcome="ok"}`:        2,
		`hepcache_requests_total{protocol="root",operation="close",outcome="ok"}`:       2,
		`hepcache_requests_total{protocol="root",operation="stat",outcome="not_found"}`: 1,
		`hepcache_requests_total{protocol="root",operation="dirlist",outcome="ok"}`:     1,
		`hepcache_requests_total{protocol="http",operation="get",outcome="ok"}`:         2,
	} {
		if m4[name] != want {
			t.Errorf("%s = %v, want %v", name, m4[name], want)
		}
	}
	if m4[`hepcache_requests_total{protocol="root",operation="pgread",outcome="ok"}`] == 0 {
		t.Error("no root pgread requests counted")
	}
	if m4[`hepcache_requests_total{protocol="root",operation="stat",outcome="ok"}`] == 0 {
		t.Error("no root stat requests counted")
	}
	// The scrape's own connection is the only client left once the
	// root:// clients have gone (they close as they exit).
	eventually.True(t, func() bool { return s.scrape(t)[`hepcache_clients{protocol="root"}`] == 0 }, "no root client left after every client exited")
	if n := s.scrape(t)[`hepcache_clients{protocol="root"}`]; n != 0 {
		t.Errorf("%v root clients left after every client exited", n)
	}

	// The access log: one line per closed file, per protocol.
	recs := s.accessLines(t, 4)
	got := map[string][]accessRecord{}
	for _, r := range recs {
		got[r.Path+" "+r.Protocol] = append(got[r.Path+" "+r.Protocol], r)
	}
	for _, tc := range []struct {
		key  string
		miss bool
	}{
		{"/store/a.root root", true},
		{"/store/a.root http", false},
		{"/store/b.root http", true},
		{"/store/b.root root", false},
	} {
		rs := got[tc.key]
		if len(rs) != 1 {
			t.Errorf("%s: %d access log lines, want 1: %+v", tc.key, len(rs), recs)
			continue
		}
		r := rs[0]
		if r.Size != size || r.BytesRead != size || r.BytesHit+r.BytesMissed != size || r.Status != "ok" ||
			r.Origin != s.cfg.Origin.Default || r.Client == "" || r.Time.Before(r.OpenTime) {
			t.Errorf("%s: %+v", tc.key, r)
		}
		if !tc.miss && r.BytesHit != size {
			t.Errorf("%s: hot read has bytes_hit %d, want %d", tc.key, r.BytesHit, size)
		}
		if tc.miss && r.BytesMissed == 0 {
			t.Errorf("%s: cold read has no bytes_missed", tc.key)
		}
	}
	if len(recs) != 4 {
		t.Errorf("%d access log lines, want 4", len(recs))
	}
}

// TestHealthFollowsTheOrigin: /health is healthy, turns degraded when the
// origin dies and a cold read fails (cached files are still served), and
// healthy again once health_window has passed without errors.
func TestHealthFollowsTheOrigin(t *testing.T) {
	realclient.Require(t, "curl")
	data := t.TempDir()
	sum := writeFile(t, data, "store/cached.root", 1<<20, 31)
	writeFile(t, data, "store/cold.root", 1<<20, 32)
	const window = 2 * time.Second
	s := startStack(t, data, func(c *config.Config) {
		withHTTP(c)
		c.Server.HealthWindow = config.Duration(window)
		c.Origin.Timeout = config.Duration(5 * time.Second)
	})
	if got := xrdcpSum(t, realclient.Env(), s.url+"//store/cached.root"); got != sum {
		t.Fatal("xrdcp of a file to cache differs")
	}
	s.waitComplete(t, "/store/cached.root")
	if st, why := s.health(t); st != "healthy" {
		t.Fatalf("/health with the origin up: %s %v", st, why)
	}

	s.origin.Stop()
	if r := realclient.Run(t, realclient.Env(), "xrdcp", "-s", "-f", s.url+"//store/cold.root", "-"); r.Err == nil {
		t.Fatal("cold read with the origin down succeeded")
	}
	st, why := s.health(t)
	if st != "degraded" || !strings.Contains(fmt.Sprint(why), s.cfg.Origin.Default) {
		t.Fatalf("/health after a failed cold read: %s %v; want degraded, naming %s", st, why, s.cfg.Origin.Default)
	}
	if got := xrdcpSum(t, realclient.Env(), s.url+"//store/cached.root"); got != sum {
		t.Fatal("cached file not served while the origin is down")
	}
	eventually.True(t, func() bool { st, why = s.health(t); return st == "healthy" },
		"/health healthy again after the health window (%v) since the last origin error; last %s %v", window, st, why)
}
