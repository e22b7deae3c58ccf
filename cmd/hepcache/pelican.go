package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"time"

	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/pelican"
	"github.com/hepcache/hepcache/internal/security"
	"github.com/hepcache/hepcache/internal/server"
)

const pelicanHelp = `Membership of a Pelican federation (the OSDF) as a cache: the [pelican]
section (docs/pelican.md). The server registers and advertises by itself;
these verbs do it by hand and say where the cache stands.`

// runPelican dispatches the pelican verbs.
func runPelican(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		writeHelp(nil, "pelican", pelicanHelp+"\n\n"+verbList("pelican"), "hepcache pelican VERB [--config FILE]")
		if len(args) == 0 {
			return errors.New("a verb is needed: register or status")
		}
		return flag.ErrHelp
	}
	if u := pelicanUser(args[1:]); u != nil {
		// Root on the packaged config: the verb runs as the service user
		// (the key it creates is the server's), without root's terminal.
		return runAs(u, nil, append([]string{"pelican"}, args...)...)
	}
	switch args[0] {
	case "register":
		return runPelicanRegister(ctx, args[1:])
	case "status":
		return runPelicanStatus(ctx, args[1:])
	}
	return fmt.Errorf("unknown verb %q: register or status", args[0])
}

// pelicanUser is the user the pelican verbs run as when root runs them
// on the packaged config (checkUser), nil to run as this process.
func pelicanUser(args []string) *user.User {
	p := configFlag(args)
	if p == "" {
		p, _ = configPath("")
	}
	u, err := checkUser("", p)
	if err != nil {
		return nil
	}
	return u
}

// pelicanMember loads the configuration and makes the membership (the
// key is created when absent, as serve would).
func pelicanMember(name, desc string, args []string) (*pelican.Member, error) {
	fs := newFlagSet("pelican "+name, desc, "hepcache pelican "+name+" [--config FILE]")
	cfgPath := fs.String("config", "", "TOML configuration `FILE` (default "+defaultConfigPath+")")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	p, err := configPath(*cfgPath)
	if err != nil {
		return nil, err
	}
	cfg, err := config.Load(p)
	if err != nil {
		return nil, err
	}
	cfg.Normalize()
	if !cfg.Pelican.Enabled() {
		return nil, fmt.Errorf("%s has no [pelican] section with a federation", p)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid configuration:\n%w", err)
	}
	cred, err := security.NewOriginCredentials(&cfg.Security)
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	pc, err := server.PelicanMemberConfig(cfg, cred, log)
	if err != nil {
		return nil, err
	}
	m, err := pelican.New(pc)
	if err != nil {
		return nil, config.ExplainPermission(err, cfg.Cache.Dir)
	}
	return m, nil
}

func runPelicanRegister(ctx context.Context, args []string) error {
	m, err := pelicanMember("register", `Registers the cache with the federation's registry now, as /caches/<site>,
with its key (pelican.key_file, created when absent: run as the service user,
sudo -u hepcache, so that the server can read it), and says whether it may
advertise or waits for a federation administrator's approval. Registering
twice is harmless. Exit status 1 when the registry refuses.`, args)
	if err != nil {
		return err
	}
	defer m.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	state, reason, err := m.Register(ctx)
	if err != nil {
		return err
	}
	st := m.Status()
	fmt.Printf("prefix %s, key %s (kid %s)\n", st.Prefix, m.KeyFile(), st.KeyID)
	switch state {
	case pelican.StateRegistered:
		fmt.Println("registered and approved: the server advertises the cache when it runs")
	case pelican.StatePending:
		fmt.Println("registered; waiting for a federation administrator to approve it: " + reason)
		fmt.Println("the server asks again at every advertisement interval (pelican.advertise_interval) and advertises once approved")
	default:
		return fmt.Errorf("refused: %s", reason)
	}
	return nil
}

func runPelicanStatus(ctx context.Context, args []string) error {
	m, err := pelicanMember("status", `Asks the federation where the cache stands: whether the registry holds its
prefix with its key and approved it, and whether the director lists it, with
the status of its last ad and the result of the director's test. Exit status 1
when the director does not list the cache.`, args)
	if err != nil {
		return err
	}
	defer m.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	r, err := m.Inspect(ctx)
	if err != nil {
		return err
	}
	fmt.Print(r.String())
	if !r.Listed {
		return errors.New("the director does not list the cache")
	}
	return nil
}
