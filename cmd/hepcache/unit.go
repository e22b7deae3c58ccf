package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
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

// unitSandbox reads the [Service] ProtectSystem and ReadWritePaths of the
// first of files that exists and of the drop-ins in dirs (by name; an
// empty ReadWritePaths= resets the list, as systemd does). found is false
// when no unit file exists.
func unitSandbox(files, dirs []string) (protect string, rw []string, found bool) {
	var paths []string
	for _, f := range files {
		if _, err := os.Stat(f); err == nil {
			paths, found = append(paths, f), true
			break
		}
	}
	if !found {
		return "", nil, false
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
			switch strings.TrimSpace(k) {
			case "ProtectSystem":
				protect = strings.TrimSpace(v)
			case "ReadWritePaths":
				if strings.TrimSpace(v) == "" {
					rw = nil
				}
				for _, d := range strings.Fields(v) {
					rw = append(rw, filepath.Clean(strings.TrimLeft(d, "-+")))
				}
			}
		}
		f.Close()
	}
	return protect, rw, true
}

// unitProblems names each of dirs that the unit's sandbox leaves
// read-only, with the drop-in that makes it writable.
func unitProblems(dirs []string, protect string, rw []string) []error {
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
