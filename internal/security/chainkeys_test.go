package security

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"math/big"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/auth/authtest"
	"github.com/hepcache/hepcache/internal/auth/gsi"
	"github.com/hepcache/hepcache/internal/xrootd/client"
	"github.com/hepcache/hepcache/origin"
)

// hugeKey is a crypto.Signer whose public key is a 65536-bit RSA modulus
// nobody holds the private key of: certificates it "issues" carry a
// 2048-bit signature that cannot verify, but checking it costs the
// verifier a modular exponentiation with the huge modulus.
type hugeKey struct {
	pub    *rsa.PublicKey
	signer crypto.Signer
}

func (k hugeKey) Public() crypto.PublicKey { return k.pub }
func (k hugeKey) Sign(r io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	return k.signer.Sign(r, digest, opts)
}

func newHugeKey(t *testing.T, bits int) hugeKey {
	t.Helper()
	b := make([]byte, bits/8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	b[0] |= 0x80
	b[len(b)-1] |= 1
	return hugeKey{pub: &rsa.PublicKey{N: new(big.Int).SetBytes(b), E: 65537}, signer: authtest.RSAKey(t, 5)}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestGSIChainKeysBounded (issue 27, item 6): a gsi client whose proxy key
// is fine but whose chain holds certificates with 65536-bit RSA keys is
// refused for the size of those keys before any signature is checked with
// them. Two chains: extra "intermediates" named as the CA (each a
// candidate issuer of the user certificate, so each costs a signature
// check with its huge key; before, the handshake then succeeded through the
// real CA), and proxies with huge keys each "signing" the next. The CPU
// the refused handshake cost is logged (in-process: server and client).
func TestGSIChainKeysBounded(t *testing.T) {
	s, p := gsiStack(t, func(c *Config) { c.RequireAuth = true })
	addr := strings.TrimPrefix(s.root, "root://")
	user := p.ca.User(t, "alice", 0)
	real := authtest.RSAKey(t, 5)
	handshake := func(t *testing.T, tc *tls.Certificate) error {
		t.Helper()
		cc := client.DefaultConfig()
		cc.GSI = &gsi.ClientConfig{Certificate: func() (*tls.Certificate, error) { return tc, nil }, Roots: authtest.Pool(p.ca)}
		cl, err := client.New(cc)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		before := cpuTime(t)
		_, err = cl.Stat(ctx, addr, "/public/a.root")
		t.Logf("handshake: %v of CPU: %v", cpuTime(t)-before, err)
		return err
	}
	refused := func(t *testing.T, err error) {
		t.Helper()
		if err == nil || !errors.Is(err, origin.ErrNotAuthorized) {
			t.Fatalf("a chain with 65536-bit keys: err %v, want a refused authentication", err)
		}
		if !strings.Contains(err.Error(), "65536 bits") {
			t.Fatalf("a chain with 65536-bit keys was refused for another reason than their size: %v", err)
		}
	}

	t.Run("intermediates named as the CA", func(t *testing.T) {
		// Signed by a key of the test's under the CA's name: the
		// signatures do not verify, which costs the verifier as much.
		twin := *p.ca.Cert
		twin.PublicKey = real.Public()
		tc := user.Proxy(t, authtest.ProxyOpts{Key: authtest.RSAKey(t, 4)}).TLS()
		for range 4 {
			tmpl := &x509.Certificate{
				SerialNumber: big.NewInt(time.Now().UnixNano()), RawSubject: p.ca.Cert.RawSubject,
				SubjectKeyId: p.ca.Cert.SubjectKeyId, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
				KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
			}
			der, err := x509.CreateCertificate(rand.Reader, tmpl, &twin, newHugeKey(t, 65536).pub, real)
			if err != nil {
				t.Fatal(err)
			}
			tc.Certificate = append(tc.Certificate, der)
		}
		refused(t, handshake(t, tc))
	})
	t.Run("proxies", func(t *testing.T) {
		cred := user
		for i := range 5 {
			if i > 0 {
				// The next proxy is signed by a real key under the huge
				// one's name: its signature cannot verify.
				twin := *cred.Cert
				twin.PublicKey = real.Public()
				cred = &authtest.Cred{Cert: &twin, Key: real, Chain: cred.Chain}
			}
			var key crypto.Signer = newHugeKey(t, 65536)
			if i == 4 {
				key = authtest.RSAKey(t, 4) // the proxy: a fine key
			}
			cred = cred.Proxy(t, authtest.ProxyOpts{Key: key})
		}
		refused(t, handshake(t, cred.TLS()))
	})
}
