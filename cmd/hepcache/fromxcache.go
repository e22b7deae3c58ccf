package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"

	"github.com/hepcache/hepcache/internal/xcacheconf"
)

func runFromXCache(ctx context.Context, args []string) error {
	fs := newFlagSet("from-xcache", `Translates an XCache (xrootd with XrdPss and XrdPfc) configuration into a
hepcache.toml: set variables, if/else/fi (for the xrootd program, the
instance and the host), continue into further files, and the acc.authdb and
scitokens.cfg it names are read as xrootd reads them. Each key written names
the directive it came from; each directive without an equivalent is a warning
(on standard error and at the top of the file). docs/from-xcache.md lists
every directive. With -o naming an existing hepcache.toml (the packaged one), the
keys the translation does not set are kept from it (metrics_listen, access_log),
unless --replace. A result that carries an authdb or scitokens.cfg not readable by
everyone is written root:`+serviceUser+` 0640 (0600 and the fix named when that
group does not exist). Then: hepcache check --config FILE.`, "hepcache from-xcache [-o FILE [--replace]] [--cache-dir DIR] [--instance NAME] [--host NAME] XCACHE.cfg")
	out := fs.String("o", "", "write the hepcache.toml to this file (default: standard output)")
	cacheDir := fs.String("cache-dir", "", "cache.dir to write (default: <oss.localroot>/.hepcache, on the file system of XCache's files, for adopt-xcache)")
	instance := fs.String("instance", "", "the xrootd instance name (-n) that 'if named' tests (default anon)")
	host := fs.String("host", "", "the host name that 'if HOST' tests (default: this host's)")
	replace := fs.Bool("replace", false, "with -o, do not keep the keys of the existing file the translation does not set")
	wider := fs.Bool("allow-wider", false, "translate even where hepcache cannot keep a restriction of the XCache configuration (each is listed as LESS RESTRICTIVE); without it such a translation fails and writes nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("from-xcache needs one XCache configuration file")
	}
	var base []byte
	if *out != "" && !*replace {
		b, err := os.ReadFile(*out)
		switch {
		case err == nil:
			base = b
		case !errors.Is(err, os.ErrNotExist):
			return fmt.Errorf("-o %s: %w (--replace not to keep its keys)", *out, err)
		}
	}
	res, err := xcacheconf.Translate(fs.Arg(0), xcacheconf.TranslateOptions{
		Options:    xcacheconf.Options{Instance: *instance, Host: *host},
		CacheDir:   *cacheDir,
		AllowWider: *wider,
		Base:       base,
		BaseName:   *out,
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
		err = writeTranslated(*out, res.TOML, res.Private)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%d directives translated, %d warnings\n", res.Mapped, len(res.Warnings))
	return nil
}

// writeTranslated writes the translation to name: 0644, or, when a file it
// came from is not for everyone's eyes, 0640 for the service's group (root
// writes it root:hepcache, so that serve and check --user hepcache read it),
// else 0600 with the fix named.
func writeTranslated(name string, data []byte, private bool) error {
	if !private {
		return writeNew(name, data, 0o644)
	}
	gid := -1
	if g, err := user.LookupGroup(serviceUser); err == nil && os.Geteuid() == 0 {
		gid, _ = strconv.Atoi(g.Gid)
	}
	if gid < 0 {
		if err := writeNew(name, data, 0o600); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "%s is 0600 (it carries a file not readable by everyone); the user serve runs as must read it: chgrp %s %s && chmod 0640 %s\n", name, serviceUser, name, name)
		return nil
	}
	// The group and mode are set on the descriptor before the file gets
	// its name: it is never readable by anyone else in between.
	tmp := name + ".tmp"
	os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chown(0, gid)
	}
	if err == nil {
		err = f.Chmod(0o640)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
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
