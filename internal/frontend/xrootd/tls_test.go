package xrootd

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/xrootd/proto"
)

// testPKI makes a CA and a server certificate for 127.0.0.1 and localhost.
// It returns the server's TLS config and a CA directory in OpenSSL's hashed
// layout, which XrdCl reads through X509_CERT_DIR.
func testPKI(t *testing.T) (*tls.Config, string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "hepcache test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caDir := t.TempDir()
	caFile := filepath.Join(caDir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	openssl := realclient.Require(t, "openssl")
	r := realclient.MustRun(t, os.Environ(), openssl, "x509", "-hash", "-noout", "-in", caFile)
	if err := os.Symlink("ca.pem", filepath.Join(caDir, strings.TrimSpace(string(r.Stdout))+".0")); err != nil {
		t.Fatal(err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, caDir
}

// TestTLS reads with roots:// (kXR_wantTLS, then TLS on the same
// connection after kXR_protocol). When the server requires TLS, a
// TLS-capable client that asked for root:// is switched to TLS too, and a
// client that cannot do TLS is refused at login.
func TestTLS(t *testing.T) {
	xrdcp := realclient.Require(t, "xrdcp")
	tlsCfg, caDir := testPKI(t)
	for _, require := range []bool{false, true} {
		name := "optional"
		if require {
			name = "required"
		}
		t.Run(name, func(t *testing.T) {
			ts := startServer(t, "", func(c *Config, r *recorder) {
				c.TLS = tlsCfg
				c.RequireTLS = require
			})
			want := writeRandom(t, ts.dir, "f", 3_000_000)
			env := realclient.Env("X509_CERT_DIR=" + caDir)
			for _, mode := range [][]string{nil, {"XRD_CPUSEPGWRTRD=0"}} {
				dst := filepath.Join(t.TempDir(), "f")
				realclient.MustRun(t, append(env, mode...), xrdcp, "-f", "-s", "roots://127.0.0.1:"+portOf(ts.addr)+"//f", dst)
				if got := fileSHA(t, dst); got != want {
					t.Fatalf("roots:// copy %v: sha256 %s, want %s", mode, got, want)
				}
			}
			sawTLS := false
			for _, req := range ts.rec.requests() {
				sawTLS = sawTLS || req.Protocol == "roots"
			}
			if !sawTLS {
				t.Fatal("the backend never saw a roots request")
			}
			before := len(ts.rec.requests())
			realclient.MustRun(t, env, xrdcp, "-f", "-s", ts.url+"//f", filepath.Join(t.TempDir(), "plain"))
			reqs := ts.rec.requests()[before:]
			if len(reqs) == 0 || (reqs[0].Protocol == "roots") != require {
				t.Fatalf("root:// client with TLS required=%v: requests %+v", require, reqs)
			}
			if require {
				// A client without kXR_ableTLS cannot log in.
				rc := dialRaw(t, ts.addr, false)
				b := proto.AppendClientHandshake(nil)
				pr := proto.ProtocolRequest{ClientPV: proto.ProtocolVersion}
				b = pr.Append(b, rc.next())
				lr := proto.LoginRequest{Username: "old"}
				b = lr.Append(b, rc.next())
				rc.send(b)
				var hs [proto.ServerHandshakeLen]byte
				io.ReadFull(rc.br, hs[:])
				rc.read() // kXR_protocol
				h, body, _ := rc.read()
				expectError(t, h, body, proto.ErrTLSRequired)
			}
		})
	}
}

func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}
