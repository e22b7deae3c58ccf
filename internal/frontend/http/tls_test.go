package httpfront

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
)

// selfSigned makes a certificate for 127.0.0.1 at test time and writes it
// as PEM for clients.
func selfSigned(t *testing.T) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "hepcache test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	pemFile := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(pemFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pemFile
}

// TestHTTPS: with a TLSConfig the front end speaks HTTPS (the seam for
// issue 7); curl verifies the certificate, reads a range, and the
// authorizer sees the TLS connection state.
func TestHTTPS(t *testing.T) {
	cert, caFile := selfSigned(t)
	var sawTLS atomic.Bool
	e := newEnv(t, envOpts{server: func(c *Config) {
		c.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
		c.Authorizer = AuthorizerFunc(func(r *http.Request, req *backend.Request, op string) error {
			sawTLS.Store(r.TLS != nil && req.Protocol == "https")
			return nil
		})
	}})
	if !strings.HasPrefix(e.url, "https://") {
		t.Fatalf("url %s", e.url)
	}
	data := e.put("/f", 100000, 51)
	code, h, b := curl(t, "--cacert", caFile, "-r", "10-19", e.url+"/f")
	if code != "206" || !bytes.Equal(b, data[10:20]) {
		t.Fatalf("curl over https: %s\n%s", code, h)
	}
	if !sawTLS.Load() {
		t.Error("authorizer did not see an https request with TLS state")
	}
	if got := e.metric2(t, `hepcache_requests_total{protocol="https",operation="get",outcome="ok"}`, caFile); got != "1" {
		t.Errorf("https GETs counted %q; want 1", got)
	}
	// Without the CA, curl refuses: the listener really is TLS.
	if out, err := run(t, nil, requireTool(t, "curl"), "-sS", e.url+"/f"); err == nil {
		t.Errorf("curl without the CA succeeded: %s", out)
	}
}

// metric2 reads a series over https trusting caFile.
func (e *env) metric2(t *testing.T, series, caFile string) string {
	t.Helper()
	_, _, b := curl(t, "--cacert", caFile, e.url+"/metrics")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			return v
		}
	}
	return ""
}
