package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/sdnotify"
	"github.com/hepcache/hepcache/internal/server"
)

func runServe(ctx context.Context, args []string) error {
	for i, a := range args {
		if a == "--check" || a == "-check" {
			return runCheck(ctx, append(append([]string(nil), args[:i]...), args[i+1:]...))
		}
	}
	cfg, err := loadServeConfig(args)
	if err != nil {
		return err
	}
	var level slog.Level
	level.UnmarshalText([]byte(cfg.Log.Level))
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if os.Getenv("GOGC") == "" {
		// The heap is mostly I/O buffers that are reused, not garbage;
		// collecting at 25 % growth instead of 100 % keeps the resident
		// memory of many cold clients down for little CPU.
		debug.SetGCPercent(25)
	}
	if addr := os.Getenv("HEPCACHE_PPROF"); addr != "" {
		// Profiling for developers: never on by default, loopback only.
		go http.ListenAndServe(addr, nil)
	}
	warnForeignOwner(log, cfg)
	s, err := server.New(cfg, log)
	if err != nil {
		return config.ExplainPermission(err, ownedDirs(cfg)...)
	}
	// systemd (Type=notify): started once every listener is open; stopping
	// as soon as SIGTERM starts the shutdown (reads may take a while).
	if _, err := sdnotify.Notify(sdnotify.Ready); err != nil {
		log.Warn("sd_notify", "err", err)
	}
	stopped := make(chan struct{})
	notifyStop := context.AfterFunc(ctx, func() { sdnotify.Notify(sdnotify.Stopping); close(stopped) })
	defer func() {
		if !notifyStop() { // already sent or being sent: let it finish before exit
			<-stopped
		}
	}()
	// SIGHUP re-reads the TLS certificate, CAs and vomsdir, and the config
	// file's space, quota and limits settings.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case <-done:
				return
			case <-hup:
				sdnotify.Notify(sdnotify.Reloading())
				next, err := loadServeConfig(args)
				if err != nil {
					log.Error("reload on SIGHUP: cannot read the configuration; reloading only certificates", "err", err)
					next = nil
				}
				if err := s.Reload(next); err != nil {
					log.Error("reload on SIGHUP failed; keeping what was loaded before", "err", err)
				} else {
					log.Info("reloaded on SIGHUP")
				}
				sdnotify.Notify(sdnotify.Ready)
			}
		}
	}()
	return s.Run(ctx)
}

// loadServeConfig reads --config (if given) and applies the other flags on
// top, whatever their order on the command line.
func loadServeConfig(args []string) (*config.Config, error) {
	pre := flag.NewFlagSet("serve", flag.ContinueOnError)
	pre.SetOutput(new(discard))
	cfgPath := pre.String("config", "", "")
	config.Default().Flags(pre)
	pre.Parse(args) // errors are reported by the real parse below

	cfg := config.Default()
	if *cfgPath != "" {
		var err error
		if cfg, err = config.Load(*cfgPath); err != nil {
			return nil, err
		}
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.String("config", "", "TOML configuration file (every key: /usr/share/doc/hepcache/hepcache.toml); flags override it")
	fs.Bool("check", false, "check the configuration and exit (hepcache check)")
	cfg.Flags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: hepcache serve [--config FILE] [--origin URL] [--cache-dir DIR] [--listen ADDR] [--forward-allow LIST] ...\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	cfg.Normalize()
	return cfg, nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
