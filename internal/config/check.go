package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/hepcache/hepcache/internal/units"
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

// Check is Validate plus what only the machine can tell, each problem with
// its key and its fix, all at once: a capacity larger than the file
// systems that would hold it, and data directories sharing a file system
// (whose space would count twice). It binds no port and sends nothing.
func (c *Config) Check() error {
	var errs []error
	if err := c.Validate(); err != nil {
		errs = append(errs, unjoin(err)...)
	}
	return errors.Join(append(errs, c.checkHost()...)...)
}

func (c *Config) checkHost() []error {
	var errs []error
	dirs := c.Cache.DataDirs
	if len(dirs) == 0 && c.Cache.Dir != "" {
		dirs = []string{c.Cache.Dir}
	}
	seen := map[uint64]string{}
	var total int64
	for _, d := range dirs {
		at, dev, size, err := fsOf(d)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", keyOfDir(c, d), err))
			continue
		}
		if other, dup := seen[dev]; dup {
			errs = append(errs, fmt.Errorf("cache.data_dirs: %s and %s are on one file system (that of %s): each data directory must be a disk of its own, else its space counts twice; list one directory per disk", other, d, at))
			continue
		}
		seen[dev] = d
		total += size
	}
	if cp := int64(c.Space.Capacity); cp > 0 && total > 0 && cp > total && len(errs) == 0 {
		where := "the file system holding " + dirs[0]
		if len(dirs) > 1 {
			where = "the file systems of cache.data_dirs together"
		}
		errs = append(errs, fmt.Errorf("space.capacity = %v: more than %s (%s, %d bytes): at most \"%dG\", or \"0\" for the whole file system", c.Space.Capacity, where, units.Format(total), total, total>>30))
	}
	return errs
}

func keyOfDir(c *Config, d string) string {
	if len(c.Cache.DataDirs) > 0 {
		return "cache.data_dirs " + d
	}
	return "cache.dir " + d
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

// ExplainPermission explains a permission error on a file: who owns it,
// who this process is, and the fix (the chown that gives the directory of
// roots holding the file, or else the file's own directory, to this
// process's user). Other errors come back unchanged.
func ExplainPermission(err error, roots ...string) error {
	var pe *fs.PathError
	if !errors.As(err, &pe) || !errors.Is(err, fs.ErrPermission) {
		return err
	}
	p := pe.Path
	var st syscall.Stat_t
	for syscall.Stat(p, &st) != nil && p != filepath.Dir(p) {
		p = filepath.Dir(p)
	}
	fix := filepath.Dir(p)
	for _, r := range roots {
		if r = filepath.Clean(r); r != "." && (p == r || strings.HasPrefix(p, r+"/")) {
			fix = r
			break
		}
	}
	me, grp := UserName(os.Geteuid()), GroupName(os.Getegid())
	why := ""
	if st.Uid == 0 && os.Geteuid() != 0 {
		why = " (left by a run as root)"
	}
	return fmt.Errorf("%w: %s belongs to %s:%s (mode %v)%s and hepcache runs as %s: give it back to %s with chown -R %s:%s %s, or run hepcache as its service user (systemctl start hepcache)",
		err, p, UserName(int(st.Uid)), GroupName(int(st.Gid)), os.FileMode(st.Mode&0o777), why, me, me, me, grp, fix)
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
