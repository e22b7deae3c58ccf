package main

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"

	"github.com/hepcache/hepcache/internal/admin"
	"github.com/hepcache/hepcache/internal/cache"
)

func runEvict(ctx context.Context, args []string) error {
	fs := newFlagSet("evict", "Removes a file from the cache; safe while the server runs (it asks the server,\nwhich refuses files open by a client). A file the cache does not hold is\nreported as such, exit status 1.", "hepcache evict [--config FILE | --cache-dir DIR] [--origin URL] PATH")
	target := targetFlags(fs, "only this origin's copy; default: every origin's copy of PATH")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("evict needs one PATH")
	}
	d, o, err := target.resolve()
	if err != nil {
		return err
	}
	infos, err := cache.Inspect(d, o, fs.Arg(0))
	if errors.Is(err, iofs.ErrNotExist) {
		return fmt.Errorf("%s is not in the cache %s: nothing to evict", fs.Arg(0), d)
	}
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
