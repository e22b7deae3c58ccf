// Package tlsconf builds the server TLS configuration of both front ends:
// the certificate and key come from files and are swapped atomically on
// Reload (SIGHUP), so renewed certificates take effect without a restart
// and without dropping connections. It also loads CA certificates from
// files and directories (/etc/grid-security/certificates).
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

// Config configures a Server.
type Config struct {
	// CertFile is the PEM certificate chain (host certificate first).
	// Required.
	CertFile string
	// KeyFile is the PEM private key of the certificate. Required.
	KeyFile string
	// RequestClientCert asks clients for a certificate (X.509 and proxy
	// authentication). The chain is not verified by the TLS layer, which
	// cannot verify RFC 3820 proxies, but by the authenticator, which
	// refuses what does not verify. Default false.
	RequestClientCert bool
	// MinVersion is the oldest TLS version accepted. Default TLS 1.2.
	MinVersion uint16
}

// Server holds the current certificate. Safe for concurrent use.
type Server struct {
	cfg  Config
	cert atomic.Pointer[tls.Certificate]
}

// New loads the certificate and key.
func New(cfg *Config) (*Server, error) {
	s := &Server{cfg: *cfg}
	if s.cfg.MinVersion == 0 {
		s.cfg.MinVersion = tls.VersionTLS12
	}
	var errs []error
	if cfg.CertFile == "" {
		errs = append(errs, errors.New("no certificate file"))
	}
	if cfg.KeyFile == "" {
		errs = append(errs, errors.New("no key file"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Reload re-reads the certificate and key. On error the current
// certificate stays in use. New handshakes use the new certificate;
// established connections keep theirs.
func (s *Server) Reload() error {
	c, err := tls.LoadX509KeyPair(s.cfg.CertFile, s.cfg.KeyFile)
	if err != nil {
		return fmt.Errorf("tls: load %s and %s: %w", s.cfg.CertFile, s.cfg.KeyFile, err)
	}
	leaf := c.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return fmt.Errorf("tls: parse %s: %w", s.cfg.CertFile, err)
		}
		c.Leaf = leaf
	}
	if time.Now().After(leaf.NotAfter) {
		return fmt.Errorf("tls: certificate %s expired at %s", s.cfg.CertFile, leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	s.cert.Store(&c)
	return nil
}

// Certificate returns the certificate in use.
func (s *Server) Certificate() *tls.Certificate { return s.cert.Load() }

// TLSConfig returns a server configuration that always presents the
// current certificate. Each call returns a new *tls.Config.
func (s *Server) TLSConfig() *tls.Config {
	tc := &tls.Config{
		MinVersion: s.cfg.MinVersion,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return s.cert.Load(), nil
		},
	}
	if s.cfg.RequestClientCert {
		tc.ClientAuth = tls.RequestClientCert
	}
	return tc
}

// LoadCAs returns a pool with the CA certificates in the given files and
// directories. In a directory, files named *.pem, *.crt or *.N (the
// OpenSSL hash links) are read; other files (CRLs, signing policies,
// .info) are skipped.
func LoadCAs(paths ...string) (*x509.CertPool, int, error) {
	pool := x509.NewCertPool()
	n := 0
	var errs []error
	add := func(p string) {
		b, err := os.ReadFile(p)
		if err != nil {
			errs = append(errs, err)
			return
		}
		k, err := addPEM(pool, b)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
		}
		n += k
	}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !st.IsDir() {
			add(p)
			continue
		}
		ents, err := os.ReadDir(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, e := range ents {
			if e.IsDir() || !caFileName(e.Name()) {
				continue
			}
			add(filepath.Join(p, e.Name()))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, 0, fmt.Errorf("load CA certificates: %w", err)
	}
	if n == 0 {
		return nil, 0, fmt.Errorf("load CA certificates: none found in %s", strings.Join(paths, ", "))
	}
	return pool, n, nil
}

func caFileName(name string) bool {
	if strings.HasSuffix(name, ".pem") || strings.HasSuffix(name, ".crt") {
		return true
	}
	ext := filepath.Ext(name)
	if len(ext) < 2 {
		return false
	}
	for _, r := range ext[1:] {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func addPEM(pool *x509.CertPool, b []byte) (int, error) {
	n := 0
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return n, nil
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return n, err
		}
		pool.AddCert(c)
		n++
	}
}
