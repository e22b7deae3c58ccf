package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/hepcache/hepcache/internal/xcacheconf"
)

func runFromXCache(ctx context.Context, args []string) error {
	fs := newFlagSet("from-xcache", `Translates an XCache (xrootd with XrdPss and XrdPfc) configuration into a
hepcache.toml: set variables, if/else/fi (for the xrootd program, the
instance and the host), continue into further files, and the acc.authdb and
scitokens.cfg it names are read as xrootd reads them. Each key written names
the directive it came from; each directive without an equivalent is a warning
(on standard error and at the top of the file). docs/from-xcache.md lists
every directive. Then: hepcache check --config FILE.`, "hepcache from-xcache [-o FILE] [--cache-dir DIR] [--instance NAME] [--host NAME] XCACHE.cfg")
	out := fs.String("o", "", "write the hepcache.toml to this file (default: standard output)")
	cacheDir := fs.String("cache-dir", "", "cache.dir to write (default: <oss.localroot>/.hepcache, on the file system of XCache's files, for adopt-xcache)")
	instance := fs.String("instance", "", "the xrootd instance name (-n) that 'if named' tests (default anon)")
	host := fs.String("host", "", "the host name that 'if HOST' tests (default: this host's)")
	wider := fs.Bool("allow-wider", false, "translate even where hepcache cannot keep a restriction of the XCache configuration (each is listed as LESS RESTRICTIVE); without it such a translation fails and writes nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("from-xcache needs one XCache configuration file")
	}
	res, err := xcacheconf.Translate(fs.Arg(0), xcacheconf.TranslateOptions{
		Options:    xcacheconf.Options{Instance: *instance, Host: *host},
		CacheDir:   *cacheDir,
		AllowWider: *wider,
	})
	if err != nil {
		return err
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(os.Stderr, "warning: %s\n", w)
	}
	if *out == "" {
		_, err = os.Stdout.Write(res.TOML)
	} else {
		// 0600 when a file it came from is not for everyone's eyes.
		mode := os.FileMode(0o644)
		if res.Private {
			mode = 0o600
		}
		err = writeNew(*out, res.TOML, mode)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%d directives translated, %d warnings\n", res.Mapped, len(res.Warnings))
	return nil
}

// writeNew writes data to name with mode, whatever mode an earlier file
// of that name had (WriteFile keeps it).
func writeNew(name string, data []byte, mode os.FileMode) error {
	tmp := name + ".tmp"
	os.Remove(tmp)
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, name)
}
