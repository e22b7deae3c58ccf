package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hepcache/hepcache/internal/config"
)

// The packaged unit runs serve with ProtectSystem=strict: every directory
// but its ReadWritePaths is read-only to it. `hepcache check` of the
// packaged config reads the unit as systemd would and names the
// directories serve must write that the unit does not let it, with the
// drop-in that does: else the start fails with "read-only file system".

// unitFiles are where systemd looks for hepcache.service, first wins.
var unitFiles = []string{"/etc/systemd/system/hepcache.service", "/run/systemd/system/hepcache.service",
	"/usr/lib/systemd/system/hepcache.service", "/lib/systemd/system/hepcache.service"}

// dropInDirs hold hepcache.service.d/*.conf drop-ins, applied in name order.
var dropInDirs = []string{"/etc/systemd/system/hepcache.service.d", "/run/systemd/system/hepcache.service.d",
	"/usr/lib/systemd/system/hepcache.service.d", "/lib/systemd/system/hepcache.service.d"}

// sandbox is what the unit's [Service] section hides from serve.
type sandbox struct {
	// protect is ProtectSystem=, rw the ReadWritePaths.
	protect string
	rw      []string
	// privateTmp: PrivateTmp= on, serve has a /tmp and /var/tmp of its
	// own. protectHome is ProtectHome=.
	privateTmp  bool
	protectHome string
}

// unitSandbox reads the [Service] ProtectSystem, ReadWritePaths,
// PrivateTmp and ProtectHome of the first of files that exists and of the
// drop-ins in dirs (by name; an empty ReadWritePaths= resets the list, as
// systemd does). found is false when no unit file exists.
func unitSandbox(files, dirs []string) (sb sandbox, found bool) {
	var paths []string
	for _, f := range files {
		if _, err := os.Stat(f); err == nil {
			paths, found = append(paths, f), true
			break
		}
	}
	if !found {
		return sandbox{}, false
	}
	byName := map[string]string{}
	for i := len(dirs) - 1; i >= 0; i-- { // earlier directories override
		ents, _ := os.ReadDir(dirs[i])
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".conf") {
				byName[e.Name()] = filepath.Join(dirs[i], e.Name())
			}
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		paths = append(paths, byName[n])
	}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		section := ""
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if strings.HasPrefix(line, "[") {
				section = line
				continue
			}
			k, v, ok := strings.Cut(line, "=")
			if !ok || section != "[Service]" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
				continue
			}
			switch v = strings.TrimSpace(v); strings.TrimSpace(k) {
			case "ProtectSystem":
				sb.protect = v
			case "ReadWritePaths":
				if v == "" {
					sb.rw = nil
				}
				for _, d := range strings.Fields(v) {
					sb.rw = append(sb.rw, filepath.Clean(strings.TrimLeft(d, "-+")))
				}
			case "PrivateTmp":
				sb.privateTmp = yes(v)
			case "ProtectHome":
				sb.protectHome = v
			}
		}
		f.Close()
	}
	return sb, true
}

// yes reports whether a unit's boolean is on.
func yes(v string) bool {
	switch strings.ToLower(v) {
	case "yes", "true", "1", "on":
		return true
	}
	return false
}

// unitWarnings names each of paths (the files and directories the
// configuration names) that the unit's sandbox puts out of serve's sight:
// under PrivateTmp= a /tmp or /var/tmp of its own, empty at each start,
// and under ProtectHome= no /home, /root or /run/user. check, run outside
// the unit, sees them; the service would not.
func unitWarnings(paths []config.KeyPath, sb sandbox) []string {
	homeHidden := yes(sb.protectHome) || sb.protectHome == "read-only" || sb.protectHome == "tmpfs"
	var out []string
	for _, kp := range paths {
		switch {
		case sb.privateTmp && (config.Under(kp.Path, "/tmp") || config.Under(kp.Path, "/var/tmp")):
			out = append(out, fmt.Sprintf("%s %s: the service would see another /tmp: the packaged unit's PrivateTmp= gives it a /tmp and /var/tmp of its own, empty at each start (a file there is not found, a cache there is lost at each restart); choose a directory outside /tmp",
				kp.Key, kp.Path))
		case homeHidden && (config.Under(kp.Path, "/home") || config.Under(kp.Path, "/root") || config.Under(kp.Path, "/run/user")):
			what := "hides"
			if sb.protectHome == "read-only" {
				what = "makes read-only"
			}
			out = append(out, fmt.Sprintf("%s %s: the packaged unit's ProtectHome=%s %s /home, /root and /run/user from the service; choose a directory outside them",
				kp.Key, kp.Path, sb.protectHome, what))
		}
	}
	return out
}

// unitProblems names each of dirs that the unit's sandbox leaves
// read-only, with the drop-in that makes it writable.
func unitProblems(dirs []string, sb sandbox) []error {
	protect, rw := sb.protect, sb.rw
	var ro []string
	switch protect {
	case "strict":
		ro = []string{"/"}
	case "full":
		ro = []string{"/usr", "/boot", "/efi", "/etc"}
	case "yes", "true", "1", "on":
		ro = []string{"/usr", "/boot", "/efi"}
	default:
		return nil
	}
	under := func(d string, list []string) bool {
		for _, p := range list {
			if d == p || p == "/" || strings.HasPrefix(d, p+"/") {
				return true
			}
		}
		return false
	}
	var errs []error
	for _, d := range dirs {
		d = filepath.Clean(d)
		if under(d, ro) && !under(d, rw) {
			errs = append(errs, fmt.Errorf("%s: the packaged unit (ProtectSystem=%s) lets serve write only its ReadWritePaths (%s): the start would fail with \"read-only file system\"; add it with a drop-in, `systemctl edit hepcache` and\n    [Service]\n    ReadWritePaths=%s",
				d, protect, strings.Join(rw, " "), d))
		}
	}
	return errs
}
