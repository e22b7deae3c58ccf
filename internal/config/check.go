package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/hepcache/hepcache/internal/units"
	"golang.org/x/sys/unix"
)

// Normalize rewrites what has an obvious meaning into the canonical form:
// an origin given as host:port (XCache's pss.origin) is root://host:port.
// Call it after the file and the flags were read, before Validate.
func (c *Config) Normalize() {
	c.Origin.Default = rootURL(c.Origin.Default)
	for i, f := range c.Origin.Fallback {
		c.Origin.Fallback[i] = rootURL(f)
	}
	for i := range c.Map {
		c.Map[i].Origin = rootURL(c.Map[i].Origin)
	}
	for i := range c.Namespace {
		c.Namespace[i].Origin = rootURL(c.Namespace[i].Origin)
	}
}

// rootURL turns "host:port" into "root://host:port"; anything else is
// returned as it is.
func rootURL(o string) string {
	if o == "" || strings.Contains(o, "://") {
		return o
	}
	if h, p, err := net.SplitHostPort(o); err == nil && h != "" && p != "" && !strings.ContainsAny(o, "/?#") {
		return "root://" + o
	}
	return o
}

// HostChecks are the checks of the configuration against the machine
// that need no server part: data directories sharing a file system (whose
// space would count twice) are problems; a capacity larger than the file
// systems that would hold it is a warning (serve starts with it, and the
// file systems may be short of a disk out of service), each with its key
// and its fix. Server.Check runs them with every other check.
func (c *Config) HostChecks() (problems []error, warnings []string) {
	dirs := c.Cache.DataDirs
	if len(dirs) == 0 && c.Cache.Dir != "" {
		dirs = []string{c.Cache.Dir}
	}
	seen := map[uint64]string{}
	var total int64
	for _, d := range dirs {
		at, dev, size, err := fsOf(d)
		if err != nil {
			// Not there (a data disk not mounted, a directory this user
			// cannot reach): Server.Check says why.
			continue
		}
		if other, dup := seen[dev]; dup {
			problems = append(problems, fmt.Errorf("cache.data_dirs: %s and %s are on one file system (that of %s): each data directory must be a disk of its own, else its space counts twice; list one directory per disk", other, d, at))
			continue
		}
		seen[dev] = d
		total += size
	}
	if cp := int64(c.Space.Capacity); cp > 0 && total > 0 && cp > total && len(problems) == 0 {
		where := "the file system holding " + dirs[0]
		if len(dirs) > 1 {
			where = "the file systems of cache.data_dirs together"
		}
		warnings = append(warnings, fmt.Sprintf("space.capacity = %v: more than %s (%s, %d bytes): purges keep each file system below its watermarks, but the capacity is never reached; set at most \"%dG\", or \"0\" for the whole file system", c.Space.Capacity, where, units.Format(total), total, total>>30))
	}
	return problems, warnings
}

// fsOf measures the file system that holds (or will hold) dir: that of
// its nearest existing ancestor.
func fsOf(dir string) (at string, dev uint64, size int64, err error) {
	at = filepath.Clean(dir)
	for {
		var st syscall.Stat_t
		err = syscall.Stat(at, &st)
		if err == nil {
			var sfs syscall.Statfs_t
			if err := syscall.Statfs(at, &sfs); err != nil {
				return at, 0, 0, &fs.PathError{Op: "statfs", Path: at, Err: err}
			}
			return at, uint64(st.Dev), int64(sfs.Blocks) * sfs.Bsize, nil
		}
		if !errors.Is(err, syscall.ENOENT) || at == filepath.Dir(at) {
			return at, 0, 0, &fs.PathError{Op: "stat", Path: at, Err: err}
		}
		at = filepath.Dir(at)
	}
}

// ExplainPermission explains a permission error on a file: which path
// refuses this process, who owns it, who this process is, and the
// narrowest fix: the chown of the directory of roots (the cache's own
// trees) that holds the refusing path; for a root not created yet, its
// creation with this process's owner (install -d), never a chown of the
// directory above it; for a directory above that only has to be crossed,
// search permission for this user alone (an ACL); else the chown of the
// file itself. Other errors come back unchanged.
//
// A read-only file system (EROFS) is explained too: under systemd (the
// packaged unit's ProtectSystem=strict makes everything but its
// ReadWritePaths read-only) with the drop-in that adds the directory.
func ExplainPermission(err error, roots ...string) error {
	var pe *fs.PathError
	var done *explainedError
	if !errors.As(err, &pe) || errors.As(err, &done) {
		return err
	}
	if errors.Is(err, syscall.EROFS) {
		return explainReadOnly(err, pe.Path, roots)
	}
	if !errors.Is(err, fs.ErrPermission) {
		return err
	}
	me, grp := UserName(os.Geteuid()), GroupName(os.Getegid())
	p, _ := filepath.Abs(pe.Path)
	// at is the deepest part of p that exists; block the path that refuses
	// this process: a directory above at it may not cross, else at.
	at := p
	var st syscall.Stat_t
	for syscall.Stat(at, &st) != nil && at != filepath.Dir(at) {
		at = filepath.Dir(at)
	}
	// block is the first directory on the way this process may not cross
	// (at too, when something below it is wanted), else at itself.
	way := ancestors(at)
	if at != p {
		way = append(way, at)
	}
	block, cross := at, false
	for _, a := range way {
		if unix.Faccessat(unix.AT_FDCWD, a, unix.X_OK, unix.AT_EACCESS) != nil {
			block, cross = a, true
			break
		}
	}
	syscall.Stat(block, &st)
	rootOf := func(q string) string {
		for _, r := range roots {
			if r, _ = filepath.Abs(r); r != "/" && (q == r || strings.HasPrefix(q, r+"/")) {
				return r
			}
		}
		return ""
	}
	create := func(r string) string {
		return fmt.Sprintf("install -d -o %s -g %s %s", me, grp, r)
	}
	var fix string
	r, want := rootOf(block), rootOf(p)
	switch {
	case r != "":
		fix = fmt.Sprintf("give it back to %s with chown -R %s:%s %s", me, me, grp, r)
	case cross && want != "":
		fix = fmt.Sprintf("give %s its own directory with %s and let it cross %s with setfacl -m u:%s:x %s (or chmod o+x %s)%s; nothing else needs another owner",
			me, create(want), block, me, block, block, aclPackage())
	case cross:
		fix = fmt.Sprintf("let %s cross it with setfacl -m u:%s:x %s (or chmod o+x %s)%s", me, me, block, block, aclPackage())
	case at != p && want != "":
		fix = fmt.Sprintf("give %s its own directory with %s; nothing above it needs another owner", me, create(want))
	case at != p:
		fix = fmt.Sprintf("let %s write there with setfacl -m u:%s:rwx %s (or chgrp %s %s and chmod g+rwx %s)%s", me, me, block, grp, block, block, aclPackage())
	default:
		fix = fmt.Sprintf("give it to %s with chown %s:%s %s", me, me, grp, block)
	}
	why := ""
	if st.Uid == 0 && os.Geteuid() != 0 && r != "" && block != r {
		// Inside the cache's own trees, which hepcache makes: a run as
		// root made it, most likely. The trees' roots and what lies
		// above them are made by hand: no guess.
		why = " (left by a run as root)"
	}
	return &explainedError{fmt.Errorf("%w: %s belongs to %s:%s (mode %v)%s and hepcache runs as %s: %s, or run hepcache as its service user (systemctl start hepcache)",
		err, block, UserName(int(st.Uid)), GroupName(int(st.Gid)), FileMode(st.Mode), why, me, fix)}
}

// aclPackage says where setfacl comes from when it is not installed.
func aclPackage() string {
	if _, err := exec.LookPath("setfacl"); err == nil {
		return ""
	}
	return "; setfacl is in the acl package (apt-get install acl, dnf install acl)"
}

// explainReadOnly explains a write refused on path by a read-only file
// system: under systemd, the unit's sandbox; else the mount.
func explainReadOnly(err error, path string, roots []string) error {
	dir := filepath.Clean(path)
	for _, r := range roots {
		if r = filepath.Clean(r); dir == r || strings.HasPrefix(dir, r+"/") {
			dir = r
			break
		}
	}
	if os.Getenv("INVOCATION_ID") != "" || os.Getenv("NOTIFY_SOCKET") != "" {
		return &explainedError{fmt.Errorf("%w: under systemd, the unit's ProtectSystem=strict leaves only its ReadWritePaths writable (the packaged unit: /var/cache/hepcache and /var/log/hepcache): add %s with a drop-in, `systemctl edit hepcache` and\n  [Service]\n  ReadWritePaths=%s\nthen systemctl restart hepcache", err, dir, dir)}
	}
	return &explainedError{fmt.Errorf("%w: the file system holding %s is mounted read-only (mount -o remount,rw, or choose a directory on a writable one)", err, dir)}
}

// explainedError is a permission error ExplainPermission explained: it is
// not explained twice.
type explainedError struct{ error }

func (e *explainedError) Unwrap() error { return e.error }

// ancestors lists the directories above p, from the root down.
func ancestors(p string) []string {
	var out []string
	for d := filepath.Dir(p); ; d = filepath.Dir(d) {
		out = append(out, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	slices.Reverse(out)
	return out
}

// FileMode is a stat mode as ls shows it ("drwx------" for a directory).
func FileMode(mode uint32) fs.FileMode {
	m := fs.FileMode(mode & 0o777)
	switch mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		m |= fs.ModeDir
	case syscall.S_IFLNK:
		m |= fs.ModeSymlink
	}
	if mode&syscall.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// UserName is uid's login name, or the number when it has none.
func UserName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return u.Username
	}
	return strconv.Itoa(uid)
}

// GroupName is gid's group name, or the number when it has none.
func GroupName(gid int) string {
	if g, err := user.LookupGroupId(strconv.Itoa(gid)); err == nil {
		return g.Name
	}
	return strconv.Itoa(gid)
}

// validateSizes refuses sizes below one block, which can only be slips
// (a fraction written where a size was meant, "90,95" for "0.90,0.95").
func (c *Config) validateSizes(bad func(key string, val any, allowed string)) {
	bs := int64(c.Cache.BlockSize)
	if bs <= 0 {
		return
	}
	if cp := int64(c.Space.Capacity); cp > 0 && cp < bs {
		bad("space.capacity", c.Space.Capacity, fmt.Sprintf("below one block (%v): a size such as \"500G\" (K, M, G, T, P are powers of 1024), or \"0\" for the whole file system", Size(bs)))
	}
	if l, h, err := ParseWatermarks(c.Space.Watermarks); err == nil && h > 1 && l < float64(bs) {
		bad("space.watermarks", fmt.Sprintf("%q", c.Space.Watermarks), fmt.Sprintf("sizes of %d and %d bytes, below one block (%v): fractions are written \"0.90,0.95\", sizes \"450G,475G\"", int64(l), int64(h), Size(bs)))
	}
	for i, q := range c.Quota {
		if q.Size > 0 && int64(q.Size) < bs {
			bad(fmt.Sprintf("quota[%d].size", i+1), q.Size, fmt.Sprintf("below one block (%v): a size such as \"20T\", or share = 0.2 for a fraction", Size(bs)))
		}
	}
}
