package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"syscall"

	"github.com/hepcache/hepcache/internal/admin"
)

func runReload(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("reload", flag.ContinueOnError)
	dir := fs.String("cache-dir", "", "cache directory of the server (or use --config)")
	cfgPath := fs.String("config", "", "config file to take cache.dir from (default "+defaultConfigPath+")")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "hepcache reload: make the running server reload, as on SIGHUP, with or without systemd (logrotate's postrotate)\n\n")
		fmt.Fprintf(fs.Output(), "usage: hepcache reload [--config FILE | --cache-dir DIR]\n\n")
		fmt.Fprintf(fs.Output(), "Reopens the access log and log.file, re-reads certificates and the reloadable keys; asks the server\nthrough its admin socket and reports what failed. No server running: nothing to do, exit status 0.\n\nflags:\n")
		fs.PrintDefaults()
	}
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
