package tlsconf

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/auth/authtest"
)

func TestReloadSwapsCertificate(t *testing.T) {
	dir := t.TempDir()
	ca := authtest.NewCA(t, "Test CA")
	first := ca.Host(t, "127.0.0.1")
	certFile, keyFile := first.WriteFiles(t, dir, "host")
	s, err := New(&Config{CertFile: certFile, KeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", s.TLSConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	served := func() string {
		t.Helper()
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: authtest.Pool(ca)})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	if got := served(); got != first.Cert.SerialNumber.String() {
		t.Fatalf("served %s, want %s", got, first.Cert.SerialNumber)
	}

	// A broken file on reload keeps the old certificate.
	os.WriteFile(keyFile, []byte("garbage"), 0o600)
	if err := s.Reload(); err == nil {
		t.Fatal("reload of a broken key succeeded")
	}
	if got := served(); got != first.Cert.SerialNumber.String() {
		t.Fatalf("after failed reload served %s", got)
	}

	second := ca.Host(t, "127.0.0.1")
	second.WriteFiles(t, dir, "host")
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := served(); got != second.Cert.SerialNumber.String() {
		t.Fatalf("after reload served %s, want %s", got, second.Cert.SerialNumber)
	}
}

func TestLoadCAs(t *testing.T) {
	dir := t.TempDir()
	a, b := authtest.NewCA(t, "A"), authtest.NewCA(t, "B")
	os.WriteFile(filepath.Join(dir, "a.pem"), authtest.CertPEM(a.Cert), 0o644)
	os.WriteFile(filepath.Join(dir, "1234abcd.0"), authtest.CertPEM(b.Cert), 0o644)
	os.WriteFile(filepath.Join(dir, "1234abcd.r0"), []byte("a CRL, skipped"), 0o644)
	os.WriteFile(filepath.Join(dir, "a.signing_policy"), []byte("skipped"), 0o644)
	_, n, err := LoadCAs(dir)
	if err != nil || n != 2 {
		t.Fatalf("LoadCAs = %d, %v", n, err)
	}
	if _, _, err := LoadCAs(t.TempDir()); err == nil || !strings.Contains(err.Error(), "none found") {
		t.Fatalf("empty dir: %v", err)
	}
}
