// Package credential is the cache's own credential towards origins, never
// a user's: a bearer token read from a file and a client certificate (or
// proxy) with its key, both re-read when their files change, since tokens
// and proxies are renewed by a cron job while the cache keeps running.
package credential

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// recheck is how often a file's modification time is looked at.
const recheck = time.Second

// maxTokenFile bounds a token file.
const maxTokenFile = 64 << 10

// fileWatch re-reads a file set when one of them changes.
type fileWatch struct {
	paths []string
	now   func() time.Time

	// mu protects the fields below.
	mu      sync.Mutex
	stamp   string // modification times and sizes at the last load
	checked time.Time
}

// changed reports whether the files changed since the last call that
// returned true (or since never). It stats at most once per recheck.
func (w *fileWatch) changed() (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	if w.stamp != "" && now.Sub(w.checked) < recheck {
		return false, nil
	}
	w.checked = now
	var b strings.Builder
	for _, p := range w.paths {
		st, err := os.Stat(p)
		if err != nil {
			return false, err
		}
		fmt.Fprintf(&b, "%s:%d:%d;", p, st.ModTime().UnixNano(), st.Size())
	}
	if s := b.String(); s != w.stamp {
		w.stamp = s
		return true, nil
	}
	return false, nil
}

// TokenFile is a bearer token kept in a file (e.g. written by htgettoken or
// oidc-agent), re-read when the file changes. Safe for concurrent use.
type TokenFile struct {
	w fileWatch

	// mu protects tok.
	mu  sync.Mutex
	tok string
}

// NewTokenFile reads the token in path.
func NewTokenFile(path string) (*TokenFile, error) {
	t := &TokenFile{w: fileWatch{paths: []string{path}, now: time.Now}}
	if _, err := t.Token(); err != nil {
		return nil, err
	}
	return t, nil
}

// Token returns the current token.
func (t *TokenFile) Token() (string, error) {
	ch, err := t.w.changed()
	if err != nil {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.tok != "" {
			return t.tok, nil // keep the last token while the file is replaced
		}
		return "", fmt.Errorf("origin token: %w", err)
	}
	if ch {
		b, err := os.ReadFile(t.w.paths[0])
		if err != nil {
			return "", fmt.Errorf("origin token: %w", err)
		}
		if len(b) > maxTokenFile {
			return "", fmt.Errorf("origin token file %s is longer than %d bytes", t.w.paths[0], maxTokenFile)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" || strings.ContainsAny(tok, " \r\n\t") {
			return "", fmt.Errorf("origin token file %s does not hold one token", t.w.paths[0])
		}
		t.mu.Lock()
		t.tok = tok
		t.mu.Unlock()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tok, nil
}

// Authorize sets "Authorization: Bearer <token>" on an outgoing request
// (origin/http's Config.Authorize).
func (t *TokenFile) Authorize(r *http.Request) error {
	tok, err := t.Token()
	if err != nil {
		return err
	}
	r.Header.Set("Authorization", "Bearer "+tok)
	return nil
}

// ClientCert is the cache's client certificate or proxy, re-read when its
// files change. Safe for concurrent use.
type ClientCert struct {
	certFile, keyFile string
	w                 fileWatch

	// mu protects cert.
	mu   sync.Mutex
	cert *tls.Certificate
}

// NewClientCert loads a PEM certificate chain and key. For a grid proxy
// both name the proxy file (certificate, key, then the issuing chain).
func NewClientCert(certFile, keyFile string) (*ClientCert, error) {
	c := &ClientCert{certFile: certFile, keyFile: keyFile, w: fileWatch{paths: []string{certFile, keyFile}, now: time.Now}}
	if _, err := c.Certificate(); err != nil {
		return nil, err
	}
	return c, nil
}

// Certificate returns the current certificate.
func (c *ClientCert) Certificate() (*tls.Certificate, error) {
	ch, err := c.w.changed()
	if err == nil && ch {
		cert, lerr := tls.LoadX509KeyPair(c.certFile, c.keyFile)
		if lerr != nil {
			err = fmt.Errorf("origin client certificate: %w", lerr)
		} else {
			c.mu.Lock()
			c.cert = &cert
			c.mu.Unlock()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cert == nil {
		if err == nil {
			err = errors.New("origin client certificate: not loaded")
		}
		return nil, err
	}
	if c.cert.Leaf == nil && len(c.cert.Certificate) > 0 {
		c.cert.Leaf, _ = x509.ParseCertificate(c.cert.Certificate[0])
	}
	return c.cert, nil
}

// TLSConfig returns a client configuration presenting the current
// certificate (if any) and trusting roots (nil: the system pool).
func TLSConfig(cert *ClientCert, roots *x509.CertPool) *tls.Config {
	tc := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if cert != nil {
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return cert.Certificate()
		}
	}
	return tc
}
