package server

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/hepcache/hepcache/disk"
	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/security"
	"github.com/hepcache/hepcache/internal/upstream"
)

// Check is the one validation of a configuration: `hepcache check` runs
// it (as the service user: cmd/hepcache), New runs it before anything is
// built or bound, and a reload runs it before applying anything, so that
// the three never disagree. It returns every problem that stops a start
// (joined, each with its key or path and its fix) and the warnings a
// start logs (New and a reload: each prefixes the problems with what
// refused them). It opens no listener, takes no lock, sends nothing and
// creates nothing.
//
// The checks, in order: the keys and values (config.Validate); the
// [security] section as loaded (certificates, keys, CAs, issuers, rules
// and their principals); the S3 credentials (key files, the shared
// credentials file); the origin credentials, origins and fallbacks
// (schemes, hosts); the namespace rules and name mapping; negative
// caching; the cache's space rules; and the machine: the cache directory,
// the data disks and the log files writable by this process (the files a
// root run left included), every data disk taken into service (`hepcache
// disk init`; one recorded but not mounted is a warning: the node starts
// without it), data disks sharing a file system, a capacity larger than
// the disks. A new check goes into checks below, once.
func Check(cfg *config.Config) (warnings []string, err error) {
	var errs []error
	// What the configuration says that will be ignored (parts of origin
	// URLs).
	for _, w := range cfg.Warnings() {
		warnings = append(warnings, "configuration: "+w)
	}
	checks := []func(*config.Config) ([]string, []error){
		checkSecurity,
		checkOrigins,
		checkMachine,
		checkRules, // last: builds on the values Validate checks
	}
	if err := cfg.Validate(); err != nil {
		// Values are wrong: the space and namespace rules built from
		// them would only repeat it; the rest is checked all the same
		// (every problem at once).
		errs = append(errs, err)
		checks = checks[:len(checks)-1]
	}
	for _, ch := range checks {
		w, e := ch(cfg)
		warnings = append(warnings, w...)
		errs = append(errs, e...)
	}
	return warnings, errors.Join(errs...)
}

// quiet is the logger of the parts Check builds and drops.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func checkSecurity(cfg *config.Config) ([]string, []error) {
	sec, err := security.New(security.FromConfig(&cfg.Security, quiet))
	if err != nil {
		return nil, []error{err}
	}
	sec.Close()
	return nil, nil
}

func checkOrigins(cfg *config.Config) ([]string, []error) {
	var errs []error
	s3creds, err := s3Credentials(cfg, os.Getenv)
	if err != nil {
		errs = append(errs, err)
	}
	if ocred, err := security.NewOriginCredentials(&cfg.Security); err != nil {
		errs = append(errs, err)
	} else if dial, err := federationDialers(cfg, dialers(cfg, quiet, ocred, s3creds), quiet); err != nil {
		errs = append(errs, err)
	} else if ups, err := upstream.New(upstream.Config{Default: cfg.Origin.Default, ForwardAllow: cfg.Origin.ForwardAllow,
		Trusted: mapOrigins(cfg), Dial: dial}); err != nil {
		errs = append(errs, fmt.Errorf("origins: %w", err))
	} else {
		ups.Close() // nothing was dialled
	}
	return nil, errs
}

func checkRules(cfg *config.Config) ([]string, []error) {
	var errs []error
	if _, err := buildPolicy(cfg); err != nil {
		errs = append(errs, err)
	}
	if _, err := notFoundResolver(cfg, nil); err != nil {
		errs = append(errs, err)
	}
	if _, err := cfg.CacheConfig(); err != nil {
		errs = append(errs, err)
	}
	return nil, errs
}

// checkMachine checks what only the machine can tell, as this process:
// the directories serve writes into, the data disks, their file systems.
func checkMachine(cfg *config.Config) (warnings []string, errs []error) {
	roots := ownedDirs(cfg)
	// The cache directory and what serve writes first in it.
	// (A lock file left by root is no problem: it is replaced.)
	if err := writableDir(cfg.Cache.Dir, roots, "meta", "data"); err != nil {
		errs = append(errs, fmt.Errorf("cache.dir %q: %w", cfg.Cache.Dir, err))
	}
	// Directories another user could swap (disk.OpenTrusted), as serve
	// refuses them; one not made yet is made by serve the same way.
	for _, kd := range []struct {
		key  string
		dirs []string
	}{{"cache.dir", []string{cfg.Cache.Dir}}, {"cache.data_dirs", cfg.Cache.DataDirs}} {
		key := kd.key
		for _, d := range kd.dirs {
			if f, _, err := disk.OpenTrusted(d, disk.Self(), -1, false); err == nil {
				f.Close()
			} else if errors.Is(err, disk.ErrUntrusted) { // other errors: writableDir's
				errs = append(errs, fmt.Errorf("%s %q: %w", key, d, err))
			}
		}
	}
	if len(cfg.Cache.DataDirs) > 0 {
		absent, err := cache.CheckDataDirs(cfg.Cache.Dir, cfg.Cache.DataDirs)
		if err != nil {
			errs = append(errs, err)
		}
		for _, d := range cfg.Cache.DataDirs {
			if why, out := absent[d]; out {
				warnings = append(warnings, fmt.Sprintf("data dir %s will be out of service until it is mounted: %s", d, why))
			} else if _, err := os.Stat(d); err == nil {
				if err := writableDir(d, roots, ".hepcache-disk", "data"); err != nil {
					errs = append(errs, fmt.Errorf("cache.data_dirs %q: %w", d, err))
				}
			}
		}
	}
	for key, f := range map[string]string{"log.file": cfg.Log.File, "log.access_log": cfg.Log.AccessLog} {
		if f == "" || f == "-" {
			continue
		}
		if err := writableFile(f, roots); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", key, f, err))
		}
	}
	p, w := cfg.HostChecks()
	return append(warnings, w...), append(errs, p...)
}

// ownedDirs are the directories serve writes into: the cache's, the data
// disks' and those of the log files. A permission error names the
// narrowest fix within them (config.ExplainPermission).
func ownedDirs(cfg *config.Config) []string {
	var dirs []string
	for _, d := range append([]string{cfg.Cache.Dir}, cfg.Cache.DataDirs...) {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	for _, f := range []string{cfg.Log.AccessLog, cfg.Log.File} {
		if f != "" && f != "-" {
			dirs = append(dirs, filepath.Dir(f))
		}
	}
	return dirs
}

// OwnedDirs are the directories serve writes into (ownedDirs).
func OwnedDirs(cfg *config.Config) []string { return ownedDirs(cfg) }

// writableDir checks that this process can create dir (if it does not
// exist yet) and write into it, and write its entries named in names that
// exist: a permission problem comes with its fix (ExplainPermission).
func writableDir(dir string, roots []string, names ...string) error {
	at, err := existing(dir)
	if err != nil {
		return config.ExplainPermission(err, roots...)
	}
	if at != dir {
		// Created by serve: the directory above must let it.
		if err := access(at, unix.W_OK|unix.X_OK); err != nil {
			return config.ExplainPermission(&fs.PathError{Op: "mkdir", Path: dir, Err: err}, roots...)
		}
		return nil
	}
	if err := access(dir, unix.W_OK|unix.X_OK); err != nil {
		return config.ExplainPermission(&fs.PathError{Op: "create", Path: filepath.Join(dir, "lock"), Err: err}, roots...)
	}
	for _, n := range names {
		p := filepath.Join(dir, n)
		st, err := os.Lstat(p)
		if err != nil {
			continue
		}
		mode := uint32(unix.W_OK)
		if st.IsDir() {
			mode |= unix.X_OK
		}
		if err := access(p, mode); err != nil {
			return config.ExplainPermission(&fs.PathError{Op: "open", Path: p, Err: err}, roots...)
		}
	}
	return nil
}

// writableFile checks that this process can append to f, or create it.
func writableFile(f string, roots []string) error {
	if _, err := os.Stat(f); err == nil {
		if err := access(f, unix.W_OK); err != nil {
			return config.ExplainPermission(&fs.PathError{Op: "open", Path: f, Err: err}, roots...)
		}
		return nil
	}
	return writableDir(filepath.Dir(f), roots, filepath.Base(f))
}

// existing returns dir, or its nearest ancestor that exists when dir does
// not exist yet; an error other than "does not exist" (a directory on
// the way this process may not cross) is returned.
func existing(dir string) (string, error) {
	at := filepath.Clean(dir)
	for {
		_, err := os.Stat(at)
		if err == nil {
			return at, nil
		}
		if !errors.Is(err, fs.ErrNotExist) || at == filepath.Dir(at) {
			return "", err
		}
		at = filepath.Dir(at)
	}
}

// access checks this process's (effective) permissions on p.
func access(p string, mode uint32) error {
	return unix.Faccessat(unix.AT_FDCWD, p, mode, unix.AT_EACCESS)
}
