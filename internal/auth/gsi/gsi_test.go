package gsi

import (
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"math/big"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/auth/authtest"
	"github.com/hepcache/hepcache/internal/realclient"
)

// pki is a CA, an RSA host certificate for localhost and an RSA proxy.
type pki struct {
	ca    *authtest.CA
	host  *tls.Certificate
	proxy *authtest.Cred
}

func newPKI(tb testing.TB) *pki {
	tb.Helper()
	ca := authtest.NewCA(tb, "gsi test CA")
	h := ca.HostKey(tb, authtest.RSAKey(tb, 0), "localhost", "127.0.0.1")
	user := ca.User(tb, "alice", 1)
	return &pki{
		ca:    ca,
		host:  h.TLS(),
		proxy: user.Proxy(tb, authtest.ProxyOpts{Key: authtest.RSAKey(tb, 2)}),
	}
}

func (p *pki) clientConfig(cred *authtest.Cred) *ClientConfig {
	c := cred.TLS()
	return &ClientConfig{Certificate: func() (*tls.Certificate, error) { return c, nil }, Roots: authtest.Pool(p.ca)}
}

// handshake runs the Go client against the Go server.
func handshake(tb testing.TB, srv *Server, cc *ClientConfig, host string) ([]*x509.Certificate, error) {
	tb.Helper()
	params, err := srv.Params()
	if err != nil {
		return nil, err
	}
	ch, cred, err := NewClientHandshake(cc, host, strings.TrimPrefix(params, "&P=gsi,"))
	if err != nil {
		return nil, err
	}
	var hs Handshake
	_, more, err := srv.Step(&hs, cred)
	if err != nil {
		return nil, err
	}
	if cred, err = ch.Next(more); err != nil {
		return nil, err
	}
	chain, more, err := srv.Step(&hs, cred)
	if more != nil {
		tb.Fatalf("server wants a third step")
	}
	return chain, err
}

// TestHandshake runs hepcache's client against its server at the version
// it announces (signed DH) and at 10300, which the client speaks to old
// servers.
func TestHandshake(t *testing.T) {
	p := newPKI(t)
	for _, v := range []int32{Version, 10300} {
		t.Run(strconv.Itoa(int(v)), func(t *testing.T) {
			srv := NewServer(func() *tls.Certificate { return p.host })
			srv.version = v
			chain, err := handshake(t, srv, p.clientConfig(p.proxy), "localhost")
			if err != nil {
				t.Fatal(err)
			}
			if len(chain) != 2 || !chain[0].Equal(p.proxy.Cert) {
				t.Fatalf("chain %d certificates, want the proxy then the user", len(chain))
			}
		})
	}
}

func TestHandshakeRefusals(t *testing.T) {
	p := newPKI(t)
	srv := NewServer(func() *tls.Certificate { return p.host })
	other := authtest.NewCA(t, "other CA")
	t.Run("wrong host name", func(t *testing.T) {
		if _, err := handshake(t, srv, p.clientConfig(p.proxy), "evil.example"); err == nil || !strings.Contains(err.Error(), "server certificate") {
			t.Fatalf("err %v, want a server certificate error", err)
		}
	})
	t.Run("server of an untrusted CA", func(t *testing.T) {
		cc := p.clientConfig(p.proxy)
		cc.Roots = authtest.Pool(other)
		if _, err := handshake(t, srv, cc, "localhost"); err == nil || !strings.Contains(err.Error(), "unknown authority") {
			t.Fatalf("err %v, want unknown authority", err)
		}
	})
	t.Run("EC proxy", func(t *testing.T) {
		ec := p.proxy.Chain[1:]
		user := &authtest.Cred{Cert: ec[0], Key: authtest.RSAKey(t, 1), Chain: ec}
		if _, err := handshake(t, srv, p.clientConfig(user.Proxy(t, authtest.ProxyOpts{})), "localhost"); err == nil || !strings.Contains(err.Error(), "RSA") {
			t.Fatalf("err %v, want an RSA error", err)
		}
	})
	t.Run("key not matching the chain", func(t *testing.T) {
		cc := p.clientConfig(p.proxy)
		good := cc.Certificate
		cc.Certificate = func() (*tls.Certificate, error) {
			c, _ := good()
			cp := *c
			cp.PrivateKey = authtest.RSAKey(t, 3)
			return &cp, nil
		}
		// At 10400 the DH part's signature fails first; at 10300 the tag's.
		if _, err := handshake(t, srv, cc, "localhost"); err == nil || !strings.Contains(err.Error(), "not signed by the key of the presented certificate") {
			t.Fatalf("err %v, want a signature not made by the certificate's key", err)
		}
		srv10300 := NewServer(func() *tls.Certificate { return p.host })
		srv10300.version = 10300
		if _, err := handshake(t, srv10300, cc, "localhost"); err == nil || !strings.Contains(err.Error(), "proof of possession") {
			t.Fatalf("10300: err %v, want no proof of possession", err)
		}
	})
}

// TestServerSignsOnlyTags checks that the host key signs nothing but a
// short random tag: a client asking for a signature over a DigestInfo
// (what a certificate signature is) is refused.
func TestServerSignsOnlyTags(t *testing.T) {
	p := newPKI(t)
	srv := NewServer(func() *tls.Certificate { return p.host })
	for name, tag := range map[string][]byte{
		"digest info": append([]byte{0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00, 0x04, 0x20}, make([]byte, 32)...),
		"long":        []byte(strings.Repeat("a", maxPeerTag+1)),
		"empty":       {},
	} {
		t.Run(name, func(t *testing.T) {
			m := &buffer{step: stepCertReq}
			m.set(bkRtag, tag)
			in := &buffer{step: stepCertReq}
			in.set(bkCryptoMod, []byte("ssl"))
			in.set(bkMain, m.marshal())
			var hs Handshake
			if _, more, err := srv.Step(&hs, in.marshal()); err == nil || more != nil || !errors.Is(err, ErrMalformed) {
				t.Fatalf("more %d bytes, err %v: want a malformed refusal", len(more), err)
			}
		})
	}
}

func TestBufferRoundTrip(t *testing.T) {
	b := &buffer{step: stepCertReq}
	b.set(bkCryptoMod, []byte("ssl"))
	b.setInt(bkVersion, Version)
	b.set(bkMain, nil)
	got, err := parseBuffer(b.marshal())
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := got.getInt(bkVersion); got.step != stepCertReq || v != Version || string(got.get(bkCryptoMod)) != "ssl" || !got.has(bkMain) {
		t.Fatalf("round trip: %+v", got)
	}
}

// TestNameHash compares NameHash with the openssl tool's subject hash.
func TestNameHash(t *testing.T) {
	openssl := realclient.Require(t, "openssl")
	p := newPKI(t)
	dir := t.TempDir()
	for i, c := range []*x509.Certificate{p.ca.Cert, p.proxy.Cert, p.proxy.Chain[1]} {
		f := filepath.Join(dir, string(rune('a'+i))+".pem")
		writeFile(t, f, authtest.CertPEM(c))
		out, err := exec.Command(openssl, "x509", "-noout", "-subject_hash", "-in", f).Output()
		if err != nil {
			t.Fatal(err)
		}
		got, err := NameHash(c.RawSubject)
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.TrimSpace(string(out)); got != want {
			t.Errorf("%s: hash %s, openssl says %s", c.Subject, got, want)
		}
	}
}

// TestCertRequestsBounded: a client restarting the handshake over and over
// (each start costs the server a signature) is cut off.
func TestCertRequestsBounded(t *testing.T) {
	p := newPKI(t)
	srv := NewServer(func() *tls.Certificate { return p.host })
	params, _ := srv.Params()
	var hs Handshake
	for i := 0; i <= maxStarts; i++ {
		_, first, err := NewClientHandshake(p.clientConfig(p.proxy), "localhost", strings.TrimPrefix(params, "&P=gsi,"))
		if err != nil {
			t.Fatal(err)
		}
		_, more, err := srv.Step(&hs, first)
		if i < maxStarts && (err != nil || more == nil) {
			t.Fatalf("start %d: %v", i, err)
		}
		if i == maxStarts && (err == nil || !strings.Contains(err.Error(), "certificate requests")) {
			t.Fatalf("start %d: err %v, want a refusal", i, err)
		}
	}
}

// TestClientRSAKeyBounded (issue 21, item 6): a client that answers the
// certificate request (a raw kXGC_cert step) with an RSA key too large, or
// with a bad exponent, for its signed DH part is refused for its key before
// the server exponentiates anything.
func TestClientRSAKeyBounded(t *testing.T) {
	p := newPKI(t)
	srv := NewServer(func() *tls.Certificate { return p.host })
	params, err := srv.Params()
	if err != nil {
		t.Fatal(err)
	}
	odd := func(bits int) *big.Int {
		n := new(big.Int).Lsh(big.NewInt(1), uint(bits-1))
		return n.Add(n, big.NewInt(12345)) // any odd number of that size
	}
	for _, tc := range []struct {
		name string
		key  rsa.PublicKey
		want string
	}{
		{"56 KB modulus", rsa.PublicKey{N: odd(56 << 13), E: 65537}, "bits"},
		{"16384-bit modulus", rsa.PublicKey{N: odd(16384), E: 65537}, "bits"},
		{"512-bit modulus", rsa.PublicKey{N: odd(512), E: 65537}, "bits"},
		{"even exponent", rsa.PublicKey{N: odd(2048), E: 65536}, "exponent"},
		{"exponent 1", rsa.PublicKey{N: odd(2048), E: 1}, "exponent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, first, err := NewClientHandshake(p.clientConfig(p.proxy), "localhost", strings.TrimPrefix(params, "&P=gsi,"))
			if err != nil {
				t.Fatal(err)
			}
			var hs Handshake
			if _, _, err := srv.Step(&hs, first); err != nil {
				t.Fatal(err)
			}
			der, err := x509.MarshalPKIXPublicKey(&tc.key)
			if err != nil {
				t.Fatal(err)
			}
			k := (tc.key.N.BitLen() + 7) / 8
			out := &buffer{step: stepCert}
			out.set(bkCryptoMod, []byte("ssl"))
			out.set(bkPuk, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
			out.set(bkCipher, make([]byte, k)) // one "signed" block: all zero, below N
			out.set(bkCipherAlg, []byte(sessionCipher+"#16"))
			out.set(bkMain, []byte("x"))
			_, _, err = srv.Step(&hs, out.marshal())
			if err == nil || !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "client public key") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("key %d bits, e=%d: %v", tc.key.N.BitLen(), tc.key.E, err)
			}
		})
	}
}
