package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/s3proc"
	"github.com/hepcache/hepcache/internal/s3test"
	"github.com/hepcache/hepcache/internal/server"
	"github.com/hepcache/hepcache/internal/wan"
)

// s3Bucket is the bucket of the S3 tests; the cache's default origin is
// its key prefix "cms", so path /store/f.root is object cms/store/f.root.
const s3Bucket = "hep"

// s3Stack is a real S3 server (versitygw), a byte-counting link in front
// of it, and a hepcache whose default origin is s3://hep/cms, signing with
// key files.
type s3Stack struct {
	*stack
	s3 *s3proc.Server
	// keyDir holds the access and secret key files.
	keyDir string
	// log is everything hepcache logged.
	log *syncBuffer
}

// syncBuffer is a bytes.Buffer safe for the server's concurrent logging.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startS3Stack starts versitygw with bucket hep, a link with linkCfg's
// delay and bandwidth (zero: none), and hepcache with HTTP on; secret is
// the secret key hepcache is given ("" for the right one).
func startS3Stack(tb testing.TB, secret string, linkMut func(*wan.Config), mut func(*config.Config)) *s3Stack {
	tb.Helper()
	realclient.Require(tb, "xrdcp")
	s3 := s3test.Start(tb, s3Bucket)
	lc := &wan.Config{Target: s3.Addr}
	if linkMut != nil {
		linkMut(lc)
	}
	link, err := wan.New(lc)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { link.Close() })
	keyDir := tb.TempDir()
	if secret == "" {
		secret = s3.SecretKey
	}
	os.WriteFile(filepath.Join(keyDir, "access"), []byte(s3.AccessKey+"\n"), 0o600)
	os.WriteFile(filepath.Join(keyDir, "secret"), []byte(secret+"\n"), 0o600)
	cfg := config.Default()
	cfg.Server.Listen = "127.0.0.1:0"
	cfg.Cache.Dir = tb.TempDir()
	cfg.Origin.Default = "s3://" + s3Bucket + "/cms"
	cfg.Origin.S3Endpoint = "http://" + link.Addr().String()
	cfg.Origin.S3AccessKeyFile = filepath.Join(keyDir, "access")
	cfg.Origin.S3SecretKeyFile = filepath.Join(keyDir, "secret")
	withHTTP(cfg)
	if mut != nil {
		mut(cfg)
	}
	logBuf := &syncBuffer{}
	srv, err := server.New(cfg, slog.New(slog.NewTextHandler(logBuf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		if tb.Failed() {
			tb.Logf("hepcache log:\n%s", logBuf.String())
		}
		if strings.Contains(logBuf.String(), s3.SecretKey) || strings.Contains(logBuf.String(), secret) {
			tb.Errorf("a secret key is in hepcache's log")
		}
	})
	st := &stack{tb: tb, link: link, srv: srv, cfg: cfg, url: "root://" + srv.RootAddr().String()}
	return &s3Stack{stack: st, s3: s3, keyDir: keyDir, log: logBuf}
}

// putObject stores size seeded random bytes as object cms/<p> (p is the
// client's path) and in local, when not empty, and returns their sha256.
func (s *s3Stack) putObject(tb testing.TB, p string, size int, seed uint64, local string) [32]byte {
	tb.Helper()
	b := make([]byte, size)
	r := rand.New(rand.NewPCG(seed, 99))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	s3test.Put(tb, s.s3, s3Bucket, "cms"+p, b)
	if local != "" {
		if err := os.WriteFile(local, b, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return sha256.Sum256(b)
}

// TestS3ObjectsThroughCache: xrdcp (pgread and plain reads), the XRootD
// Python bindings (read, vector_read, stat), uproot over root:// and
// http://, and curl read objects of a real S3 server byte-exact through
// hepcache, cold and hot; hot reads take nothing from the object store.
func TestS3ObjectsThroughCache(t *testing.T) {
	// Without read-ahead a client reading parts of an object (the
	// bindings) has exactly those blocks fetched cold and served hot; a
	// prefetch cut short by its close would be resumed by the hot read.
	s := startS3Stack(t, "", nil, func(c *config.Config) { c.Cache.Prefetch = 0 })
	local := t.TempDir()
	env := realclient.Env()
	type pass struct {
		name string
		read func(t *testing.T) [32]byte // returns the sha256 the client got, zero if it checked itself
		want [32]byte
	}
	var passes []pass

	pg := s.putObject(t, "/store/xrdcp-pgread.root", 5<<20+3, 1, "")
	passes = append(passes, pass{"xrdcp pgread", func(t *testing.T) [32]byte {
		return xrdcpSum(t, env, s.url+"//store/xrdcp-pgread.root")
	}, pg})
	plain := s.putObject(t, "/store/xrdcp-plain.root", 3<<20+1, 2, "")
	passes = append(passes, pass{"xrdcp plain", func(t *testing.T) [32]byte {
		return xrdcpSum(t, realclient.Env("XRD_CPUSEPGWRTRD=0"), s.url+"//store/xrdcp-plain.root")
	}, plain})
	pyLocal := filepath.Join(local, "py.root")
	s.putObject(t, "/store/py.root", 5<<20+3, 3, pyLocal)
	py := realclient.Python(t, realclient.DebianPython, "XRootD.client")
	passes = append(passes, pass{"python bindings", func(t *testing.T) [32]byte {
		r := realclient.MustRunPython(t, env, py, bindingsScript, s.url+"//store/py.root", pyLocal)
		if !strings.HasPrefix(string(r.Stdout), "OK 4") {
			t.Fatalf("bindings: %s", r)
		}
		return [32]byte{}
	}, [32]byte{}})
	curl := s.putObject(t, "/store/curl.root", 2<<20+5, 4, "")
	passes = append(passes, pass{"curl", func(t *testing.T) [32]byte {
		return curlSum(t, s.httpURL()+"/store/curl.root")
	}, curl})
	up := realclient.Python(t, realclient.VenvPython(), "uproot", "fsspec_xrootd", "XRootD.client")
	tree := filepath.Join(local, "tree.root")
	realclient.MustRunPython(t, env, up, uprootWrite, tree)
	treeBytes, err := os.ReadFile(tree)
	if err != nil {
		t.Fatal(err)
	}
	s3test.Put(t, s.s3, s3Bucket, "cms/store/tree.root", treeBytes)
	s3test.Put(t, s.s3, s3Bucket, "cms/store/tree-http.root", treeBytes)
	for _, u := range []struct{ name, url string }{
		{"uproot root://", s.url + "//store/tree.root"},
		{"uproot http://", s.httpURL() + "/store/tree-http.root"},
	} {
		passes = append(passes, pass{u.name, func(t *testing.T) [32]byte {
			r := realclient.MustRunPython(t, env, up, uprootRead, u.url, tree)
			if !strings.HasPrefix(string(r.Stdout), "OK 20000") {
				t.Fatalf("uproot: %s", r)
			}
			return [32]byte{}
		}, [32]byte{}})
	}

	for _, p := range passes {
		t.Run(p.name, func(t *testing.T) {
			before := s.originBytes()
			if got := p.read(t); got != p.want {
				t.Fatalf("cold: sha256 %s, want %s", hex(got), hex(p.want))
			}
			cold := s.originBytes()
			if cold == before {
				t.Fatal("the cold read took nothing from the object store")
			}
			if got := p.read(t); got != p.want {
				t.Fatalf("hot: sha256 %s, want %s", hex(got), hex(p.want))
			}
			if hot := s.originBytes(); hot != cold {
				t.Fatalf("the hot read took %d bytes from the object store", hot-cold)
			}
		})
	}
}
