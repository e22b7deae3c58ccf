package crl

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/auth/authtest"
)

// writeCRL writes a CRL of ca revoking serials, valid until next, as name.
func writeCRL(t *testing.T, dir, name string, ca *authtest.CA, next time.Time, serials ...*big.Int) {
	t.Helper()
	var revoked []x509.RevocationListEntry
	for _, s := range serials {
		revoked = append(revoked, x509.RevocationListEntry{SerialNumber: s, RevocationTime: time.Now().Add(-time.Minute)})
	}
	der, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{
		Number: big.NewInt(1), ThisUpdate: time.Now().Add(-time.Hour), NextUpdate: next, RevokedCertificateEntries: revoked,
	}, ca.Cert, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestModes: each of XrdSecgsi's levels, with a CRL, without one, with an
// expired one and with one the CA did not sign.
func TestModes(t *testing.T) {
	ca := authtest.NewCA(t, "crl test CA")
	other := authtest.NewCA(t, "crl test CA")
	alice, bob := ca.User(t, "alice", 1), ca.User(t, "bob", 2)
	path := func(u *authtest.Cred) []*x509.Certificate { return []*x509.Certificate{u.Cert, ca.Cert} }
	for _, tc := range []struct {
		name       string
		mode       Mode
		crl        func(dir string)
		alice, bob error
	}{
		{"ignore", Ignore, func(d string) { writeCRL(t, d, "ca.r0", ca, time.Now().Add(time.Hour), alice.Cert.SerialNumber) }, nil, nil},
		{"try, revoked", Try, func(d string) { writeCRL(t, d, "ca.r0", ca, time.Now().Add(time.Hour), alice.Cert.SerialNumber) }, ErrRevoked, nil},
		{"try, no CRL", Try, func(string) {}, nil, nil},
		{"try, expired CRL still revokes", Try, func(d string) { writeCRL(t, d, "ca.r0", ca, time.Now().Add(-time.Minute), alice.Cert.SerialNumber) }, ErrRevoked, nil},
		{"try, a CRL the CA did not sign", Try, func(d string) { writeCRL(t, d, "ca.r0", other, time.Now().Add(time.Hour)) }, ErrNoCRL, ErrNoCRL},
		{"try, another extension is not read", Try, func(d string) { writeCRL(t, d, "ca.crl", ca, time.Now().Add(time.Hour), alice.Cert.SerialNumber) }, nil, nil},
		{"use, no CRL", Use, func(string) {}, ErrNoCRL, ErrNoCRL},
		{"use, expired", Use, func(d string) { writeCRL(t, d, "ca.r0", ca, time.Now().Add(-time.Minute)) }, nil, nil},
		{"require, expired", Require, func(d string) { writeCRL(t, d, "ca.r0", ca, time.Now().Add(-time.Minute)) }, ErrNoCRL, ErrNoCRL},
		{"require, current", Require, func(d string) { writeCRL(t, d, "ca.r0", ca, time.Now().Add(time.Hour), alice.Cert.SerialNumber) }, ErrRevoked, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.crl(dir)
			c, err := New(&Config{Mode: tc.mode, Dirs: []string{dir}})
			if err != nil {
				t.Fatal(err)
			}
			for who, want := range map[*authtest.Cred]error{alice: tc.alice, bob: tc.bob} {
				if err := c.Check(path(who)); !errors.Is(err, want) || (want == nil) != (err == nil) {
					t.Errorf("%s: %v, want %v", who.Cert.Subject, err, want)
				}
			}
		})
	}
}

// TestRefresh: a CRL written after the start counts once the lists are
// older than Refresh.
func TestRefresh(t *testing.T) {
	ca := authtest.NewCA(t, "crl refresh CA")
	alice := ca.User(t, "alice", 1)
	dir := t.TempDir()
	c, err := New(&Config{Mode: Try, Dirs: []string{dir}, Refresh: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	c.now = func() time.Time { return now }
	writeCRL(t, dir, "ca.r0", ca, now.Add(48*time.Hour), alice.Cert.SerialNumber)
	chain := []*x509.Certificate{alice.Cert, ca.Cert}
	if err := c.Check(chain); err != nil {
		t.Fatalf("before the refresh: %v", err)
	}
	now = now.Add(time.Hour + time.Second)
	if err := c.Check(chain); !errors.Is(err, ErrRevoked) {
		t.Fatalf("after the refresh interval: %v", err)
	}
}
