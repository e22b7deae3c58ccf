package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"strings"
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
			return errors.New("a verb is needed: register, status or downtime")
		}
		return flag.ErrHelp
	}
	if u := pelicanUser(args[1:]); u != nil {
		// Root on the packaged config: the verb runs as the service user
		// (the key it creates is the server's, the downtimes it writes
		// are in the server's state), without root's terminal.
		return runAs(u, nil, append([]string{"pelican"}, args...)...)
	}
	switch args[0] {
	case "register":
		return runPelicanRegister(ctx, args[1:])
	case "status":
		return runPelicanStatus(ctx, args[1:])
	case "downtime":
		return runPelicanDowntime(args[1:])
	}
	return fmt.Errorf("unknown verb %q: register, status or downtime", args[0])
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
		fmt.Println("the server asks the registry again every 10 s and advertises as soon as it is approved")
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

const pelicanDowntimeHelp = `Puts the cache in downtime, or out of it: the server tells the director in
its ads (Pelican's server downtimes), within seconds of a change and again
when a downtime starts and ends, and the director sends no client to a cache
whose downtime is in force (it lists it as filtered) and takes it back after.
The downtimes are kept in <cache.dir>/pelican/downtimes.json; run as the
service user (sudo -u hepcache). Actions:
  list                       the downtimes to come and in force (the default)
  add --description TEXT     a downtime from --start (now) to --end or for --for
                             (neither: until removed)
  remove ID|all              end a downtime (an ID prefix is enough)`

// runPelicanDowntime is hepcache pelican downtime: the action comes
// first, its flags after it.
func runPelicanDowntime(args []string) error {
	action, id := "list", ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		action, args = args[0], args[1:]
	}
	if action == "remove" && len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		id, args = args[0], args[1:]
	}
	fs := newFlagSet("pelican downtime", pelicanDowntimeHelp,
		"hepcache pelican downtime [list] [--config FILE]",
		"hepcache pelican downtime add --description TEXT [--start TIME] [--end TIME | --for DURATION] [--class CLASS] [--severity TEXT] [--config FILE]",
		"hepcache pelican downtime remove ID|all [--config FILE]")
	cfgPath := fs.String("config", "", "TOML configuration `FILE` (default "+defaultConfigPath+")")
	desc := fs.String("description", "", "what the downtime is for, as the federation's administrators will read it")
	start := fs.String("start", "now", "when it starts: now, or an RFC 3339 `TIME`")
	end := fs.String("end", "", "when it ends: an RFC 3339 `TIME` (empty: until removed, or --for)")
	dur := fs.Duration("for", 0, "how long it lasts from its start (instead of --end)")
	class := fs.String("class", pelican.ClassScheduled, "SCHEDULED or UNSCHEDULED")
	severity := fs.String("severity", pelican.SeverityOutage, "Pelican's severity of the downtime")
	if err := fs.Parse(args); err != nil {
		return err
	}
	p, err := configPath(*cfgPath)
	if err != nil {
		return err
	}
	cfg, err := config.Load(p)
	if err != nil {
		return err
	}
	cfg.Normalize()
	if !cfg.Pelican.Enabled() {
		return fmt.Errorf("%s has no [pelican] section with a federation", p)
	}
	dir := cfg.PelicanStateDir()
	now := time.Now()
	switch action {
	case "list":
		if fs.NArg() > 0 {
			return fmt.Errorf("unexpected argument %q", fs.Arg(0))
		}
		ds, err := pelican.Downtimes(dir)
		if err != nil {
			return err
		}
		n := 0
		for _, d := range ds {
			if !d.End.IsZero() && !now.Before(d.End) {
				continue
			}
			n++
			state := "to come"
			if d.Active(now) {
				state = "IN FORCE"
			}
			until := "until removed"
			if !d.End.IsZero() {
				until = "until " + d.End.Format(time.RFC3339)
			}
			fmt.Printf("%s  %s  from %s %s  %s, %s: %s\n", d.ID, state, d.Start.Format(time.RFC3339), until, d.Class, d.Severity, d.Description)
		}
		if n == 0 {
			fmt.Println("no downtime to come or in force")
		}
		return nil
	case "add":
		if fs.NArg() > 0 {
			return fmt.Errorf("unexpected argument %q", fs.Arg(0))
		}
		if strings.TrimSpace(*desc) == "" {
			return errors.New("--description is required: say why, for the federation's administrators")
		}
		d := pelican.Downtime{Class: strings.ToUpper(*class), Severity: *severity, Description: *desc, Start: now}
		if u, err := user.Current(); err == nil {
			d.By = u.Username + "@" + hostName()
		}
		if *start != "now" {
			if d.Start, err = time.Parse(time.RFC3339, *start); err != nil {
				return fmt.Errorf("--start %q: now or an RFC 3339 time (2026-12-01T08:00:00Z)", *start)
			}
		}
		switch {
		case *end != "" && *dur != 0:
			return errors.New("--end or --for, not both")
		case *end != "":
			if d.End, err = time.Parse(time.RFC3339, *end); err != nil {
				return fmt.Errorf("--end %q: an RFC 3339 time (2026-12-01T18:00:00Z)", *end)
			}
		case *dur < 0:
			return fmt.Errorf("--for %v: a positive duration", *dur)
		case *dur > 0:
			d.End = d.Start.Add(*dur)
		}
		d, err := pelican.AddDowntime(dir, d, now)
		if err != nil {
			return err
		}
		until := "until removed (hepcache pelican downtime remove " + d.ID[:8] + ")"
		if !d.End.IsZero() {
			until = "until " + d.End.Format(time.RFC3339)
		}
		fmt.Printf("downtime %s from %s %s\nthe server advertises it within seconds; the director sends no client while it is in force\n", d.ID, d.Start.Format(time.RFC3339), until)
		return nil
	case "remove":
		if id == "" && fs.NArg() == 1 {
			id = fs.Arg(0)
		} else if fs.NArg() > 0 {
			return fmt.Errorf("unexpected argument %q", fs.Arg(0))
		}
		if id == "" {
			return errors.New("remove needs the downtime's ID (or a prefix of it), or all")
		}
		n, err := pelican.RemoveDowntime(dir, id)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("no downtime %q (hepcache pelican downtime list)", id)
		}
		fmt.Printf("%d downtime(s) removed; the server advertises it within seconds\n", n)
		return nil
	}
	return fmt.Errorf("unknown action %q: list, add or remove", action)
}

// hostName is the host's name, "" if unknown.
func hostName() string {
	h, _ := os.Hostname()
	return h
}
