package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/hepcache/hepcache/disk"
	"github.com/hepcache/hepcache/internal/admin"
	"github.com/hepcache/hepcache/internal/asuser"
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
user (--user, or `+serviceUser+` for the packaged config), as serve will write there.
A data directory on the file system of the cache directory or of / is refused
(the empty mount point of a disk not mounted is there) unless --same-filesystem.`, "hepcache disk init [--user NAME] [--same-filesystem] [--cache-dir DIR | --config FILE (default "+defaultConfigPath+")] DATA-DIR...")
	dir := fs.String("cache-dir", "", "cache directory (or use --config)")
	owner := fs.String("user", "", "as root, give what is created to this `USER`, the one serve runs as (default "+serviceUser+" for "+defaultConfigPath+")")
	cfgPath := fs.String("config", "", "config file to take cache.dir and cache.data_dirs from")
	sameFS := fs.Bool("same-filesystem", false, "take a data directory on the file system of the cache directory or of / (a test; not a disk of its own)")
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
	if !*sameFS {
		// Before anything is made: a bare mount point is refused.
		for _, dd := range fs.Args() {
			if err := cache.CheckOwnDisk(d, filepath.Clean(dd)); err != nil {
				return err
			}
		}
	}
	if u != nil {
		// Root for the service user: the directories are made here, by
		// descriptor and given to u as they are made; the rest runs as u,
		// so that everything else it creates is u's from the start.
		return diskInitAs(u, d, *cfgPath, known, fs.Args(), *sameFS)
	}
	if _, err := trustedDir(d, -1); err != nil {
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
		msg, err := cache.InitDataDir(d, dd)
		if err != nil {
			return err
		}
		fmt.Println(msg)
	}
	return nil
}

// diskInitAs takes the data directories dataDirs into service for the
// cache of u at cacheDir: it makes the directories as root (each resolved
// by descriptor, disk.OpenTrusted, and given to u when made or when it is
// root's), then runs disk init again as u (asuser) for the rest.
func diskInitAs(u *user.User, cacheDir, cfgPath string, known, dataDirs []string, sameFS bool) error {
	cred, err := asuser.Creds(u)
	if err != nil {
		return err
	}
	for _, dd := range dataDirs {
		dd = filepath.Clean(dd)
		if cfgPath != "" && !slices.Contains(known, dd) {
			return fmt.Errorf("%s is not one of cache.data_dirs in %s (%v)", dd, cfgPath, known)
		}
	}
	for _, dir := range append([]string{cacheDir}, dataDirs...) {
		given, err := trustedDir(dir, int(cred.Uid))
		if err != nil {
			return err
		}
		for _, p := range given {
			fmt.Printf("%s: given to %s\n", p, u.Username)
		}
	}
	args := []string{"disk", "init"}
	if sameFS {
		args = append(args, "--same-filesystem")
	}
	if cfgPath != "" {
		args = append(args, "--config", cfgPath)
	} else {
		args = append(args, "--cache-dir", cacheDir)
	}
	return runAs(u, nil, append(args, dataDirs...)...)
}

// trustedDir makes dir and its missing parents for the cache of uid (-1:
// this process's user), resolved by descriptor (disk.OpenTrusted); as
// root, dir itself is given to uid when it is root's. It returns what it
// gave away.
func trustedDir(dir string, uid int) ([]string, error) {
	if filepath.Clean(dir) == "/" {
		return nil, errors.New("/ cannot be a cache or data directory")
	}
	me := uid
	if uid < 0 {
		me = disk.Self()
	}
	missing := missingDirs(dir)
	f, _, err := disk.OpenTrusted(dir, me, -1, true)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, err
	}
	given := missing
	if os.Geteuid() == 0 && uid > 0 && st.Uid == 0 {
		// Named as this cache's directory: the service's.
		if err := unix.Fchownat(int(f.Fd()), "", uid, -1, unix.AT_EMPTY_PATH); err != nil {
			return nil, fmt.Errorf("chown %s: %w", dir, err)
		}
		if !slices.Contains(given, filepath.Clean(dir)) {
			given = append(given, filepath.Clean(dir))
		}
	}
	return given, nil
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
