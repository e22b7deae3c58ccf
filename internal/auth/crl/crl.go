// Package crl checks client certificates against the certificate
// revocation lists of their CAs as XRootD's gsi does (-crl:N): the lists
// are files beside the CA files (name.r0, as fetch-crl writes them), each
// matched to its CA by issuer name and signature, re-read when older than
// a refresh interval.
package crl

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Mode is XrdSecgsi's CRL check level (-crl:N).
type Mode int

const (
	// Ignore checks nothing (-crl:0, "ignore").
	Ignore Mode = 0
	// Try uses a CA's CRL when there is one (-crl:1, "try", XRootD's
	// default): a revoked certificate is refused; a CA without a CRL is
	// trusted; a CRL that does not verify fails its CA.
	Try Mode = 1
	// Use requires every CA to have a CRL (-crl:2, "use").
	Use Mode = 2
	// Require also requires it not to be expired (-crl:3, "require").
	Require Mode = 3
)

// ErrRevoked marks a certificate its CA revoked; ErrNoCRL a CA without the
// CRL the mode requires, or whose CRL does not verify.
var (
	ErrRevoked = errors.New("crl: certificate revoked")
	ErrNoCRL   = errors.New("crl: no valid CRL")
)

// Config configures a Checker.
type Config struct {
	// Mode is the check level. Default Ignore.
	Mode Mode
	// Dirs are the directories holding the CRL files (XrdSecgsi's
	// -crldir; default: the CA directories).
	Dirs []string
	// Ext is the CRL files' extension (-crlext). Default ".r0".
	Ext string
	// Refresh is how old the lists may get before they are read again
	// (-crlrefresh). Default 24h, XRootD's.
	Refresh time.Duration
}

const (
	defaultExt     = ".r0"
	defaultRefresh = 24 * time.Hour
	// maxCRLFile bounds one file: the largest IGTF CRLs are a few MiB.
	maxCRLFile = 64 << 20
)

// Checker checks certificates against the CRLs. Safe for concurrent use.
type Checker struct {
	cfg Config
	now func() time.Time

	// mu protects lists and loaded, replaced as a whole by a reload.
	mu     sync.Mutex
	lists  map[string][]*list // by issuer name
	bad    []string           // files that could not be read
	loaded time.Time
}

// list is one CRL file, version 1 (as openssl ca -gencrl writes without
// CRL extensions) or 2.
type list struct {
	issuer     string // pkix.Name.String() of the issuer
	this, next time.Time
	revoked    map[string]time.Time // serial (decimal) -> revocation time
	// verify checks the list's signature with ca's key.
	verify func(ca *x509.Certificate) error
}

// New reads the CRL files once and returns a Checker.
func New(cfg *Config) (*Checker, error) {
	c := &Checker{cfg: *cfg, now: time.Now}
	if c.cfg.Ext == "" {
		c.cfg.Ext = defaultExt
	}
	if c.cfg.Refresh <= 0 {
		c.cfg.Refresh = defaultRefresh
	}
	if c.cfg.Mode < Ignore || c.cfg.Mode > Require {
		return nil, fmt.Errorf("crl: mode %d: want 0 (ignore), 1 (try), 2 (use) or 3 (require)", c.cfg.Mode)
	}
	if c.cfg.Mode == Ignore {
		return c, nil
	}
	if err := c.reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// reload reads every CRL file of the directories.
func (c *Checker) reload() error {
	lists := map[string][]*list{}
	var bad []string
	for _, dir := range c.cfg.Dirs {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("crl: %w", err)
		}
		for _, e := range ents {
			if e.IsDir() || !strings.HasSuffix(e.Name(), c.cfg.Ext) {
				continue
			}
			p := filepath.Join(dir, e.Name())
			l, err := readCRL(p)
			if err != nil {
				bad = append(bad, fmt.Sprintf("%s: %v", p, err))
				continue
			}
			lists[l.issuer] = append(lists[l.issuer], l)
		}
	}
	c.mu.Lock()
	c.lists, c.bad, c.loaded = lists, bad, c.now()
	c.mu.Unlock()
	return nil
}

// readCRL reads a PEM or DER CRL file.
func readCRL(p string) (*list, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > maxCRLFile {
		return nil, fmt.Errorf("%d bytes, at most %d are read", st.Size(), maxCRLFile)
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil && st.Size() > 0 {
		return nil, err
	}
	if blk, _ := pem.Decode(b); blk != nil {
		b = blk.Bytes
	}
	if rl, err := x509.ParseRevocationList(b); err == nil {
		l := &list{issuer: rl.Issuer.String(), this: rl.ThisUpdate, next: rl.NextUpdate, revoked: map[string]time.Time{}, verify: rl.CheckSignatureFrom}
		for _, r := range rl.RevokedCertificateEntries {
			l.revoked[r.SerialNumber.String()] = r.RevocationTime
		}
		return l, nil
	}
	// crypto/x509's parser takes version 2 only; OpenSSL, and so XRootD,
	// take version 1 too (openssl ca -gencrl without CRL extensions).
	cl, err := x509.ParseDERCRL(b) //nolint:staticcheck // the one parser of version 1
	if err != nil {
		return nil, err
	}
	var n pkix.Name
	n.FillFromRDNSequence(&cl.TBSCertList.Issuer)
	l := &list{issuer: n.String(), this: cl.TBSCertList.ThisUpdate, next: cl.TBSCertList.NextUpdate, revoked: map[string]time.Time{},
		verify: func(ca *x509.Certificate) error { return ca.CheckCRLSignature(cl) }} //nolint:staticcheck
	for _, r := range cl.TBSCertList.RevokedCertificates {
		l.revoked[r.SerialNumber.String()] = r.RevocationTime
	}
	return l, nil
}

// Check checks path, a verified chain (end-entity certificate first, root
// last), as gsi does: the end-entity certificate against the CRL of the CA
// that issued it. It returns an error wrapping ErrRevoked or ErrNoCRL.
func (c *Checker) Check(path []*x509.Certificate) error {
	if c == nil || c.cfg.Mode == Ignore || len(path) < 2 {
		return nil
	}
	c.mu.Lock()
	stale := c.now().Sub(c.loaded) > c.cfg.Refresh
	if stale {
		// One caller reloads; the others meanwhile use the old lists.
		c.loaded = c.now()
	}
	c.mu.Unlock()
	if stale {
		if err := c.reload(); err != nil {
			return fmt.Errorf("%w: %w", ErrNoCRL, err)
		}
	}
	c.mu.Lock()
	cands := c.lists[path[0].Issuer.String()]
	c.mu.Unlock()
	cert, ca := path[0], path[1]
	var valid *list
	for _, l := range cands {
		if err := l.verify(ca); err != nil {
			// A list naming this CA that the CA did not sign fails the
			// CA, as XrdSecgsi's VerifyCRL.
			return fmt.Errorf("the CRL of CA %s does not verify: %w: %w", ca.Subject, err, ErrNoCRL)
		}
		if valid == nil || l.this.After(valid.this) {
			valid = l
		}
	}
	now := c.now()
	switch {
	case valid == nil && c.cfg.Mode >= Use:
		return fmt.Errorf("CA %s has no CRL (a file *%s beside the CA files; fetch-crl writes them) and this server requires one: %w", ca.Subject, c.cfg.Ext, ErrNoCRL)
	case valid == nil:
		return nil
	case c.cfg.Mode >= Require && !valid.next.IsZero() && now.After(valid.next):
		return fmt.Errorf("the CRL of CA %s expired at %s and this server requires a current one: %w", ca.Subject, valid.next.UTC().Format(time.RFC3339), ErrNoCRL)
	}
	if at, ok := valid.revoked[cert.SerialNumber.String()]; ok && !now.Before(at) {
		return fmt.Errorf("serial %s was revoked by its CA at %s: %w", cert.SerialNumber, at.UTC().Format(time.RFC3339), ErrRevoked)
	}
	return nil
}

// Problems lists the CRL files that could not be read at the last load.
func (c *Checker) Problems() []string {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.bad...)
}
