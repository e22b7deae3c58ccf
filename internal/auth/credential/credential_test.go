package credential

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/auth/authtest"
	"github.com/hepcache/hepcache/internal/nginxtest"
	"github.com/hepcache/hepcache/origin"
	httporigin "github.com/hepcache/hepcache/origin/http"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	// A new name renamed over the old one, as token renewal tools do.
	tmp := p + ".new"
	if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
}

// TestTokenFileTowardsNginx: a real nginx origin that requires a bearer
// token serves the cache's HTTP origin client only with the cache's token,
// and a renewed token file is picked up without a restart.
func TestTokenFileTowardsNginx(t *testing.T) {
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "f.root"), []byte("payload"), 0o644)
	ng := nginxtest.Start(t, root, nginxtest.Options{
		LocationExtra: `if ($http_authorization !~ "^Bearer (token-one|token-two)$") { return 403; }`,
	})
	tokFile := filepath.Join(t.TempDir(), "token")
	writeFile(t, tokFile, "token-one\n")
	clk := &clock{t: time.Now()}
	tf, err := NewTokenFile(tokFile)
	if err != nil {
		t.Fatal(err)
	}
	tf.w.now = clk.now
	ctx := context.Background()
	o, err := httporigin.New(&httporigin.Config{URL: ng.URL, Authorize: tf.Authorize})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	read := func() error {
		f, err := o.Open(ctx, "/f.root")
		if err != nil {
			return err
		}
		defer f.Close()
		b := make([]byte, 7)
		_, err = f.ReadAt(ctx, b, 0)
		if err == nil && string(b) != "payload" {
			t.Fatalf("read %q", b)
		}
		return err
	}
	if err := read(); err != nil {
		t.Fatalf("with the cache's token: %v", err)
	}
	writeFile(t, tokFile, "token-two")
	clk.add(2 * recheck)
	if err := read(); err != nil {
		t.Fatalf("after renewal: %v", err)
	}
	writeFile(t, tokFile, "expired-token")
	clk.add(2 * recheck)
	if err := read(); !errors.Is(err, origin.ErrNotAuthorized) {
		t.Fatalf("with a refused token: %v", err)
	}
	noTok, _ := httporigin.New(&httporigin.Config{URL: ng.URL})
	defer noTok.Close()
	if _, err := noTok.Stat(ctx, "/f.root"); !errors.Is(err, origin.ErrNotAuthorized) {
		t.Fatalf("without a token: %v", err)
	}
}

// TestClientCertTowardsNginx: the cache presents its own certificate to an
// https origin that requires one (nginx checks the client DN). nginx's
// OpenSSL refuses RFC 3820 proxies as client certificates, so this uses
// the robot's certificate; hepcache's own front end accepts proxies.
func TestClientCertTowardsNginx(t *testing.T) {
	ca := authtest.NewCA(t, "Test CA")
	dir := t.TempDir()
	certFile, keyFile := ca.Host(t, "127.0.0.1").WriteFiles(t, dir, "host")
	caFile := filepath.Join(dir, "ca.pem")
	os.WriteFile(caFile, authtest.CertPEM(ca.Cert), 0o644)
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "f.root"), []byte("payload"), 0o644)
	ng := nginxtest.Start(t, root, nginxtest.Options{
		TLSCert: certFile, TLSKey: keyFile,
		ServerExtra:   "ssl_verify_client optional_no_ca;",
		LocationExtra: `if ($ssl_client_s_dn !~ "CN=hepcache-robot") { return 403; }`,
	})
	robot := ca.User(t, "hepcache-robot", 0)
	rc, rk := robot.WriteFiles(t, dir, "robot")
	cc, err := NewClientCert(rc, rk)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	o, err := httporigin.New(&httporigin.Config{URL: ng.URL, TLSConfig: TLSConfig(cc, authtest.Pool(ca))})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if fi, err := o.Stat(ctx, "/f.root"); err != nil || fi.Size != 7 {
		t.Fatalf("with the cache's certificate: %+v %v", fi, err)
	}
	anon, _ := httporigin.New(&httporigin.Config{URL: ng.URL, TLSConfig: TLSConfig(nil, authtest.Pool(ca))})
	defer anon.Close()
	if _, err := anon.Stat(ctx, "/f.root"); !errors.Is(err, origin.ErrNotAuthorized) {
		t.Fatalf("without a certificate: %v", err)
	}
}

func TestTokenFileErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := NewTokenFile(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("missing file accepted")
	}
	p := filepath.Join(dir, "two")
	os.WriteFile(p, []byte("a b"), 0o600)
	if _, err := NewTokenFile(p); err == nil {
		t.Fatal("two words accepted as a token")
	}
	os.WriteFile(p, []byte("  \n"), 0o600)
	if _, err := NewTokenFile(p); err == nil {
		t.Fatal("empty token accepted")
	}
}
