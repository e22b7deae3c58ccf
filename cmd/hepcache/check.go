package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/hepcache/hepcache/internal/config"
)

// runCheck validates a configuration the way serve would read it, and
// what only the machine can tell (file-system sizes and devices), without
// binding a port or sending a packet.
func runCheck(ctx context.Context, args []string) error {
	for _, a := range args {
		if a == "-h" || a == "--help" || a == "-help" {
			fs := newFlagSet("check", fmt.Sprintf(`Reads the configuration as 'hepcache serve' would (the file, default %s,
then the flags), and reports every problem at once, each with its key and its
fix: values serve refuses, sizes below one block, a capacity larger than the
file system, data directories sharing a file system. Binds no port, sends
nothing; exit status 1 if anything is wrong. Also: hepcache serve --check.`, defaultConfigPath), "hepcache check [--config FILE] [serve's flags]")
			fs.String("config", "", "TOML configuration `FILE` (default "+defaultConfigPath+")")
			config.Default().Flags(fs)
			fs.Usage()
			return flag.ErrHelp
		}
	}
	if !hasConfigFlag(args) {
		if p, err := configPath(""); err == nil {
			args = append([]string{"--config", p}, args...)
		}
	}
	cfg, err := loadServeConfig(args)
	if err != nil {
		return err
	}
	if err := cfg.Check(); err != nil {
		n := len(unjoinErr(err))
		for _, e := range unjoinErr(err) {
			fmt.Fprintf(os.Stderr, "  %v\n", e)
		}
		if n == 1 {
			return errors.New("1 problem in the configuration")
		}
		return fmt.Errorf("%d problems in the configuration", n)
	}
	for _, w := range cfg.Warnings() {
		fmt.Fprintf(os.Stderr, "  warning: %s\n", w)
	}
	origin := fmt.Sprintf("%q", cfg.Origin.Default)
	if cfg.Origin.Default == "" && cfg.Pelican.Enabled() {
		origin = "through the director of the Pelican federation " + cfg.Pelican.Federation + cfg.Pelican.DirectorURL
	}
	fmt.Printf("configuration OK: cache %s, origin %s, root:// on %s\n", cfg.Cache.Dir, origin, cfg.Server.Listen)
	return nil
}

// hasConfigFlag reports whether args name a config file.
func hasConfigFlag(args []string) bool {
	for _, a := range args {
		switch {
		case a == "--config", a == "-config":
			return true
		case strings.HasPrefix(a, "--config=") || strings.HasPrefix(a, "-config="):
			return true
		}
	}
	return false
}

func unjoinErr(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
