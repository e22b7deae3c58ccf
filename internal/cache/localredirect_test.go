package cache

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/policy"
	"github.com/hepcache/hepcache/origin"
)

// TestLocalRedirect: with LocalRedirect set, an open of a complete,
// checksummed file by a client that can follow it is answered with a
// redirect to the data file under the client's mount point; everything
// else is served as before.
func TestLocalRedirect(t *testing.T) {
	pol, err := policy.New([]policy.Rule{
		{Prefix: "/user/", Mutable: true},
		{Prefix: "/pileup/", Action: policy.PassThrough},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := origin.NewMem("mem://o")
	data := randomData(71, 3*testBlock+9)
	for _, p := range []string{"/store/full", "/store/part", "/store/cold", "/store/gone", "/user/f", "/pileup/f"} {
		m.Put(p, data, time.Unix(1_700_000_000, 0))
	}
	dir := t.TempDir()
	var mu sync.Mutex
	var recs []AccessRecord
	c := newTestCache(t, dir, m, func(cfg *Config) {
		cfg.Policy = pol
		cfg.LocalRedirect = "/mnt/cache-space/data"
		cfg.OnAccess = func(r AccessRecord) {
			mu.Lock()
			recs = append(recs, r)
			mu.Unlock()
		}
	})
	ctx := context.Background()
	// Cache /store/full, /store/gone, /user/f completely (the reads do not
	// follow redirects), /store/part partly.
	for _, p := range []string{"/store/full", "/store/gone", "/user/f", "/pileup/f"} {
		readAllVia(t, c, p)
	}
	f, err := c.Open(ctx, backend.Request{Path: "/store/part"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAt(ctx, make([]byte, 10), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	waitIdle(t, c)
	if err := os.Remove(DataPath(dir, Key{Origin: "mem://o", Path: "/store/gone"})); err != nil {
		t.Fatal(err)
	}

	wantURL := "file://localhost/mnt/cache-space/data/mem/o/store/full"
	if rel, _ := filepath.Rel(filepath.Join(dir, "data"), DataPath(dir, Key{Origin: "mem://o", Path: "/store/full"})); "file://localhost/mnt/cache-space/data/"+rel != wantURL {
		t.Fatalf("data path %s does not match the expected URL %s", rel, wantURL)
	}
	for _, tc := range []struct {
		name    string
		path    string
		follows bool
		want    string // redirect URL, or "" when served
	}{
		{"complete", "/store/full", true, wantURL},
		{"client cannot follow (HTTP)", "/store/full", false, ""},
		{"partial", "/store/part", true, ""},
		{"miss", "/store/cold", true, ""},
		{"data file deleted", "/store/gone", true, ""},
		{"mutable namespace", "/user/f", true, ""},
		{"pass-through namespace", "/pileup/f", true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := c.Stats()
			hit, missed := st.BytesHit.Load(), st.BytesMissed.Load()
			redirects := st.LocalRedirects.Load()
			f, err := c.Open(ctx, backend.Request{Path: tc.path, Protocol: "root", Client: "127.0.0.1:1", FollowsFileRedirect: tc.follows})
			var re *backend.RedirectError
			if tc.want == "" {
				if err != nil {
					t.Fatalf("open: %v, want it served", err)
				}
				defer f.Close()
				got := make([]byte, len(data))
				if _, err := f.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, data) {
					t.Fatalf("read: %v, equal %v", err, bytes.Equal(got, data))
				}
				if st.LocalRedirects.Load() != redirects {
					t.Fatal("a served open counted as a local redirect")
				}
				return
			}
			if !errors.As(err, &re) || re.URL != tc.want || re.Host != "" {
				t.Fatalf("open: %v (%#v), want a redirect to %s", err, re, tc.want)
			}
			if st.LocalRedirects.Load() != redirects+1 || st.BytesHit.Load() != hit || st.BytesMissed.Load() != missed {
				t.Fatalf("redirect: local redirects %d -> %d, bytes hit %d -> %d, missed %d -> %d",
					redirects, st.LocalRedirects.Load(), hit, st.BytesHit.Load(), missed, st.BytesMissed.Load())
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	var redirected []AccessRecord
	for _, r := range recs {
		if r.Status == "redirect" {
			redirected = append(redirected, r)
		}
	}
	if len(redirected) != 1 || redirected[0].Path != "/store/full" || redirected[0].Size != int64(len(data)) ||
		redirected[0].BytesRead != 0 || redirected[0].Protocol != "root" || redirected[0].Client != "127.0.0.1:1" {
		t.Fatalf("access records of redirects: %+v", redirected)
	}
}

// TestLocalRedirectWaitsForChecksum: a complete file whose checksum is
// still being compared with the origin's (it may yet be dropped) is served
// by the cache; once verified it is redirected.
func TestLocalRedirectWaitsForChecksum(t *testing.T) {
	m := &slowChecksum{Mem: origin.NewMem("mem://o"), asked: make(chan struct{}), release: make(chan struct{})}
	data := randomData(73, 2*testBlock)
	m.Put("/f", data, time.Now())
	c := newTestCache(t, t.TempDir(), m, func(cfg *Config) { cfg.LocalRedirect = "/cache" })
	ctx := context.Background()
	req := backend.Request{Path: "/f", FollowsFileRedirect: true}
	f, err := c.Open(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAt(ctx, make([]byte, len(data)), 0); err != nil {
		t.Fatal(err)
	}
	<-m.asked // complete and synced; the origin is asked for its checksum
	g, err := c.Open(ctx, req)
	if err != nil {
		t.Fatalf("open of a complete file being verified: %v, want it served", err)
	}
	g.Close()
	close(m.release)
	f.Close()
	waitIdle(t, c)
	if _, err := c.Open(ctx, req); !errors.As(err, new(*backend.RedirectError)) {
		t.Fatalf("open of a verified file: %v, want a redirect", err)
	}
}

// slowChecksum is an origin whose Checksum answers only after release is
// closed, telling asked when it is called.
type slowChecksum struct {
	*origin.Mem
	asked, release chan struct{}
	once           sync.Once
}

func (s *slowChecksum) Checksum(ctx context.Context, p, algo string) (string, error) {
	s.once.Do(func() { close(s.asked) })
	select {
	case <-s.release:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	return s.Mem.Checksum(ctx, p, algo)
}

func TestLocalRedirectConfig(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		ok     bool
	}{
		{"", true},
		{"/mnt/cache-space/data", true},
		{"/", true},
		{"relative/data", false},
		{"/mnt/../data", false},
		{"/mnt/data/", false},
		{"/mnt/da?ta", false},
	} {
		cfg := DefaultConfig()
		cfg.Dir, cfg.Origins = "/tmp/x", singleOrigin(origin.NewMem("mem://o"))
		cfg.LocalRedirect = tc.prefix
		if err := cfg.Validate(); (err == nil) != tc.ok {
			t.Errorf("LocalRedirect %q: Validate() = %v, want ok=%v", tc.prefix, err, tc.ok)
		}
	}
}
