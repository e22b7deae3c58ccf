package server

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/security"
	"github.com/hepcache/hepcache/internal/upstream"
)

// Check runs on cfg the validation that New runs before it serves: the
// keys and values (config.Validate), the [security] section as loaded
// (certificates, CAs, issuers, rules and their principals), the origin
// credentials, origins and fallbacks, the namespace rules and name
// mapping, negative caching and the cache's space rules. It opens no
// listener and takes no lock. A SIGHUP reload runs it first, so that a
// configuration the next start would refuse is never reported reloaded.
func Check(cfg *config.Config) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("invalid configuration:\n%w", err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var errs []error
	if sec, err := security.New(security.FromConfig(&cfg.Security, quiet)); err != nil {
		errs = append(errs, err)
	} else {
		sec.Close()
	}
	s3creds, err := s3Credentials(cfg, os.Getenv)
	if err != nil {
		errs = append(errs, err)
	}
	if ocred, err := security.NewOriginCredentials(&cfg.Security); err != nil {
		errs = append(errs, err)
	} else if dial, err := federationDialers(cfg, dialers(cfg, quiet, ocred, s3creds), quiet); err != nil {
		errs = append(errs, err)
	} else if ups, err := upstream.New(upstream.Config{Default: cfg.Origin.Default, ForwardAllow: cfg.Origin.ForwardAllow,
		Trusted: mapOrigins(cfg), Dial: dial}); err != nil {
		errs = append(errs, fmt.Errorf("origins: %w", err))
	} else {
		ups.Close() // nothing was dialled
	}
	if _, err := buildPolicy(cfg); err != nil {
		errs = append(errs, err)
	}
	if _, err := notFoundResolver(cfg, nil); err != nil {
		errs = append(errs, err)
	}
	if _, err := cfg.CacheConfig(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
