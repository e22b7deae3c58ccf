package security

import (
	"log/slog"
	"time"

	"github.com/hepcache/hepcache/internal/auth/token"
	"github.com/hepcache/hepcache/internal/authz"
	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/tlsconf"
)

// FromConfig translates the [security] section into a Config.
func FromConfig(c *config.SecurityConfig, log *slog.Logger) *Config {
	out := &Config{
		RequireTLS:  c.RequireTLS,
		RequireAuth: c.RequireAuth,
		CAPaths:     c.CAPaths,
		VOMSDir:     c.VOMSDir,
		VOMSTargets: c.VOMSTargets,
		Logger:      log,
	}
	if c.TLSCert != "" {
		out.TLS = &tlsconf.Config{CertFile: c.TLSCert, KeyFile: c.TLSKey}
	}
	if len(c.Issuers) > 0 {
		tc := &token.Config{Audiences: c.Audiences, ClockSkew: time.Duration(c.ClockSkew)}
		for _, is := range c.Issuers {
			tc.Issuers = append(tc.Issuers, token.Issuer{Issuer: is.Issuer, Audiences: is.Audiences,
				JWKSFile: is.JWKSFile, JWKSURL: is.JWKSURL, BasePath: is.BasePath})
		}
		out.Tokens = tc
	}
	for _, r := range c.Rules {
		out.Rules = append(out.Rules, authz.Rule{Path: r.Path, Read: r.Read, Fetch: r.Fetch})
	}
	return out
}
