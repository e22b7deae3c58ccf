package cache

import (
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/origin"
)

// TestDigestsFromCachedBytes (issue 33 item 2): md5, sha1, sha256 and
// crc32 of a file held whole are computed from the cached bytes, in one
// read for all four, kept in the sidecar (a restarted cache answers them
// again without computing) and never asked of the origin, here one that
// answers a wrong md5 and then none at all. A copy not held whole is
// still answered by the origin.
func TestDigestsFromCachedBytes(t *testing.T) {
	m, data := memWithFile(53, 3*testBlock+99)
	m.Put("/g", randomData(54, 2*testBlock), time.Now())
	m.SetChecksum("/f", "md5", "00000000000000000000000000000000")
	m.SetChecksum("/g", "md5", "0123456789abcdef0123456789abcdef")
	dir := t.TempDir()
	c := newTestCache(t, dir, m, nil)
	readAllVia(t, c, "/f")
	waitIdle(t, c)
	md, s1, s256 := md5.Sum(data), sha1.Sum(data), sha256.Sum256(data)
	want := map[string]string{
		"md5": hex.EncodeToString(md[:]), "sha1": hex.EncodeToString(s1[:]),
		"sha256": hex.EncodeToString(s256[:]), "crc32": fmt.Sprintf("%08x", crc32.ChecksumIEEE(data)),
	}
	ask := func(c *Cache, p, algo string) (string, error) {
		return c.Checksum(context.Background(), backend.Request{Path: p}, algo)
	}
	for _, algo := range []string{"md5", "sha1", "sha256", "crc32"} {
		if got, err := ask(c, "/f", algo); err != nil || got != want[algo] {
			t.Errorf("%s of the cached copy: %q, %v; want %s", algo, got, err, want[algo])
		}
	}
	if n := c.Stats().DigestsComputed.Load(); n != 1 {
		t.Errorf("digests computed %d times; want once for the four", n)
	}
	// /g is not held: the origin answers.
	if got, err := ask(c, "/g", "md5"); err != nil || got != "0123456789abcdef0123456789abcdef" {
		t.Errorf("md5 of a file not cached: %q, %v; want the origin's", got, err)
	}
	waitIdle(t, c)
	c.Close()
	m.Fail(fmt.Errorf("origin down: %w", origin.ErrUnavailable))
	c2 := newTestCache(t, dir, m, nil)
	for algo, w := range want {
		if got, err := ask(c2, "/f", algo); err != nil || got != w {
			t.Errorf("after a restart, %s: %q, %v; want %s from the sidecar", algo, got, err, w)
		}
	}
	if n := c2.Stats().DigestsComputed.Load(); n != 0 {
		t.Errorf("a restarted cache computed the digests again (%d)", n)
	}
}
