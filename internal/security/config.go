package security

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/hepcache/hepcache/internal/auth/credential"
	"github.com/hepcache/hepcache/internal/auth/crl"
	"github.com/hepcache/hepcache/internal/auth/gsi"
	"github.com/hepcache/hepcache/internal/auth/token"
	"github.com/hepcache/hepcache/internal/authz"
	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/tlsconf"
)

// crlModes are security.crl's values; "" is XRootD's default, try.
var crlModes = map[string]crl.Mode{"": crl.Try, "ignore": crl.Ignore, "try": crl.Try, "use": crl.Use, "require": crl.Require}

// FromConfig translates the [security] section into a Config.
func FromConfig(c *config.SecurityConfig, log *slog.Logger) *Config {
	out := &Config{
		RequireTLS:  c.RequireTLS,
		RequireAuth: c.RequireAuth,

		AllowTokensWithoutTLS: c.AllowTokensWithoutTLS,
		GSI:                   c.GSI,
		CAPaths:               c.CAPaths,
		VOMSDir:               c.VOMSDir,
		VOMSTargets:           c.VOMSTargets,
		VOMSRequired:          c.VOMSRequired,
		CRL:                   crl.Config{Mode: crlModes[c.CRL], Dirs: c.CRLDirs, Refresh: time.Duration(c.CRLRefresh)},
		ClockSkew:             time.Duration(c.ClockSkew),
		Logger:                log,

		GridMap:           c.GridMap,
		GridMapRequired:   c.GridMapRequired,
		NoHTTPClientCerts: c.HTTPClientAuth == "off",
	}
	if c.TLSCert != "" {
		out.TLS = &tlsconf.Config{CertFile: c.TLSCert, KeyFile: c.TLSKey}
	}
	if c.GSICert != "" {
		out.GSICert = &tlsconf.Config{CertFile: c.GSICert, KeyFile: c.GSIKey}
	}
	if len(c.Issuers) > 0 {
		tc := &token.Config{Audiences: c.Audiences, ClockSkew: time.Duration(c.ClockSkew)}
		for _, is := range c.Issuers {
			tc.Issuers = append(tc.Issuers, token.Issuer{Issuer: is.Issuer, Audiences: is.Audiences,
				JWKSFile: is.JWKSFile, JWKSURL: is.JWKSURL, BasePath: is.BasePath, RestrictedPaths: is.RestrictedPaths,
				IgnoreScopes: is.IgnoreScopes, IgnoreGroups: is.IgnoreGroups})
		}
		out.Tokens = tc
	}
	for _, r := range c.Rules {
		out.Rules = append(out.Rules, authz.Rule{Path: r.Path, Read: r.Read, Fetch: r.Fetch, Deny: r.Deny, Prefix: r.Match == "prefix"})
	}
	return out
}

// OriginCredentials is the cache's own credential towards origins, built
// from the [security] section: pass Authorize and TLS to origin/http, TLS,
// Token and GSI to origin/xrootd. A client's credential is never used.
type OriginCredentials struct {
	// Authorize adds "Authorization: Bearer" with the cache's token; nil
	// without origin_token_file.
	Authorize func(*http.Request) error
	// Token returns the cache's token (ztn); nil without one.
	Token func() (string, error)
	// TLS verifies origins with origin_ca_paths (or the system pool) and
	// presents origin_cert/origin_key when set.
	TLS *tls.Config
	// GSI presents origin_cert/origin_key (a proxy) to root:// origins
	// asking for gsi, verifying them with origin_ca_paths (or the system
	// pool); nil without origin_cert.
	GSI *gsi.ClientConfig
}

// NewOriginCredentials loads the files named in c.
func NewOriginCredentials(c *config.SecurityConfig) (*OriginCredentials, error) {
	oc := &OriginCredentials{}
	var errs []error
	if c.OriginTokenFile != "" {
		tf, err := credential.NewTokenFile(c.OriginTokenFile)
		if err != nil {
			errs = append(errs, err)
		} else {
			oc.Authorize, oc.Token = tf.Authorize, tf.Token
		}
	}
	var cert *credential.ClientCert
	if c.OriginCert != "" {
		var err error
		if cert, err = credential.NewClientCert(c.OriginCert, c.OriginKey); err != nil {
			errs = append(errs, err)
		}
	}
	var pool *x509.CertPool
	if len(c.OriginCAPaths) > 0 {
		var err error
		if pool, _, err = tlsconf.LoadCAs(c.OriginCAPaths...); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("origin credentials: %w", err)
	}
	oc.TLS = credential.TLSConfig(cert, pool)
	if cert != nil {
		oc.GSI = &gsi.ClientConfig{Certificate: cert.Certificate, Roots: pool}
	}
	return oc, nil
}
