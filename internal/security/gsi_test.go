package security

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/auth/authtest"
	"github.com/hepcache/hepcache/internal/auth/gsi"
	xrdfront "github.com/hepcache/hepcache/internal/frontend/xrootd"
	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/tlsconf"
	"github.com/hepcache/hepcache/internal/xrootd/client"
	"github.com/hepcache/hepcache/internal/xrootd/proto"
	"github.com/hepcache/hepcache/origin"
)

// gsiStack is a stack accepting gsi with an RSA host certificate of its
// own (gsi_cert), next to the EC one TLS uses.
func gsiStack(t *testing.T, mut func(*Config), opts ...any) (*stack, *pki) {
	t.Helper()
	p := newPKI(t)
	hc, hk := p.ca.HostKey(t, authtest.RSAKey(t, 3), "localhost", "127.0.0.1").WriteFiles(t, p.dir, "gsihost")
	s := newStack(t, p, func(c *Config) {
		c.GSI, c.GSICert = true, &tlsconf.Config{CertFile: hc, KeyFile: hk}
		if mut != nil {
			mut(c)
		}
	}, opts...)
	// XrdCl checks the host certificate against the host name it dialled.
	s.root = strings.Replace(s.root, "127.0.0.1", "localhost", 1)
	return s, p
}

// gsiEnv is a real XrdCl client's environment for gsi with the proxy file.
func (s *stack) gsiEnv(t *testing.T, proxy string) []string {
	realclient.RequireFile(t, "/usr/lib/x86_64-linux-gnu/libXrdSecgsi-5.so")
	return s.xrdEnv(t, "XrdSecPROTOCOL=gsi", "X509_USER_PROXY="+proxy, "X509_USER_CERT=/nonexistent", "X509_USER_KEY=/nonexistent")
}

// TestXrdcpGSI drives the real xrdcp with gsi over root://: a plain proxy
// reads what authenticated clients may read, a VOMS proxy of the CMS VO
// reads /store (a rule that needs the VO), and the plain proxy may not.
func TestXrdcpGSI(t *testing.T) {
	s, p := gsiStack(t, nil)
	dir := t.TempDir()
	user := p.ca.User(t, "alice", 0)
	plain := user.Proxy(t, authtest.ProxyOpts{Key: authtest.RSAKey(t, 4)}).WriteProxyFile(t, dir, "x509up_plain")
	ac := p.voms.AC(t, user.Cert, authtest.ACOpts{FQANs: []string{"/cms/Role=production/Capability=NULL"}})
	vomsProxy := user.Proxy(t, authtest.ProxyOpts{Key: authtest.RSAKey(t, 4), VOMS: authtest.VOMSExtension(ac)}).WriteProxyFile(t, dir, "x509up_voms")

	t.Run("plain proxy", func(t *testing.T) {
		got, r := s.xrdcp(t, s.gsiEnv(t, plain), s.root+"//public/a.root")
		if r.Err != nil || !bytes.Equal(got, s.data["/public/a.root"]) {
			t.Fatalf("xrdcp with a proxy: %s\nserver log:\n%s", r, s.log)
		}
		if !strings.Contains(s.log.String(), "gsi authenticated") || !strings.Contains(s.log.String(), "CN=alice") {
			t.Errorf("server did not log a gsi authentication of alice:\n%s", s.log)
		}
	})
	t.Run("plain proxy outside its rights", func(t *testing.T) {
		_, r := s.xrdcp(t, s.gsiEnv(t, plain), s.root+"//store/mc/f.root")
		if out := string(r.Stdout) + string(r.Stderr); r.Err == nil || !strings.Contains(out, "3010") || !strings.Contains(out, "may not read /store/mc/f.root") {
			t.Fatalf("a proxy without VO read /store: %s", r)
		}
	})
	t.Run("VOMS proxy", func(t *testing.T) {
		got, r := s.xrdcp(t, s.gsiEnv(t, vomsProxy), s.root+"//store/mc/f.root")
		if r.Err != nil || !bytes.Equal(got, s.data["/store/mc/f.root"]) {
			t.Fatalf("xrdcp with a CMS VOMS proxy: %s\nserver log:\n%s", r, s.log)
		}
	})
	t.Run("foreign CA", func(t *testing.T) {
		rogue := p.rogue.User(t, "mallory", 0).Proxy(t, authtest.ProxyOpts{Key: authtest.RSAKey(t, 4)}).WriteProxyFile(t, dir, "x509up_rogue")
		caDir := filepath.Join(t.TempDir(), "certificates")
		authtest.WriteCADir(t, caDir, p.ca, p.rogue) // the client trusts both; the server only its CA
		env := append(s.gsiEnv(t, rogue), "X509_CERT_DIR="+caDir, "XRD_LOGLEVEL=Info")
		_, r := s.xrdcp(t, env, s.root+"//public/a.root")
		if out := string(r.Stdout) + string(r.Stderr); r.Err == nil || !strings.Contains(out, "unknown authority") {
			t.Fatalf("a proxy of a foreign CA: %s\nserver log:\n%s", r, s.log)
		}
	})
}

// TestGSIRefusals: what the C++ client will not send (an expired proxy)
// and what no client sends (garbage) go to hepcache through its own
// root:// client and raw kXR_auth requests; each is refused with the
// reason in the kXR_AuthFailed answer. Authentication is required, so
// that no client falls back to unix.
func TestGSIRefusals(t *testing.T) {
	s, p := gsiStack(t, func(c *Config) { c.RequireAuth = true })
	addr := strings.TrimPrefix(s.root, "root://")
	user := p.ca.User(t, "alice", 0)
	stat := func(t *testing.T, cred *authtest.Cred) error {
		t.Helper()
		tc := cred.TLS()
		cc := client.DefaultConfig()
		cc.GSI = &gsi.ClientConfig{Certificate: func() (*tls.Certificate, error) { return tc, nil }, Roots: authtest.Pool(p.ca)}
		cl, err := client.New(cc)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err = cl.Stat(ctx, addr, "/public/a.root")
		return err
	}
	t.Run("valid proxy through hepcache's client", func(t *testing.T) {
		if err := stat(t, user.Proxy(t, authtest.ProxyOpts{Key: authtest.RSAKey(t, 4)})); err != nil {
			t.Fatalf("stat with a valid proxy: %v", err)
		}
	})
	t.Run("expired proxy", func(t *testing.T) {
		expired := user.Proxy(t, authtest.ProxyOpts{Key: authtest.RSAKey(t, 4), Mutate: func(c *x509.Certificate) {
			c.NotBefore, c.NotAfter = time.Now().Add(-3*time.Hour), time.Now().Add(-time.Hour)
		}})
		err := stat(t, expired)
		if !errors.Is(err, origin.ErrNotAuthorized) || !strings.Contains(err.Error(), "expired") || !strings.Contains(err.Error(), "3030") && !strings.Contains(err.Error(), "AuthFailed") {
			t.Fatalf("err %v, want kXR_AuthFailed: expired", err)
		}
	})
	for _, tc := range []struct{ name, cred, want string }{
		{"garbage", "not a gsi buffer at all", "malformed"},
		{"client certificate without a certificate request", "gsi\x00\x00\x00\x03\xe9\x00\x00\x00\x00", "before the certificate request"},
		{"proxy delegation", "gsi\x00\x00\x00\x03\xea\x00\x00\x00\x00", "delegation is not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, msg := rawAuth(t, addr, "gsi", []byte(tc.cred))
			if status != proto.StatusError || !strings.Contains(msg, tc.want) {
				t.Fatalf("answer %v %q, want an error with %q", status, msg, tc.want)
			}
		})
	}
}

// rawAuth logs in to addr and sends one kXR_auth; it returns the status
// and the text of the answer.
func rawAuth(t *testing.T, addr, credType string, cred []byte) (proto.Status, string) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	read := func() (proto.ResponseHeader, []byte) {
		t.Helper()
		hb := make([]byte, proto.ResponseHeaderLen)
		if _, err := io.ReadFull(nc, hb); err != nil {
			t.Fatal(err)
		}
		h, err := proto.DecodeResponseHeader(hb)
		if err != nil {
			t.Fatal(err)
		}
		body := make([]byte, h.Dlen)
		if _, err := io.ReadFull(nc, body); err != nil {
			t.Fatal(err)
		}
		return h, body
	}
	b := proto.AppendClientHandshake(nil)
	b = (&proto.ProtocolRequest{ClientPV: proto.ProtocolVersion, Expect: proto.ExpectLogin}).Append(b, proto.StreamID{0, 1})
	b = (&proto.LoginRequest{Username: "raw"}).Append(b, proto.StreamID{0, 2})
	ar := proto.AuthRequest{Cred: cred}
	copy(ar.CredType[:], credType)
	b = ar.Append(b, proto.StreamID{0, 3})
	if _, err := nc.Write(b); err != nil {
		t.Fatal(err)
	}
	hs := make([]byte, proto.ServerHandshakeLen)
	if _, err := io.ReadFull(nc, hs); err != nil {
		t.Fatal(err)
	}
	read() // kXR_protocol
	if h, body := read(); h.Status != proto.StatusOK || !strings.Contains(string(body), "&P=gsi") {
		t.Fatalf("login answer %v %q: gsi not offered", h.Status, body)
	}
	h, body := read()
	if len(body) >= 4 {
		body = body[4:] // the error code
	}
	return h.Status, string(body)
}

// TestGSIBrokenHostCertKeepsAuthRequired: a gsi host certificate reloaded
// with a key gsi cannot use stops gsi being offered, but a server requiring
// authentication does not fall open: it offers only unix, which it refuses.
func TestGSIBrokenHostCertKeepsAuthRequired(t *testing.T) {
	s, p := gsiStack(t, func(c *Config) { c.RequireAuth, c.Tokens = true, nil })
	a := s.sec.XRootDAuthenticator()
	if got := a.Params(xrdfront.ConnInfo{}); !strings.HasPrefix(got, "&P=gsi,v:10400,c:ssl,ca:") || strings.Contains(got, "unix") {
		t.Fatalf("params %q, want gsi only", got)
	}
	p.ca.HostKey(t, nil, "localhost").WriteFiles(t, p.dir, "gsihost") // an EC key
	if err := s.sec.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := a.Params(xrdfront.ConnInfo{}); got != "&P=unix" {
		t.Fatalf("params %q with an unusable gsi certificate, want &P=unix (refused)", got)
	}
	_, _, err := a.Authenticate(context.Background(), xrdfront.ConnInfo{LoginName: "x"}, "unix", []byte("unix\x00x x\x00"))
	if err == nil || !strings.Contains(err.Error(), "requires authentication") {
		t.Fatalf("unix with auth required: %v", err)
	}
}
