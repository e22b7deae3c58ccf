package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/hepcache/hepcache/internal/admin"
	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/config"
)

func runDisk(ctx context.Context, args []string) error {
	fs := newFlagSet("disk", `Takes data directories (cache.data_dirs) into service: writes the marker that
identifies each as this cache's disk (or keeps the one found) and records it
with the device the directory sits on now. The server uses a data directory
only if both still match, so a disk that is not mounted is refused instead of
its bare mount point being filled. Run it once per disk: at the first start, for
a new or replaced disk, or after a disk moved. Files already on a disk are kept.
The server must be stopped. Run as root, what it creates goes to the service
user (--user, or `+serviceUser+` for the packaged config), as serve will write there.`, "hepcache disk init [--user NAME] [--cache-dir DIR | --config FILE (default "+defaultConfigPath+")] DATA-DIR...")
	dir := fs.String("cache-dir", "", "cache directory (or use --config)")
	owner := fs.String("user", "", "as root, give what is created to this `USER`, the one serve runs as (default "+serviceUser+" for "+defaultConfigPath+")")
	cfgPath := fs.String("config", "", "config file to take cache.dir and cache.data_dirs from")
	if len(args) > 0 && args[0] != "init" && args[0] != "-h" && args[0] != "--help" {
		fs.Usage()
		return fmt.Errorf("unknown disk command %q (want init)", args[0])
	}
	if len(args) > 0 && args[0] == "init" {
		args = args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errors.New("disk init needs at least one DATA-DIR")
	}
	if *dir == "" && *cfgPath == "" {
		// The packaged config, as the other admin commands.
		p, err := configPath("")
		if err != nil {
			return err
		}
		*cfgPath = p
	}
	d, err := cacheDirFrom(*dir, *cfgPath)
	if err != nil {
		return err
	}
	var known []string
	if *cfgPath != "" {
		c, err := config.Load(*cfgPath)
		if err != nil {
			return err
		}
		known = c.Cache.DataDirs
	}
	u, err := checkUser(*owner, *cfgPath)
	if err != nil {
		return err
	}
	// What this run creates: given to the service user when root runs it.
	var created []string
	note := func(paths ...string) {
		for _, p := range paths {
			if _, err := os.Lstat(p); err != nil {
				created = append(created, p)
			}
		}
	}
	defer func() {
		if u != nil {
			// The record is replaced (renamed over) at each init.
			chownTo(u, append(created, filepath.Join(d, "disks.json")))
		}
	}()
	// A first disk init may come before the first start: the cache
	// directory is created, as serve would.
	note(missingDirs(d)...)
	note(filepath.Join(d, "lock"))
	if err := os.MkdirAll(d, 0o755); err != nil {
		return fmt.Errorf("cache dir: %w", err)
	}
	unlock, err := admin.Lock(d)
	if err != nil {
		if errors.Is(err, admin.ErrLocked) {
			return fmt.Errorf("%w: stop the server first", err)
		}
		return err
	}
	defer unlock()
	for _, dd := range fs.Args() {
		dd = filepath.Clean(dd)
		if *cfgPath != "" && !slices.Contains(known, dd) {
			return fmt.Errorf("%s is not one of cache.data_dirs in %s (%v)", dd, *cfgPath, known)
		}
		note(missingDirs(dd)...)
		note(filepath.Join(dd, "data"), filepath.Join(dd, ".hepcache-disk"))
		msg, err := cache.InitDataDir(d, dd)
		if err != nil {
			return err
		}
		fmt.Println(msg)
	}
	return nil
}

// missingDirs are dir and those of its parents that do not exist yet.
func missingDirs(dir string) []string {
	var out []string
	for d := filepath.Clean(dir); d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		out = append(out, d)
	}
	return out
}

// chownTo gives paths (that exist now) to u and its group, without
// following links.
func chownTo(u *user.User, paths []string) {
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for _, p := range paths {
		if err := os.Lchown(p, uid, gid); err == nil {
			fmt.Printf("%s: given to %s\n", p, u.Username)
		}
	}
}
