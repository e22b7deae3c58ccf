package e2e

import (
	"crypto/sha256"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/wan"
)

// TestRewriteInPlaceWhileReading (issue 21, item 5): a file at a C++ xrootd
// origin is rewritten in place (same size, new bytes, a new modification
// time) while xrdcp reads it through the cache over a slow link with
// read-ahead on. xrdcp gets the old file whole or fails, never a mix with
// success; nothing mixed stays cached: the next xrdcp and curl get the new
// file, and the cache counts the change.
func TestRewriteInPlaceWhileReading(t *testing.T) {
	data := t.TempDir()
	const size = 24 << 20
	oldSum := writeFile(t, data, "store/rw/f.root", size, 501)
	s := startStackLink(t, data, wan.Config{Bandwidth: 8 << 20}, func(c *config.Config) {
		withHTTP(c)
		c.Cache.FetchMemory = 4 << 20 // most of the file is requested after the rewrite
	})
	env := realclient.Env()
	url := s.url + "//store/rw/f.root"
	done := make(chan realclient.Result, 1)
	go func() { done <- realclient.Run(t, env, "xrdcp", "-s", "-f", url, "-") }()
	eventually.True(t, func() bool { return s.link.Stats.BytesDown.Load() > 4<<20 }, "the first MiBs on their way")

	// Rewrite in place: the origin's open handle sees the new bytes.
	p := filepath.Join(data, "store/rw/f.root")
	fresh := make([]byte, size)
	r := rand.New(rand.NewPCG(502, 99))
	for i := range fresh {
		fresh[i] = byte(r.Uint32())
	}
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(fresh, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(p, later, later); err != nil {
		t.Fatal(err)
	}
	newSum := sha256.Sum256(fresh)

	res := <-done
	switch {
	case res.Err == nil && sha256.Sum256(res.Stdout) == oldSum:
		t.Log("the read in flight got the old file whole")
	case res.Err == nil:
		t.Fatalf("xrdcp succeeded with a mix of versions (sha256 %s)", hex(sha256.Sum256(res.Stdout)))
	default:
		t.Logf("the read in flight failed: %s", firstLine(res.Stderr))
	}
	s.originBytes()
	if got := xrdcpSum(t, env, url); got != newSum {
		t.Fatalf("xrdcp after the rewrite: sha256 %s, want the new file", hex(got))
	}
	if got := curlSum(t, s.httpURL()+"/store/rw/f.root"); got != newSum {
		t.Fatalf("curl after the rewrite: sha256 %s, want the new file", hex(got))
	}
	if n := s.scrape(t)["hepcache_revalidations_total"]; n == 0 {
		t.Fatal("the rewrite was not counted (hepcache_revalidations_total 0)")
	}
}

// TestMutableRewriteKeepingTime (issue 36 item 11): in a namespace
// declared mutable, a file at a C++ xrootd origin rewritten in place while
// xrdcp reads it through the cache, keeping its size and modification time
// (no stat can see it): xrdcp gets the old file whole or fails, never
// another file with success: the read that completes the copy waits for
// its comparison with the origin's adler32. Before, xrdcp succeeded with a
// mix of both versions.
func TestMutableRewriteKeepingTime(t *testing.T) {
	data := t.TempDir()
	const size = 24 << 20
	oldSum := writeFile(t, data, "store/rw/f.root", size, 503)
	p := filepath.Join(data, "store/rw/f.root")
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	s := startStackLink(t, data, wan.Config{Bandwidth: 8 << 20}, func(c *config.Config) {
		c.Cache.FetchMemory = 4 << 20 // most of the file is requested after the rewrite
		c.Namespace = append(c.Namespace, config.NamespaceRule{Prefix: "/store/rw", Mutable: true})
	})
	env := realclient.Env()
	done := make(chan realclient.Result, 1)
	go func() { done <- realclient.Run(t, env, "xrdcp", "-s", "-f", s.url+"//store/rw/f.root", "-") }()
	eventually.True(t, func() bool { return s.link.Stats.BytesDown.Load() > 4<<20 }, "the first MiBs on their way")
	fresh := make([]byte, size)
	r := rand.New(rand.NewPCG(504, 99))
	for i := range fresh {
		fresh[i] = byte(r.Uint32())
	}
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(fresh, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(p, st.ModTime(), st.ModTime()); err != nil { // the same size and time
		t.Fatal(err)
	}
	res := <-done
	switch {
	case res.Err == nil && sha256.Sum256(res.Stdout) == oldSum:
		t.Log("the read got the old file whole")
	case res.Err == nil:
		t.Fatalf("xrdcp succeeded with another file than the one it opened (sha256 %s; the new one's %s)", hex(sha256.Sum256(res.Stdout)), hex(sha256.Sum256(fresh)))
	default:
		t.Logf("the read failed: %s", firstLine(res.Stderr))
	}
}
