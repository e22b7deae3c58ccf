package security

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/auth/authtest"
	"github.com/hepcache/hepcache/internal/auth/gsi"
	"github.com/hepcache/hepcache/internal/xrootd/client"
	"github.com/hepcache/hepcache/internal/xrootd/proto"
)

// TestGSISessionExpiry (issue 21, item 4): a gsi session (hepcache's own
// raw gsi client, one connection kept open) whose proxy chain, or whose
// VOMS attributes, expire while it lasts gets kXR_NotAuthorized on its next
// request, with the reason; a client with a fresh proxy authenticates again
// and reads. Before, the session kept the rights of its first handshake.
func TestGSISessionExpiry(t *testing.T) {
	s, p := gsiStack(t, func(c *Config) { c.ClockSkew = time.Millisecond })
	addr := strings.TrimPrefix(s.root, "root://")
	user := p.ca.User(t, "alice", 0)
	ac := func(notAfter time.Time) []byte {
		return authtest.VOMSExtension(p.voms.AC(t, user.Cert, authtest.ACOpts{FQANs: []string{"/cms/Role=NULL/Capability=NULL"}, NotAfter: notAfter}))
	}
	connect := func(t *testing.T, cred *authtest.Cred) *client.Client {
		t.Helper()
		tc := cred.TLS()
		cc := client.DefaultConfig()
		cc.ConnsPerHost = 1 // every request on the one session
		cc.GSI = &gsi.ClientConfig{Certificate: func() (*tls.Certificate, error) { return tc, nil }, Roots: authtest.Pool(p.ca)}
		cl, err := client.New(cc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	stat := func(cl *client.Client, path string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err := cl.Stat(ctx, addr, path)
		return err
	}
	// waitPast sleeps until t has passed: the expiry is the server's clock.
	waitPast := func(at time.Time) { time.Sleep(time.Until(at) + 50*time.Millisecond) }
	fresh := func() *authtest.Cred {
		return user.Proxy(t, authtest.ProxyOpts{Key: authtest.RSAKey(t, 4), VOMS: ac(time.Now().Add(time.Hour))})
	}

	t.Run("proxy chain", func(t *testing.T) {
		end := time.Now().Add(3 * time.Second)
		cl := connect(t, user.Proxy(t, authtest.ProxyOpts{Key: authtest.RSAKey(t, 4), VOMS: ac(time.Now().Add(time.Hour)),
			Mutate: func(c *x509.Certificate) { c.NotAfter = end }}))
		if err := stat(cl, "/store/mc/f.root"); err != nil {
			t.Fatalf("stat with a valid VOMS proxy: %v", err)
		}
		waitPast(end)
		err := stat(cl, "/public/a.root")
		if err == nil || !strings.Contains(err.Error(), "kXR_NotAuthorized") || !strings.Contains(err.Error(), "expired") || !strings.Contains(err.Error(), "re-authenticate") {
			t.Fatalf("stat after the proxy expired, same session: %v", err)
		}
		if err := stat(connect(t, fresh()), "/store/mc/f.root"); err != nil {
			t.Fatalf("stat after re-authenticating with a fresh proxy: %v", err)
		}
	})
	t.Run("VOMS attributes", func(t *testing.T) {
		end := time.Now().Add(3 * time.Second)
		cl := connect(t, user.Proxy(t, authtest.ProxyOpts{Key: authtest.RSAKey(t, 4), VOMS: ac(end)}))
		if err := stat(cl, "/store/mc/f.root"); err != nil {
			t.Fatalf("stat with a valid VOMS proxy: %v", err)
		}
		waitPast(end)
		err := stat(cl, "/store/mc/f.root")
		if err == nil || !strings.Contains(err.Error(), "kXR_NotAuthorized") || !strings.Contains(err.Error(), "VOMS attributes of VO cms expired") {
			t.Fatalf("stat needing the VO after its attributes expired, same session: %v", err)
		}
		// The proxy itself is still valid: what needs no VO still works.
		if err := stat(cl, "/public/a.root"); err != nil {
			t.Fatalf("stat of a public file with the proxy still valid: %v", err)
		}
		if err := stat(connect(t, fresh()), "/store/mc/f.root"); err != nil {
			t.Fatalf("stat after re-authenticating with fresh attributes: %v", err)
		}
	})
}

// TestGSICertRequestsPerConnection (issue 21, item 11): a raw gsi client
// sending certificate requests over and over on one connection gets as
// many answers as the limit says (4), not 4 per failed attempt (12 before:
// every refusal reset the count), then the connection ends.
func TestGSICertRequestsPerConnection(t *testing.T) {
	s, p := gsiStack(t, nil)
	addr := strings.TrimPrefix(s.root, "root://")
	params, err := s.sec.gsi.Params()
	if err != nil {
		t.Fatal(err)
	}
	cred := p.ca.User(t, "alice", 0).Proxy(t, authtest.ProxyOpts{Key: authtest.RSAKey(t, 4)}).TLS()
	cc := &gsi.ClientConfig{Certificate: func() (*tls.Certificate, error) { return cred, nil }, Roots: authtest.Pool(p.ca)}
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	b := proto.AppendClientHandshake(nil)
	b = (&proto.ProtocolRequest{ClientPV: proto.ProtocolVersion, Expect: proto.ExpectLogin}).Append(b, proto.StreamID{0, 1})
	b = (&proto.LoginRequest{Username: "raw"}).Append(b, proto.StreamID{0, 2})
	const tries = 20
	for i := range tries {
		_, first, err := gsi.NewClientHandshake(cc, "localhost", strings.TrimPrefix(params, "&P=gsi,"))
		if err != nil {
			t.Fatal(err)
		}
		ar := proto.AuthRequest{Cred: first}
		copy(ar.CredType[:], "gsi")
		b = ar.Append(b, proto.StreamID{1, byte(i)})
	}
	nc.Write(b) // the server may close before reading it all
	hs := make([]byte, proto.ServerHandshakeLen)
	if _, err := io.ReadFull(nc, hs); err != nil {
		t.Fatal(err)
	}
	answers := map[proto.Status]int{}
	for n := 0; ; n++ {
		hb := make([]byte, proto.ResponseHeaderLen)
		if _, err := io.ReadFull(nc, hb); err != nil {
			break // the server ended the connection
		}
		h, err := proto.DecodeResponseHeader(hb)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(nc, make([]byte, h.Dlen)); err != nil {
			break
		}
		if n >= 2 { // after the protocol and login answers
			answers[h.Status]++
		}
	}
	if answers[proto.StatusAuthMore] != 4 || answers[proto.StatusError] == 0 || answers[proto.StatusError]+4 >= tries {
		t.Fatalf("%d certificate requests on one connection: %d answered (kXR_authmore), %d refused before the connection ended; want 4 answered",
			tries, answers[proto.StatusAuthMore], answers[proto.StatusError])
	}
}
