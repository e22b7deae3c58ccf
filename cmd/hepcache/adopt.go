package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"strconv"
	"syscall"

	"github.com/hepcache/hepcache/disk"
	"github.com/hepcache/hepcache/internal/admin"
	"github.com/hepcache/hepcache/internal/adopt"
	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/upstream"
)

func runAdoptXCache(ctx context.Context, args []string) error {
	fs := newFlagSet("adopt-xcache", `Takes the files of a warm XCache (XrdPfc) cache, its oss.localroot XCACHE_DIR,
into the hepcache cache without copying data: each data file is hard-linked
into hepcache's data tree and described by a sidecar made from its .cinfo
(blocks present, access records) and, with pfc.cschk cache, the CRC32C of each
block from XCache's page checksums. Then XCache's names of the file are removed
(unless --keep-xcache). Files are adopted for one origin (the default origin).
Stop XCache and hepcache first. Rerunning continues an interrupted adoption.`, "hepcache adopt-xcache [--config FILE | --cache-dir DIR --origin URL] [--space DIR]... [--keep-xcache] XCACHE_DIR")
	cfgPath := fs.String("config", "", "hepcache config file: cache.dir, cache.data_dirs, cache.block_size and origin.default (default "+defaultConfigPath+" when no --cache-dir)")
	dir := fs.String("cache-dir", "", "hepcache cache directory (cache.dir), instead of --config")
	orig := fs.String("origin", "", "origin the files are adopted for, root://host:port (default: origin.default of the config)")
	bs := config.Size(0)
	fs.Var(&bs, "block-size", "hepcache block size (default: cache.block_size of the config, else 1M)")
	var spaces, dataDirs []string
	fs.Func("space", "a further XCache directory its names point into (oss.space data/meta), repeatable", func(v string) error {
		spaces = append(spaces, v)
		return nil
	})
	fs.Func("data-dir", "a hepcache data disk's directory (cache.data_dirs), repeatable", func(v string) error {
		dataDirs = append(dataDirs, v)
		return nil
	})
	xuser := fs.String("xcache-user", "", "XCache's `USER`, whose files are adopted (default: the owner of XCACHE_DIR; name it when XCACHE_DIR was given to root)")
	keep := fs.Bool("keep-xcache", false, "keep XCache's names of the adopted files (XCache can serve again; the space is shared until its tree is removed)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("adopt-xcache needs one XCACHE_DIR (XCache's oss.localroot)")
	}
	cfg := config.Default()
	if *dir == "" || *cfgPath != "" {
		p, err := configPath(*cfgPath)
		if err != nil {
			return err
		}
		if cfg, err = config.Load(p); err != nil {
			return err
		}
	}
	if *dir != "" {
		cfg.Cache.Dir = *dir
	}
	if len(dataDirs) > 0 {
		cfg.Cache.DataDirs = dataDirs
	}
	if *orig != "" {
		cfg.Origin.Default = *orig
	}
	if bs > 0 {
		cfg.Cache.BlockSize = bs
	}
	if cfg.Cache.Dir == "" {
		return errors.New("cache.dir: required (--cache-dir or --config)")
	}
	if cfg.Origin.Default == "" {
		return errors.New("origin.default: required: the origin the XCache files came from (--origin root://host:port)")
	}
	o, err := upstream.Canonical(cfg.Origin.Default)
	if err != nil {
		return fmt.Errorf("origin %q: %w", cfg.Origin.Default, err)
	}
	// cache.dir is resolved once, by descriptor: every directory on the
	// way must be root's or the cache's user's (disk.OpenTrusted), so
	// that XCache's user cannot swap it for a link during adoption.
	treeUID := -1
	if *xuser != "" {
		xu, err := user.Lookup(*xuser)
		if err != nil {
			return fmt.Errorf("--xcache-user: %w", err)
		}
		treeUID, _ = strconv.Atoi(xu.Uid)
	}
	d, uid, err := disk.OpenTrusted(cfg.Cache.Dir, disk.Self(), -1, true)
	if err != nil {
		return fmt.Errorf("cache.dir: %w", err)
	}
	d.Close()
	if os.Geteuid() == 0 && uid > 0 && (treeUID == uid || treeUID < 0 && treeOwner(fs.Arg(0)) == uid) {
		// The service user owns the XCache tree too: adoption then does
		// nothing that user could not do itself, run as that user,
		// without root's terminal.
		return adoptAs(uid, args)
	}
	gid := -1
	if uid <= 0 || os.Geteuid() != 0 {
		uid = -1 // files stay this process's
	} else if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		gid, _ = strconv.Atoi(u.Gid)
	}
	unlock, err := admin.Lock(cfg.Cache.Dir)
	if errors.Is(err, admin.ErrLocked) {
		return fmt.Errorf("%w: stop hepcache first (adopted files enter its index at start-up)", err)
	}
	if err != nil {
		return err
	}
	defer unlock()
	res, err := adopt.Run(adopt.Config{
		XCacheDir: fs.Arg(0), Spaces: spaces, CacheDir: cfg.Cache.Dir, DataDirs: cfg.Cache.DataDirs,
		Origin: o, BlockSize: int64(cfg.Cache.BlockSize), Keep: *keep, UID: uid, GID: gid, TreeOwner: max(treeUID, 0),
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	fmt.Printf("adopted %d complete and %d partial files (%s) for %s into %s; %d adopted before, %d skipped\n",
		res.Complete, res.Partial, config.Size(res.Bytes), o, cfg.Cache.Dir, res.Already, res.Skipped)
	if err != nil {
		return err
	}
	if res.Skipped > 0 {
		return fmt.Errorf("%d files not adopted (each logged above with why)", res.Skipped)
	}
	return nil
}

// treeOwner is the owner of the XCache directory, -1 if it cannot be
// told.
func treeOwner(xcacheDir string) int {
	var st syscall.Stat_t
	if syscall.Stat(xcacheDir, &st) != nil {
		return -1
	}
	return int(st.Uid)
}

// adoptAs runs this adoption again as the user uid (asuser: a session of
// its own, no terminal of root's) and exits with its status.
func adoptAs(uid int, args []string) error {
	u, err := user.LookupId(strconv.Itoa(uid))
	if err != nil {
		return fmt.Errorf("the cache's user %d: %w", uid, err)
	}
	return runAs(u, nil, append([]string{"adopt-xcache"}, args...)...)
}
