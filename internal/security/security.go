// Package security wires authentication and authorization into hepcache's
// front ends: TLS (roots://, https://) with reloadable certificates; bearer
// tokens from the Authorization header or ztn; X.509 client certificates
// and proxies with VOMS attributes; and the namespace rules of package
// authz, applied to every request before the cache sees it.
package security

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hepcache/hepcache/internal/auth/crl"
	"github.com/hepcache/hepcache/internal/auth/gridmap"
	"github.com/hepcache/hepcache/internal/auth/gsi"
	"github.com/hepcache/hepcache/internal/auth/token"
	"github.com/hepcache/hepcache/internal/auth/voms"
	"github.com/hepcache/hepcache/internal/auth/x509proxy"
	"github.com/hepcache/hepcache/internal/authz"
	"github.com/hepcache/hepcache/internal/tlsconf"
)

// Config configures the security layer. Every part is optional; the zero
// Config allows everything, as a cache without security.
type Config struct {
	// TLS is the server certificate for roots:// and https://. Nil: no TLS.
	TLS *tlsconf.Config
	// RequireTLS makes root:// refuse logins on connections that are not
	// TLS. Needs TLS.
	RequireTLS bool
	// Tokens trusts bearer token issuers. Nil: tokens are not accepted.
	Tokens *token.Config
	// AllowTokensWithoutTLS accepts bearer tokens that arrive over
	// unencrypted connections (?authz= on plain root://, plain http://, as
	// behind a proxy that terminates TLS). Default false: such tokens are
	// ignored (the client is anonymous) and a denial says why.
	AllowTokensWithoutTLS bool
	// RequireAuth makes root:// logins authenticate with a token (ztn, on
	// TLS connections) or a proxy (gsi); otherwise clients without one
	// continue anonymously (unix fallback) and the rules decide what they
	// may read. Needs Tokens or GSI.
	RequireAuth bool
	// GSI accepts X.509 proxies over root:// (the gsi protocol), verified
	// as client certificates are. Needs CAPaths and a host certificate.
	GSI bool
	// GSICert is the gsi host certificate (RSA key). Nil: TLS's.
	GSICert *tlsconf.Config
	// CAPaths are files or directories of CA certificates that client
	// certificates must chain to (/etc/grid-security/certificates). Empty:
	// client certificates are not requested.
	CAPaths []string
	// VOMSDir is the vomsdir trusting VOMS servers (needs CAPaths for LSC
	// files). Empty: VOMS attributes are ignored.
	VOMSDir string
	// VOMSTargets are this service's host names, for ACs with targets.
	VOMSTargets []string
	// VOMSRequired refuses certificates without verified VOMS attributes.
	VOMSRequired bool
	// CRL checks client certificates against their CA's revocation list
	// (Mode crl.Ignore: not checked); its Dirs default to CAPaths' dirs.
	CRL crl.Config
	// Rules are the authorization rules. Empty: everything is allowed.
	Rules []authz.Rule
	// GridMap is a grid-mapfile naming certificate subjects (the user:NAME
	// principal), re-read by Reload. Needs CAPaths. Empty: none.
	GridMap string
	// GridMapRequired refuses certificates whose subject GridMap does not
	// name.
	GridMapRequired bool
	// NoHTTPClientCerts: HTTPS does not ask clients for a certificate
	// even with CAPaths (XrdHttp's http.tlsclientauth off).
	NoHTTPClientCerts bool
	// ClockSkew is how long after its expiry a credential that opened a
	// session (token, proxy chain, VOMS attributes) is still honoured:
	// every request re-checks it. Default 60 s (as tokens' clock skew).
	ClockSkew time.Duration
	// Logger receives denials and reloads. Default: slog.Default().
	Logger *slog.Logger
}

// Security is the configured security layer. Safe for concurrent use.
type Security struct {
	cfg Config
	log *slog.Logger
	tls *tlsconf.Server
	// pol is what Apply replaces as a whole (SIGHUP): requests in progress
	// keep the one they started with.
	pol atomic.Pointer[policy]
	// gsi is the gsi server, nil without GSI; gsiCert is its own host
	// certificate when it has one (else it uses tls).
	gsi     *gsi.Server
	gsiCert *tlsconf.Server

	// mu protects the X.509 verifiers and the grid map with its options,
	// replaced by Reload and Apply.
	mu              sync.RWMutex
	x509            *x509proxy.Verifier
	voms            *voms.Verifier
	certs           *subjectCache
	gridmap         gridmap.Map
	gridmapRequired bool
	vomsRequired    bool
}

// policy is the part of the configuration a reload applies: the rules, the
// token issuers (with their verified-token cache), and what names and
// refuses client certificates.
type policy struct {
	authz  *authz.Authorizer
	tokens *token.Verifier // nil: tokens are not accepted
	tokc   *tokenCache

	gridMap         string
	gridMapRequired bool
	vomsRequired    bool
	crl             crl.Config
}

// newPolicy builds the policy of cfg; the caller closes its tokens when it
// is not used.
func newPolicy(cfg *Config) (*policy, error) {
	p := &policy{tokc: newTokenCache(), gridMap: cfg.GridMap, gridMapRequired: cfg.GridMapRequired, vomsRequired: cfg.VOMSRequired, crl: cfg.CRL}
	var errs []error
	if cfg.Tokens != nil {
		var err error
		if p.tokens, err = token.New(cfg.Tokens); err != nil {
			errs = append(errs, err)
		}
	}
	var err error
	if p.authz, err = authz.New(&authz.Config{Rules: cfg.Rules}); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

func (p *policy) close() {
	if p != nil && p.tokens != nil {
		p.tokens.Close()
	}
}

// New builds the security layer from cfg.
func New(cfg *Config) (*Security, error) {
	s := &Security{cfg: *cfg, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	var errs []error
	if cfg.TLS != nil {
		tc := *cfg.TLS
		tc.RequestClientCert = len(cfg.CAPaths) > 0 && !cfg.NoHTTPClientCerts
		var err error
		if s.tls, err = tlsconf.New(&tc); err != nil {
			errs = append(errs, err)
		}
	}
	if cfg.RequireTLS && cfg.TLS == nil {
		errs = append(errs, errors.New("require_tls needs a TLS certificate and key"))
	}
	pol, err := newPolicy(cfg)
	if err != nil {
		errs = append(errs, err)
	} else {
		s.pol.Store(pol)
	}
	if cfg.RequireAuth && cfg.Tokens == nil && !cfg.GSI {
		errs = append(errs, errors.New("require_auth needs token issuers or gsi (the root:// authentications)"))
	}
	if cfg.GSI {
		if err := s.newGSI(); err != nil {
			errs = append(errs, err)
		}
	}
	if cfg.VOMSDir != "" && len(cfg.CAPaths) == 0 {
		errs = append(errs, errors.New("vomsdir needs ca_paths: VOMS attributes come with client certificates"))
	}
	if err := errors.Join(errs...); err != nil {
		pol.close()
		return nil, fmt.Errorf("security: %w", err)
	}
	if err := s.loadX509(pol); err != nil {
		pol.close()
		return nil, fmt.Errorf("security: %w", err)
	}
	return s, nil
}

// Apply makes the rules, token issuers and audiences, grid map, CRL
// settings and voms_required of next the ones new requests are decided
// with (SIGHUP), and re-reads the files Reload reads. Requests in progress
// and open files keep what they were granted (a session's credential is
// still re-checked for expiry). Nothing is applied if any part fails. The
// other settings of next are not looked at: they need a restart.
func (s *Security) Apply(next *Config) error {
	p, err := newPolicy(next)
	if err != nil {
		return fmt.Errorf("security: %w", err)
	}
	if err := s.loadX509(p); err != nil {
		p.close()
		return fmt.Errorf("security: %w", err)
	}
	old := s.pol.Swap(p)
	if (old.tokens == nil) != (p.tokens == nil) {
		s.log.Warn("security: token issuers added or all removed: HTTPS applies it now; whether root:// logins offer ztn changes at the next restart")
	}
	old.close()
	s.log.Info("security: applied rules and issuers", "rules", len(next.Rules), "issuers", issuerCount(next.Tokens), "gridmap", next.GridMap)
	return nil
}

func issuerCount(t *token.Config) int {
	if t == nil {
		return 0
	}
	return len(t.Issuers)
}

// newGSI sets up the gsi server with its host certificate.
func (s *Security) newGSI() error {
	if len(s.cfg.CAPaths) == 0 {
		return errors.New("gsi needs ca_paths to verify proxies")
	}
	src := s.tls
	if s.cfg.GSICert != nil {
		var err error
		if s.gsiCert, err = tlsconf.New(s.cfg.GSICert); err != nil {
			return fmt.Errorf("gsi host certificate: %w", err)
		}
		src = s.gsiCert
	}
	if src == nil {
		return errors.New("gsi needs a host certificate (gsi_cert and gsi_key, or tls_cert and tls_key)")
	}
	if err := gsi.CheckHostCert(src.Certificate()); err != nil {
		return err
	}
	s.gsi = gsi.NewServer(src.Certificate)
	return nil
}

// loadX509 (re)builds the client certificate verifiers with pol's grid
// map and CRL settings.
func (s *Security) loadX509(pol *policy) error {
	if len(s.cfg.CAPaths) == 0 {
		return nil
	}
	pool, n, err := tlsconf.LoadCAs(s.cfg.CAPaths...)
	if err != nil {
		return err
	}
	cc := pol.crl
	if len(cc.Dirs) == 0 {
		for _, p := range s.cfg.CAPaths {
			if st, err := os.Stat(p); err == nil && !st.IsDir() {
				p = filepath.Dir(p)
			}
			cc.Dirs = append(cc.Dirs, p)
		}
	}
	crls, err := crl.New(&cc)
	if err != nil {
		return err
	}
	for _, p := range crls.Problems() {
		s.log.Warn("security: CRL file not read", "problem", p)
	}
	xv, err := x509proxy.New(&x509proxy.Config{Roots: pool, CRL: crls})
	if err != nil {
		return err
	}
	var vv *voms.Verifier
	if s.cfg.VOMSDir != "" {
		if vv, err = voms.New(&voms.Config{Dir: s.cfg.VOMSDir, Roots: pool, Targets: s.cfg.VOMSTargets}); err != nil {
			return err
		}
	}
	var gm gridmap.Map
	if pol.gridMap != "" {
		if gm, err = gridmap.Load(pol.gridMap); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.x509, s.voms, s.certs, s.gridmap = xv, vv, newSubjectCache(), gm
	s.gridmapRequired, s.vomsRequired = pol.gridMapRequired, pol.vomsRequired
	s.mu.Unlock()
	s.log.Info("security: loaded CA certificates", "count", n, "vomsdir", s.cfg.VOMSDir)
	return nil
}

// Reload re-reads the TLS certificate and key, the CA certificates and the
// vomsdir (SIGHUP). What fails to load keeps its previous state; the errors
// are returned joined.
func (s *Security) Reload() error {
	var errs []error
	if s.tls != nil {
		if err := s.tls.Reload(); err != nil {
			errs = append(errs, err)
		} else {
			s.log.Info("security: reloaded TLS certificate", "file", s.cfg.TLS.CertFile, "not_after", s.tls.Certificate().Leaf.NotAfter)
		}
	}
	if s.gsiCert != nil {
		if err := s.gsiCert.Reload(); err != nil {
			errs = append(errs, err)
		} else {
			s.log.Info("security: reloaded gsi host certificate", "file", s.cfg.GSICert.CertFile, "not_after", s.gsiCert.Certificate().Leaf.NotAfter)
		}
	}
	if err := s.loadX509(s.pol.Load()); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// TLSConfig returns the server TLS configuration, or nil without TLS.
func (s *Security) TLSConfig() *tls.Config {
	if s.tls == nil {
		return nil
	}
	return s.tls.TLSConfig()
}

// RequireTLS reports whether root:// logins need TLS.
func (s *Security) RequireTLS() bool { return s.cfg.RequireTLS }

// Close stops background work (token key downloads).
func (s *Security) Close() error {
	s.pol.Load().close()
	return nil
}

// verifyChain verifies a TLS peer's certificates and VOMS attributes,
// with a cache so that a client's many requests cost one verification.
func (s *Security) verifyChain(certs []*x509.Certificate) (*authz.Subject, error) {
	s.mu.RLock()
	xv, vv, cache, gm, gmRequired, vomsRequired := s.x509, s.voms, s.certs, s.gridmap, s.gridmapRequired, s.vomsRequired
	s.mu.RUnlock()
	if xv == nil {
		return nil, errors.New("client certificates are not accepted here (no CA certificates configured)")
	}
	return cache.get(certs, func() (*authz.Subject, error) {
		ch, err := xv.Verify(certs)
		if err != nil {
			return nil, err
		}
		sub := &authz.Subject{Name: ch.Subject, X509: ch}
		if gm != nil {
			var ok bool
			if sub.User, ok = gm[ch.Subject]; !ok && gmRequired {
				return nil, fmt.Errorf("certificate subject %s is not in the grid map (gridmap_required)", ch.Subject)
			}
		}
		if vv != nil {
			attrs, err := vv.Verify(ch)
			if err != nil {
				return nil, err
			}
			sub.VOMS = attrs
		}
		if vomsRequired && len(sub.VOMS) == 0 {
			return nil, fmt.Errorf("certificate %s carries no VOMS attributes and this server requires them (voms_required)", ch.Subject)
		}
		return sub, nil
	})
}
