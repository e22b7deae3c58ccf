package security

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/auth/authtest"
	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/xrdtest"
	"github.com/hepcache/hepcache/origin"
	xrdorigin "github.com/hepcache/hepcache/origin/xrootd"
)

// TestGSITowardsRealOrigin: hepcache's root:// client authenticates with
// its proxy (origin_cert) to a real C++ xrootd that admits only gsi, and
// reads byte-exact; without a proxy, or with one of a CA the origin does
// not trust, it is refused with the origin's reason.
func TestGSITowardsRealOrigin(t *testing.T) {
	p := newPKI(t)
	dir := t.TempDir()
	hc, hk := p.ca.HostKey(t, authtest.RSAKey(t, 3), "localhost", "127.0.0.1").WriteFiles(t, dir, "xrdhost")
	data := filepath.Join(dir, "data")
	os.MkdirAll(filepath.Join(data, "store"), 0o755)
	want := bytes.Repeat([]byte("gsi origin bytes "), 100000)
	os.WriteFile(filepath.Join(data, "store", "f.root"), want, 0o644)
	srv := xrdtest.StartGSIOrigin(t, data, xrdtest.GSIOptions{CertDir: p.caDir, CertFile: hc, KeyFile: hk})
	url := "root://localhost:" + strings.TrimPrefix(srv.Addr, "127.0.0.1:")

	read := func(t *testing.T, sc *config.SecurityConfig) ([]byte, error) {
		t.Helper()
		cred, err := NewOriginCredentials(sc)
		if err != nil {
			t.Fatal(err)
		}
		o, err := xrdorigin.New(&xrdorigin.Config{URL: url, TLS: cred.TLS, Token: cred.Token, GSI: cred.GSI, ConnsPerHost: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		f, err := o.Open(ctx, "/store/f.root")
		if err != nil {
			return nil, err
		}
		defer f.Close()
		b := make([]byte, len(want))
		if _, err := f.ReadAt(ctx, b, 0); err != nil {
			return nil, err
		}
		return b, nil
	}

	user := p.ca.User(t, "hepcache-robot", 0)
	proxy := user.Proxy(t, authtest.ProxyOpts{Key: authtest.RSAKey(t, 4)}).WriteProxyFile(t, dir, "x509up_cache")
	t.Run("cache proxy", func(t *testing.T) {
		got, err := read(t, &config.SecurityConfig{OriginCert: proxy, OriginKey: proxy, OriginCAPaths: []string{p.caDir}})
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("read through gsi: %d bytes, %v", len(got), err)
		}
	})
	t.Run("no proxy", func(t *testing.T) {
		_, err := read(t, &config.SecurityConfig{OriginCAPaths: []string{p.caDir}})
		if !errors.Is(err, origin.ErrNotAuthorized) || !strings.Contains(err.Error(), "gsi: no proxy configured") {
			t.Fatalf("err %v, want not authorized: no proxy", err)
		}
	})
	t.Run("proxy of a foreign CA", func(t *testing.T) {
		rogue := p.rogue.User(t, "mallory", 0).Proxy(t, authtest.ProxyOpts{Key: authtest.RSAKey(t, 4)}).WriteProxyFile(t, dir, "x509up_rogue")
		_, err := read(t, &config.SecurityConfig{OriginCert: rogue, OriginKey: rogue, OriginCAPaths: []string{p.caDir}})
		if !errors.Is(err, origin.ErrNotAuthorized) || !strings.Contains(err.Error(), "unknown CA") {
			t.Fatalf("err %v, want not authorized: unknown CA", err)
		}
	})
	t.Run("origin of an untrusted CA", func(t *testing.T) {
		other := filepath.Join(t.TempDir(), "certificates")
		authtest.WriteCADir(t, other, p.rogue)
		_, err := read(t, &config.SecurityConfig{OriginCert: proxy, OriginKey: proxy, OriginCAPaths: []string{other}})
		if !errors.Is(err, origin.ErrNotAuthorized) || !strings.Contains(err.Error(), "unknown authority") {
			t.Fatalf("err %v, want the origin's certificate refused", err)
		}
	})
}
