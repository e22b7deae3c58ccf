package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/hepcache/hepcache/internal/admin"
	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/upstream"
)

func runEvict(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("evict", flag.ContinueOnError)
	dir := fs.String("cache-dir", "", "cache directory (or use --config)")
	cfgPath := fs.String("config", "", "config file to take cache.dir from")
	originURL := fs.String("origin", "", "only this origin's copy; default: every origin's copy of PATH")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: hepcache evict [--cache-dir DIR] [--origin URL] PATH\n\nRemoves a file from the cache; safe while the server runs (it asks the server).\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("evict needs one PATH")
	}
	d, err := cacheDirFrom(*dir, *cfgPath)
	if err != nil {
		return err
	}
	o := *originURL
	if o != "" {
		if o, err = upstream.Canonical(o); err != nil {
			return err
		}
	}
	infos, err := cache.Inspect(d, o, fs.Arg(0))
	if err != nil {
		return err
	}
	unlock, lerr := admin.Lock(d)
	for _, in := range infos {
		switch {
		case lerr == nil:
			err = cache.EvictOffline(d, in.Origin, in.Path)
		case errors.Is(lerr, admin.ErrLocked):
			_, err = admin.Evict(d, in.Origin, in.Path)
		default:
			return lerr
		}
		if err != nil {
			return err
		}
		fmt.Printf("evicted %s%s\n", in.Origin, in.Path)
	}
	if unlock != nil {
		unlock()
	}
	return nil
}
