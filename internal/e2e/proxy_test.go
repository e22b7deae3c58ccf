package e2e

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/realclient"
)

func TestXrdcpColdThenHot(t *testing.T) {
	data := t.TempDir()
	const size = 40<<20 + 12345
	sums := map[string][32]byte{
		"/store/cold.root":  writeFile(t, data, "store/cold.root", size, 1),
		"/store/plain.root": writeFile(t, data, "store/plain.root", size, 2),
	}
	s := startStack(t, data, nil)

	for _, tc := range []struct {
		name, file string
		env        []string
	}{
		{"pgread", "/store/cold.root", realclient.Env()},
		{"plain-read", "/store/plain.root", realclient.Env("XRD_CPUSEPGWRTRD=0")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := sums[tc.file]
			before := s.originBytes()
			if got := xrdcpSum(t, tc.env, s.url+"/"+tc.file); got != want {
				t.Fatalf("cold xrdcp: sha256 %s, want %s", hex(got), hex(want))
			}
			cold := s.originBytes() - before
			if cold < size {
				t.Fatalf("cold read moved %d bytes from the origin, less than the file (%d)", cold, size)
			}
			before = s.originBytes()
			if got := xrdcpSum(t, tc.env, s.url+"/"+tc.file); got != want {
				t.Fatalf("hot xrdcp: sha256 %s, want %s", hex(got), hex(want))
			}
			if hot := s.originBytes() - before; hot != 0 {
				t.Fatalf("hot read moved %d bytes from the origin, want 0", hot)
			}
		})
	}
}

func TestSixtyFourClientsOneColdFile(t *testing.T) {
	data := t.TempDir()
	const size = 24 << 20
	want := writeFile(t, data, "store/popular.root", size, 3)
	s := startStack(t, data, nil)
	const clients = 64
	var wg sync.WaitGroup
	errs := make(chan string, clients)
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			env := realclient.Env()
			if i%2 == 1 {
				env = realclient.Env("XRD_CPUSEPGWRTRD=0")
			}
			r := realclient.Run(t, env, "xrdcp", "-s", "-f", s.url+"//store/popular.root", "-")
			if r.Err != nil {
				errs <- r.String()
				return
			}
			if got := sha256.Sum256(r.Stdout); got != want {
				errs <- fmt.Sprintf("client %d: sha256 %s, want %s", i, hex(got), hex(want))
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	st := s.srv.Cache().Stats()
	if got := st.BytesFetched.Load(); got != size {
		t.Fatalf("cache fetched %d bytes from the origin for %d clients, want exactly the file size %d", got, clients, size)
	}
	// The link also carries protocol overhead (handshake, responses).
	if got := s.originBytes(); got > size+size/50+64<<10 {
		t.Fatalf("origin sent %d bytes for a %d-byte file", got, size)
	}
}

func TestXrdfsThroughCache(t *testing.T) {
	data := t.TempDir()
	writeFile(t, data, "store/dir/a.root", 1000, 4)
	writeFile(t, data, "store/dir/b.root", 2000, 5)
	s := startStack(t, data, nil)
	env := realclient.Env()
	r := realclient.MustRun(t, env, "xrdfs", s.url, "stat", "/store/dir/b.root")
	if !strings.Contains(string(r.Stdout), "Size:   2000") {
		t.Fatalf("stat through the cache:\n%s", r.Stdout)
	}
	r = realclient.MustRun(t, env, "xrdfs", s.url, "ls", "-l", "/store/dir")
	for _, want := range []string{"a.root", "b.root", "1000", "2000"} {
		if !strings.Contains(string(r.Stdout), want) {
			t.Fatalf("ls -l through the cache lacks %q:\n%s", want, r.Stdout)
		}
	}
	r = realclient.MustRun(t, env, "xrdfs", s.url, "query", "checksum", "/store/dir/a.root")
	if !strings.HasPrefix(string(r.Stdout), "adler32 ") {
		t.Fatalf("checksum through the cache: %q", r.Stdout)
	}
	// After a full read the cache answers from its own copy: same value.
	xrdcpSum(t, env, s.url+"//store/dir/a.root")
	r2 := realclient.MustRun(t, env, "xrdfs", s.url, "query", "checksum", "/store/dir/a.root")
	if string(r2.Stdout) != string(r.Stdout) {
		t.Fatalf("cached checksum %q differs from the origin's %q", r2.Stdout, r.Stdout)
	}
	r = realclient.Run(t, env, "xrdfs", s.url, "stat", "/store/dir/missing.root")
	if r.Err == nil || !strings.Contains(string(r.Stderr)+string(r.Stdout), "[3011]") {
		t.Fatalf("stat of a missing file: %s", r)
	}
}

// TestFullDiskServesFromOrigin fills a real (tmpfs) file system under the
// cache with a file larger than it while a client reads: the writes that
// hit ENOSPC turn into origin reads, the client gets every byte right, and
// the cache stays usable.
func TestFullDiskServesFromOrigin(t *testing.T) {
	small := realclient.Tmpfs(t, "12m")
	data := t.TempDir()
	const size = 40 << 20
	want := writeFile(t, data, "store/big.root", size, 9)
	s := startStack(t, data, func(c *config.Config) { c.Cache.Dir = small })
	for pass := 0; pass < 2; pass++ {
		if got := xrdcpSum(t, realclient.Env(), s.url+"//store/big.root"); got != want {
			t.Fatalf("pass %d with a full cache disk: sha256 %s, want %s", pass, hex(got), hex(want))
		}
	}
	st := s.srv.Cache().Stats()
	if st.WriteErrors.Load() == 0 || st.BytesBypassed.Load() == 0 {
		t.Fatalf("no write errors (%d) or bypassed bytes (%d) on a 12 MiB disk for a 40 MiB file",
			st.WriteErrors.Load(), st.BytesBypassed.Load())
	}
	// A small file still caches after the big one is closed (and purged).
	small2 := writeFile(t, data, "store/small.root", 1<<20, 10)
	s.originBytes()
	for pass := 0; pass < 2; pass++ {
		if got := xrdcpSum(t, realclient.Env(), s.url+"//store/small.root"); got != small2 {
			t.Fatalf("small file pass %d: sha256 %s", pass, hex(got))
		}
	}
}
