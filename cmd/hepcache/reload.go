package main

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/hepcache/hepcache/internal/admin"
)

func runReload(ctx context.Context, args []string) error {
	fs := newFlagSet("reload", "Asks the running server through its admin socket to reload as on SIGHUP: it\nreopens the access log and log.file, re-reads the certificates and the\nreloadable keys, and names the keys that need a restart; failures are reported\n(exit status 1). With or without systemd (logrotate's postrotate runs it). No\nserver running: nothing to do, exit status 0.", "hepcache reload [--config FILE | --cache-dir DIR]")
	dir := fs.String("cache-dir", "", "cache directory of the server (or use --config)")
	cfgPath := fs.String("config", "", "config file to take cache.dir from (default "+defaultConfigPath+")")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	d, err := cacheDirFrom(*dir, *cfgPath)
	if err != nil {
		return err
	}
	// Not admin.Lock: run as root (logrotate), it would create a lock
	// file the service user could not open.
	err = admin.Reload(d)
	switch {
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ECONNREFUSED):
		fmt.Printf("no server runs on %s: nothing to reload\n", d)
		return nil
	case err != nil:
		return err
	}
	fmt.Println("reloaded")
	return nil
}
