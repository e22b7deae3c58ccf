package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/listenfds"
	"github.com/hepcache/hepcache/internal/logfile"
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
	var level slog.LevelVar
	level.UnmarshalText([]byte(cfg.Log.Level))
	var out io.Writer = os.Stderr
	var logFile *logfile.File
	if cfg.Log.File != "" {
		if logFile, err = logfile.Open(cfg.Log.File); err != nil {
			return config.ExplainPermission(err, ownedDirs(cfg)...)
		}
		defer logFile.Close()
		out = logFile
	}
	log := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: &level}))
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
	// Listening sockets handed over: by systemd (hepcache.socket) or by the
	// hepcache this one replaces (hepcache upgrade, SIGUSR2).
	sockets, err := listenfds.Inherit()
	if err != nil {
		log.Warn("sockets handed to this process", "err", err)
	}
	in := &server.Inherit{Sockets: sockets}
	var upgradeFailed func(error)
	if sockets.From == "upgrade" {
		in.Ready, upgradeFailed = upgradeReady(log)
		// The process handing over finishes its requests first.
		in.LockWait = time.Duration(cfg.Server.ShutdownTimeout) + finalHandOverGrace
	}
	s, err := server.NewInherited(cfg, log, in)
	if err != nil {
		err = config.ExplainPermission(err, ownedDirs(cfg)...)
		if upgradeFailed != nil {
			upgradeFailed(err)
		}
		return err
	}
	// systemd (Type=notify): started once every listener is open; stopping
	// as soon as SIGTERM starts the shutdown (reads may take a while), but
	// not after a hand-over: the service goes on in the new process.
	if _, err := sdnotify.Notify(sdnotify.Ready); err != nil {
		log.Warn("sd_notify", "err", err)
	}
	ctx, handedOver := context.WithCancel(ctx)
	defer handedOver()
	var upgraded atomic.Bool
	stopped := make(chan struct{})
	notifyStop := context.AfterFunc(ctx, func() {
		if !upgraded.Load() {
			sdnotify.Notify(sdnotify.Stopping)
		}
		close(stopped)
	})
	defer func() {
		if !notifyStop() { // already sent or being sent: let it finish before exit
			<-stopped
		}
	}()
	// A reload (SIGHUP, or `hepcache reload` through the admin socket)
	// reopens the log files, re-reads the TLS certificate, CAs and vomsdir,
	// and applies what the config file now says (server.Reload).
	var reloadMu sync.Mutex
	reload := func(how string) error {
		reloadMu.Lock()
		defer reloadMu.Unlock()
		sdnotify.Notify(sdnotify.Reloading())
		defer sdnotify.Notify(sdnotify.Ready)
		var errs []error
		if logFile != nil {
			if err := logFile.Reopen(); err != nil {
				errs = append(errs, err)
			}
		}
		next, err := loadServeConfig(args)
		if err != nil {
			// Logs and certificates are still reloaded; the rest stays.
			errs = append(errs, fmt.Errorf("cannot read the configuration, none of it applied: %w", err))
			next = nil
		} else {
			level.UnmarshalText([]byte(next.Log.Level))
		}
		if err := s.Reload(next); err != nil {
			errs = append(errs, err)
		}
		if err := errors.Join(errs...); err != nil {
			log.Error("reload "+how+" failed; keeping what was loaded before", "err", err)
			return err
		}
		log.Info("reloaded " + how)
		return nil
	}
	s.SetReload(func() error { return reload("by hepcache reload") })
	// An upgrade (SIGUSR2, or `hepcache upgrade` through the admin socket)
	// starts the binary now at this one's path with the listening
	// sockets; once it has checked its configuration, this process
	// finishes its requests as on SIGTERM and the new one serves.
	var upgradeMu sync.Mutex
	upgrade := func(how string) (string, error) {
		upgradeMu.Lock()
		defer upgradeMu.Unlock()
		if upgraded.Load() {
			return "", errors.New("already handed over")
		}
		pid, err := handOver(s, args, log)
		if err != nil {
			log.Error("upgrade "+how+" failed; this process goes on serving", "err", err)
			return "", err
		}
		upgraded.Store(true)
		log.Info("upgrade "+how+": handed the listening sockets to the new process; finishing the requests in progress", "pid", pid)
		handedOver()
		return fmt.Sprintf("handed over to pid %d", pid), nil
	}
	s.SetUpgrade(func() (string, error) { return upgrade("by hepcache upgrade") })
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP, syscall.SIGUSR2)
	defer signal.Stop(hup)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case <-done:
				return
			case sig := <-hup:
				if sig == syscall.SIGUSR2 {
					upgrade("on SIGUSR2")
				} else {
					reload("on SIGHUP")
				}
			}
		}
	}()
	return s.Run(ctx)
}

// serveHelp is serve's description in its -h and man page.
const serveHelp = `Serves root:// (and https://, with server.http_listen) clients from a disk
cache in front of origins (root://, https://, file://, s3://): a file is cached
block by block on first read, served from disk afterwards and evicted least
recently used when space runs low. Reads /etc/hepcache/hepcache.toml under
systemd (the packaged unit passes --config); flags override the file. SIGHUP
or 'hepcache reload' reloads what may change while serving; SIGTERM stops
within server.shutdown_timeout. SIGUSR2 or 'hepcache upgrade' hands the listening
sockets to the binary now at this one's path and stops once it took over;
sockets from systemd (hepcache.socket) are used and kept across restarts.`

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
	fs := newFlagSet("serve", serveHelp, "hepcache serve [--config FILE] [flags]")
	fs.String("config", "", "TOML configuration `FILE`; every key with its default: /usr/share/doc/hepcache/hepcache.toml; flags override it")
	fs.Bool("check", false, "check the configuration and exit (hepcache check)")
	cfg.Flags(fs)
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
