package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"
	"strings"

	"github.com/hepcache/hepcache/internal/asuser"
	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/server"
	"github.com/hepcache/hepcache/internal/units"
)

// serviceUser is the packaged unit's User=: `hepcache check` as root on
// the packaged config checks as this user.
const serviceUser = "hepcache"

// checkedAsEnv tells a check started by checkAs whom it runs as.
const checkedAsEnv = "HEPCACHE_CHECKED_AS"

// runCheck validates a configuration the way serve would, with serve's
// own checks (server.Check), as the user serve would run as, without
// binding a port or sending a packet.
func runCheck(ctx context.Context, args []string) error {
	for _, a := range args {
		if a == "-h" || a == "--help" || a == "-help" {
			fs := newFlagSet("check", fmt.Sprintf(`Reads the configuration as 'hepcache serve' would (the file, default %s,
then the flags), and runs every check serve runs before it binds, reporting
every problem at once, each with its key and its fix: values serve refuses,
origins (scheme, host), TLS files, credentials files, rule principals, the
cache directory, data disks and log files writable by the service user, data
disks never taken into service, data directories sharing a file system; and
warnings (a data disk not mounted, a capacity larger than the disks). Run as
root, it checks as the service user: the one given with --user, or %s for
the packaged config. Binds no port, sends nothing, creates nothing; exit
status 1 if anything is wrong. Also: hepcache serve --check.`, defaultConfigPath, serviceUser),
				"hepcache check [--user NAME] [--config FILE] [serve's flags]")
			fs.String("config", "", "TOML configuration `FILE` (default "+defaultConfigPath+")")
			fs.String("user", "", "check as this `USER`, the one serve runs as (needs root; default "+serviceUser+" for "+defaultConfigPath+")")
			config.Default().Flags(fs)
			fs.Usage()
			return flag.ErrHelp
		}
	}
	name, args, err := cutFlag(args, "user")
	if err != nil {
		return err
	}
	if !hasConfigFlag(args) {
		if p, err := configPath(""); err == nil {
			args = append([]string{"--config", p}, args...)
		}
	}
	if u, err := checkUser(name, configFlag(args)); err != nil {
		return err
	} else if u != nil {
		return checkAs(u, args)
	}
	cfg, err := loadServeConfig(args)
	if err != nil {
		return err
	}
	warns, err := server.Check(cfg)
	if configFlag(args) == defaultConfigPath {
		// The packaged config is served by the packaged unit, in its
		// sandbox.
		if sb, ok := unitSandbox(unitFiles, dropInDirs); ok {
			err = errors.Join(append([]error{err}, unitProblems(server.OwnedDirs(cfg), sb)...)...)
			warns = append(warns, unitWarnings(cfg.LocalPaths(), sb)...)
		}
	}
	for _, w := range warns {
		fmt.Fprintf(os.Stderr, "  warning: %s\n", w)
	}
	as := ""
	if u := os.Getenv(checkedAsEnv); u != "" {
		as = " (checked as " + u + ")"
	}
	if err != nil {
		problems := unjoinErr(err)
		printProblems(os.Stderr, problems)
		if len(problems) == 1 {
			return fmt.Errorf("1 problem in the configuration%s", as)
		}
		return fmt.Errorf("%d problems in the configuration%s, numbered above", len(problems), as)
	}
	origin := fmt.Sprintf("%q", cfg.Origin.Default)
	if cfg.Origin.Default == "" && cfg.Pelican.Enabled() {
		origin = "through the director of the Pelican federation " + cfg.Pelican.Federation + cfg.Pelican.DirectorURL
	}
	fmt.Printf("configuration OK%s: cache %s, origin %s, root:// on %s\n", as, cfg.Cache.Dir, origin, cfg.Server.Listen)
	if cc, err := cfg.CacheConfig(); err == nil {
		cc.EnsureDefaults()
		fmt.Printf("ram %s (%s), of which fetch_memory %s\n", units.Format(cc.RAM), cc.RAMFrom, units.Format(cc.FetchMemory))
		if note := cfg.RAMNote(); note != "" {
			fmt.Printf("  note: %s\n", note)
		}
	}
	return nil
}

// printProblems writes each problem numbered, its further lines (a drop-in
// to write, say) indented under it: the count said after them matches
// what one reads.
func printProblems(w io.Writer, problems []error) {
	for i, e := range problems {
		lines := strings.Split(strings.TrimRight(e.Error(), "\n"), "\n")
		num := fmt.Sprintf("%d. ", i+1)
		fmt.Fprintf(w, "  %s%s\n", num, lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(w, "  %s%s\n", strings.Repeat(" ", len(num)), strings.TrimLeft(l, " "))
		}
	}
}

// checkUser is the user to check as, nil for this process: the one named
// (--user), else the packaged service user when root checks the packaged
// config.
func checkUser(name, cfgPath string) (*user.User, error) {
	me := os.Geteuid()
	if name == "" {
		if me != 0 || cfgPath != defaultConfigPath {
			return nil, nil
		}
		u, err := user.Lookup(serviceUser)
		if err != nil {
			return nil, nil // not the package's host: check as root
		}
		return u, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("--user %s: %w", name, err)
	}
	if u.Uid == strconv.Itoa(me) {
		return nil, nil
	}
	if me != 0 {
		return nil, fmt.Errorf("--user %s: checking as another user needs root (run as %s, or with sudo)", name, name)
	}
	return u, nil
}

// checkAs runs this check again as u (its uid, gid and groups), which is
// what serve will be: what u cannot read or write fails the check. The
// child gets no terminal of root's (asuser).
func checkAs(u *user.User, args []string) error {
	return runAs(u, []string{checkedAsEnv + "=" + u.Username}, append([]string{"check"}, args...)...)
}

// runAs runs this binary with args as u, without root's terminal
// (asuser), and exits with its status when it fails: it said why.
func runAs(u *user.User, env []string, args ...string) error {
	code, err := asuser.Run(u, env, os.Stdout, os.Stderr, args...)
	if err != nil {
		return err
	}
	if code != 0 {
		os.Exit(code)
	}
	return nil
}

// cutFlag removes --name VALUE (or --name=VALUE, -name) from args.
func cutFlag(args []string, name string) (string, []string, error) {
	var val string
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--"+name || a == "-"+name:
			if i+1 >= len(args) {
				return "", nil, fmt.Errorf("flag needs an argument: --%s", name)
			}
			val = args[i+1]
			i++
		case strings.HasPrefix(a, "--"+name+"=") || strings.HasPrefix(a, "-"+name+"="):
			_, val, _ = strings.Cut(a, "=")
		default:
			out = append(out, a)
		}
	}
	return val, out, nil
}

// configFlag is the --config value in args, "" if none.
func configFlag(args []string) string {
	v, _, _ := cutFlag(args, "config")
	return v
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

// unjoinErr lists the errors joined in err (errors.Join), depth first.
func unjoinErr(err error) []error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, unjoinErr(e)...)
	}
	return out
}
