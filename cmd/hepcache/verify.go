package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/hepcache/hepcache/internal/admin"
	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/config"
)

func runVerify(ctx context.Context, args []string) error {
	fs := newFlagSet("verify", `Checks every durable block of the cached files (of PATH, or of the whole cache)
against the CRC32C recorded when it was written; reports bad blocks and exits 1
if any. Safe while the server runs (it only reads), except with --repair.`, "hepcache verify [--cache-dir DIR | --config FILE] [--origin URL] [--repair] [PATH...]")
	target := targetFlags(fs, "only this origin's copy; default: every origin's copy of PATH")
	var dataDirs []string
	fs.Func("data-dir", "a data disk's directory, repeatable (default: cache.data_dirs of --config, else the cache directory)", func(v string) error {
		dataDirs = append(dataDirs, v)
		return nil
	})
	repair := fs.Bool("repair", false, "clear the bad blocks from their sidecars so that they are fetched again (needs the server stopped)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	d, o, err := target.resolve()
	if err != nil {
		return err
	}
	if len(dataDirs) == 0 && *target.dir == "" {
		if p, err := configPath(*target.cfgPath); err == nil {
			if c, err := config.Load(p); err == nil {
				dataDirs = c.Cache.DataDirs
			}
		}
	}
	if *repair {
		unlock, err := admin.Lock(d)
		if err != nil {
			return fmt.Errorf("--repair needs the cache directory to itself: %w (a running server checks blocks when it reads them)", err)
		}
		defer unlock()
	}
	paths := fs.Args()
	if len(paths) == 0 {
		paths = []string{""}
	}
	var files, checked, bad, unknown int
	var errs []error
	for _, p := range paths {
		err := cache.VerifyBlocks(d, dataDirs, o, p, *repair, func(r cache.BlockReport) {
			files++
			checked += r.Checked
			unknown += r.Unknown
			bad += len(r.Bad)
			switch {
			case r.Err != nil:
				errs = append(errs, r.Err)
				fmt.Printf("ERROR %s: %v\n", r.Key, r.Err)
			case len(r.Bad) > 0:
				what := "bad blocks"
				if r.Repaired {
					what = "bad blocks (cleared, fetched again at the next read)"
				}
				fmt.Printf("BAD   %s: %d of %d blocks checked, %s %v\n", r.Key, r.Checked, r.Durable, what, r.Bad)
			default:
				fmt.Printf("ok    %s: %d of %d blocks checked\n", r.Key, r.Checked, r.Durable)
			}
		})
		if err != nil {
			return err
		}
	}
	fmt.Printf("%d files, %d blocks checked, %d bad, %d without a recorded CRC\n", files, checked, bad, unknown)
	if bad > 0 {
		errs = append(errs, fmt.Errorf("%d bad blocks", bad))
	}
	return errors.Join(errs...)
}
