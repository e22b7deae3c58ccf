// Package voms reads the VOMS attribute certificates in a proxy's extension
// 1.3.6.1.4.1.8005.100.100.5 and verifies them against the VOMS servers a
// vomsdir trusts: LSC files naming the server's DN chain (its certificate
// travels in the AC and must chain to the CAs) or the servers' certificates.
// A verified AC yields the VO and its FQANs (groups and roles).
package voms

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hepcache/hepcache/internal/auth/x509proxy"
)

// ErrInvalid marks an attribute certificate that does not verify.
var ErrInvalid = errors.New("voms: invalid attribute certificate")

// Config configures a Verifier.
type Config struct {
	// Dir is the vomsdir, laid out as /etc/grid-security/vomsdir:
	// Dir/<vo>/<host>.lsc lists the DN chain of a trusted VOMS server of
	// <vo> (subject first, then its issuers), Dir/<vo>/*.pem holds trusted
	// VOMS server certificates of <vo>, and Dir/*.pem certificates trusted
	// for any VO. Required.
	Dir string
	// Roots verify the VOMS server certificates that LSC files name. Nil:
	// LSC files cannot be used, only certificates in Dir.
	Roots *x509.CertPool
	// Targets are this service's host names; an AC restricted to targets
	// is accepted only if it names one of them. Default: none (ACs with
	// targets are refused).
	Targets []string
}

// Attributes are the verified VOMS attributes of one VO.
type Attributes struct {
	VO string
	// FQANs as issued, e.g. "/cms/uscms/Role=production/Capability=NULL".
	FQANs []string
	// Server is the VOMS server's DN; Host its host from the AC.
	Server, Host string
	NotAfter     time.Time
}

// FQAN is a fully qualified attribute name split into group and role.
type FQAN struct {
	// Group is the group path, e.g. "/cms/uscms".
	Group string
	// Role is the role, e.g. "production", or "" for Role=NULL.
	Role string
}

// ParseFQAN splits "/cms/uscms/Role=production/Capability=NULL" into
// group "/cms/uscms" and role "production".
func ParseFQAN(s string) (FQAN, error) {
	if !strings.HasPrefix(s, "/") {
		return FQAN{}, fmt.Errorf("FQAN %q does not start with /", s)
	}
	var f FQAN
	var group []string
	for _, part := range strings.Split(s[1:], "/") {
		switch {
		case strings.HasPrefix(part, "Role="):
			if r := part[len("Role="):]; r != "NULL" {
				f.Role = r
			}
		case strings.HasPrefix(part, "Capability="):
		case part == "" || part == "." || part == "..":
			return FQAN{}, fmt.Errorf("FQAN %q has an empty or relative group component", s)
		default:
			if f.Role != "" {
				return FQAN{}, fmt.Errorf("FQAN %q has a group component after the role", s)
			}
			group = append(group, part)
		}
	}
	if len(group) == 0 {
		return FQAN{}, fmt.Errorf("FQAN %q names no group", s)
	}
	f.Group = "/" + strings.Join(group, "/")
	return f, nil
}

// String renders the FQAN in its short form: "/cms/uscms" or
// "/cms/uscms/Role=production".
func (f FQAN) String() string {
	if f.Role == "" {
		return f.Group
	}
	return f.Group + "/Role=" + f.Role
}

// Verifier verifies ACs. Safe for concurrent use; Reload re-reads Dir.
type Verifier struct {
	cfg Config
	now func() time.Time

	// mu protects trust.
	mu    sync.RWMutex
	trust *trustStore
}

// trustStore is what the vomsdir says.
type trustStore struct {
	lsc  map[string][][]string // "vo/host" -> DN chains
	pems map[string][]*x509.Certificate
	any  []*x509.Certificate
}

// New reads cfg.Dir and returns a Verifier.
func New(cfg *Config) (*Verifier, error) {
	return newVerifier(cfg, time.Now)
}

func newVerifier(cfg *Config, now func() time.Time) (*Verifier, error) {
	v := &Verifier{cfg: *cfg, now: now}
	v.cfg.Targets = append([]string(nil), cfg.Targets...)
	if err := v.Reload(); err != nil {
		return nil, err
	}
	return v, nil
}

// Reload re-reads the vomsdir; on error the previous trust stays.
func (v *Verifier) Reload() error {
	ts, err := loadDir(v.cfg.Dir)
	if err != nil {
		return fmt.Errorf("vomsdir %s: %w", v.cfg.Dir, err)
	}
	v.mu.Lock()
	v.trust = ts
	v.mu.Unlock()
	return nil
}

func loadDir(dir string) (*trustStore, error) {
	if dir == "" {
		return nil, errors.New("no vomsdir configured")
	}
	ts := &trustStore{lsc: map[string][][]string{}, pems: map[string][]*x509.Certificate{}}
	top, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, e := range top {
		p := filepath.Join(dir, e.Name())
		if !e.IsDir() {
			if strings.HasSuffix(e.Name(), ".pem") {
				certs, err := readCerts(p)
				if err != nil {
					errs = append(errs, err)
				}
				ts.any = append(ts.any, certs...)
			}
			continue
		}
		vo := e.Name()
		files, err := os.ReadDir(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, f := range files {
			fp := filepath.Join(p, f.Name())
			switch {
			case strings.HasSuffix(f.Name(), ".lsc"):
				chains, err := readLSC(fp)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				host := strings.TrimSuffix(f.Name(), ".lsc")
				ts.lsc[vo+"/"+host] = chains
			case strings.HasSuffix(f.Name(), ".pem"):
				certs, err := readCerts(fp)
				if err != nil {
					errs = append(errs, err)
				}
				ts.pems[vo] = append(ts.pems[vo], certs...)
			}
		}
	}
	return ts, errors.Join(errs...)
}

func readCerts(path string) ([]*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	certs, err := x509proxy.PEMCertificates(b, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return certs, nil
}

// readLSC reads an LSC file: DN lines (subject, issuer, ...), several
// chains separated by lines of dashes.
func readLSC(path string) ([][]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var chains [][]string
	var cur []string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "-"):
			if len(cur) > 0 {
				chains = append(chains, cur)
			}
			cur = nil
		default:
			cur = append(cur, line)
		}
	}
	if len(cur) > 0 {
		chains = append(chains, cur)
	}
	for _, c := range chains {
		if len(c) < 2 {
			return nil, fmt.Errorf("%s: a chain needs the server's DN and its issuer's DN", path)
		}
	}
	if len(chains) == 0 {
		return nil, fmt.Errorf("%s: no DN chain", path)
	}
	return chains, nil
}

// Verify returns the verified VOMS attributes of a verified client chain:
// the ACs in the VOMS extension of the proxy closest to the leaf that has
// one. A chain without ACs yields none and no error; an AC that does not
// verify is an error (a client presenting attributes expects them used).
func (v *Verifier) Verify(ch *x509proxy.Chain) ([]Attributes, error) {
	var ext []byte
	for i := len(ch.Proxies) - 1; i >= 0 && ext == nil; i-- {
		for _, e := range ch.Proxies[i].Extensions {
			if e.Id.Equal(OIDExtension) {
				ext = e.Value
				break
			}
		}
	}
	if ext == nil {
		return nil, nil
	}
	raws, err := ExtractACs(ext)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	var out []Attributes
	for _, raw := range raws {
		a, err := v.VerifyAC(raw, ch.EndEntity)
		if err != nil {
			return nil, err
		}
		out = append(out, *a)
	}
	return out, nil
}

// VerifyAC parses and verifies one AC issued to holder.
func (v *Verifier) VerifyAC(der []byte, holder *x509.Certificate) (*Attributes, error) {
	ac, err := ParseAC(der)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("VOMS AC of VO %s from %s: %s: %w", ac.VO, ac.Host, fmt.Sprintf(format, args...), ErrInvalid)
	}
	now := v.now()
	if now.Before(ac.NotBefore) || now.After(ac.NotAfter) {
		return nil, fail("valid from %s to %s, not now", ac.NotBefore.UTC().Format(time.RFC3339), ac.NotAfter.UTC().Format(time.RFC3339))
	}
	// The holder names the client's certificate by issuer and serial
	// (RFC 3281). The VOMS C++ code's original AC format puts the
	// certificate's subject where the issuer belongs (as voms-proxy-fake
	// without -newformat does): accept both, with the serial.
	hdn, _ := x509proxy.DN(ac.HolderIssuer)
	edn, _ := x509proxy.DN(holder.RawIssuer)
	sdn, _ := x509proxy.DN(holder.RawSubject)
	if hdn == "" || (hdn != edn && hdn != sdn) || ac.HolderSerial.Cmp(holder.SerialNumber) != 0 {
		return nil, fail("issued to certificate %s of %s, not to the client's certificate %s of %s", ac.HolderSerial, hdn, holder.SerialNumber, edn)
	}
	for _, f := range ac.FQANs {
		fq, err := ParseFQAN(f)
		if err != nil {
			return nil, fail("%v", err)
		}
		if fq.Group != "/"+ac.VO && !strings.HasPrefix(fq.Group, "/"+ac.VO+"/") {
			return nil, fail("FQAN %s is outside the VO", f)
		}
	}
	if len(ac.Targets) > 0 && !anyIn(ac.Targets, v.cfg.Targets) {
		return nil, fail("restricted to targets %q, this service is %q", ac.Targets, v.cfg.Targets)
	}
	signer, err := v.signer(ac, now)
	if err != nil {
		return nil, fail("%v", err)
	}
	if err := signer.CheckSignature(ac.sigAlg, ac.RawInfo, ac.signature); err != nil {
		return nil, fail("signature does not verify with the certificate of %s: %v", x509proxy.MustDN(signer.RawSubject), err)
	}
	na := ac.NotAfter
	if signer.NotAfter.Before(na) {
		na = signer.NotAfter
	}
	return &Attributes{VO: ac.VO, FQANs: ac.FQANs, Server: x509proxy.MustDN(signer.RawSubject), Host: ac.Host, NotAfter: na}, nil
}

// signer finds the trusted certificate of the VOMS server that issued ac:
// through an LSC file and the certificates in the AC, or among the
// certificates in the vomsdir.
func (v *Verifier) signer(ac *AC, now time.Time) (*x509.Certificate, error) {
	v.mu.RLock()
	ts := v.trust
	v.mu.RUnlock()
	issuerDN, _ := x509proxy.DN(ac.IssuerName)
	if chains, ok := ts.lsc[ac.VO+"/"+ac.Host]; ok {
		if len(ac.Certs) == 0 {
			return nil, fmt.Errorf("the AC carries no server certificate to check against %s/%s.lsc", ac.VO, ac.Host)
		}
		if v.cfg.Roots == nil {
			return nil, errors.New("no CA certificates configured to verify the VOMS server against its LSC file")
		}
		srv := ac.Certs[0]
		inter := x509.NewCertPool()
		for _, c := range ac.Certs[1:] {
			inter.AddCert(c)
		}
		paths, err := srv.Verify(x509.VerifyOptions{Roots: v.cfg.Roots, Intermediates: inter, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
		if err != nil {
			return nil, fmt.Errorf("VOMS server certificate %s: %w", x509proxy.MustDN(srv.RawSubject), err)
		}
		if x509proxy.MustDN(srv.RawSubject) != issuerDN {
			return nil, fmt.Errorf("AC issuer %s is not the certificate it carries, %s", issuerDN, x509proxy.MustDN(srv.RawSubject))
		}
		for _, path := range paths {
			for _, lsc := range chains {
				if lscMatches(lsc, path) {
					return srv, nil
				}
			}
		}
		return nil, fmt.Errorf("VOMS server %s does not match %s/%s.lsc", issuerDN, ac.VO, ac.Host)
	}
	cands := append(append([]*x509.Certificate(nil), ts.pems[ac.VO]...), ts.any...)
	for _, c := range cands {
		if x509proxy.MustDN(c.RawSubject) != issuerDN && !bytes.Equal(c.RawSubject, ac.IssuerName) {
			continue
		}
		if now.Before(c.NotBefore) || now.After(c.NotAfter) {
			return nil, fmt.Errorf("trusted VOMS server certificate %s is not valid now", issuerDN)
		}
		return c, nil
	}
	return nil, fmt.Errorf("VOMS server %s of VO %s is not trusted (no %s/%s.lsc and no certificate in the vomsdir)", issuerDN, ac.VO, ac.VO, ac.Host)
}

// lscMatches reports whether the LSC chain names the subjects of path
// from the server certificate upwards.
func lscMatches(lsc []string, path []*x509.Certificate) bool {
	if len(lsc) > len(path)+1 {
		return false
	}
	for i, dn := range lsc {
		var got string
		if i < len(path) {
			got = x509proxy.MustDN(path[i].RawSubject)
		} else {
			got = x509proxy.MustDN(path[i-1].RawIssuer)
		}
		if got != dn {
			return false
		}
	}
	return true
}

func anyIn(have, want []string) bool {
	for _, h := range have {
		for _, w := range want {
			if strings.EqualFold(h, w) {
				return true
			}
		}
	}
	return false
}
