package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Files of another user in the cache (left by `hepcache serve` run by hand
// as root, then the service started as its own user) cannot be rewritten
// by this process. Such a file is never an error to a client: it is
// removed and fetched again where the directory allows, else read past the
// cache (errNotOurs makes Open serve it from the origin uncached). The
// start-up names them, with the chown that gives them back.

// errNotOurs: a cached file's place belongs to another user.
var errNotOurs = errors.New("cache: the cached file belongs to another user")

// notOurs marks a permission error as errNotOurs (other errors unchanged).
func notOurs(err error) error {
	if err != nil && errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("%w: %w", errNotOurs, err)
	}
	return err
}

// foreign collects the cached files of other users found at start-up.
type foreign struct {
	mu    sync.Mutex
	n     int
	uids  map[uint32]bool
	paths []string // the first few
}

// maxForeignNamed is how many such files the start-up log names.
const maxForeignNamed = 5

// note records p if it belongs to another user than this process.
func (f *foreign) note(fsys interface {
	Stat(string) (fs.FileInfo, error)
}, p string) {
	fi, err := fsys.Stat(p)
	if err != nil {
		return
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) == os.Geteuid() {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	if f.uids == nil {
		f.uids = map[uint32]bool{}
	}
	f.uids[st.Uid] = true
	if len(f.paths) < maxForeignNamed {
		f.paths = append(f.paths, p)
	}
}

// report logs the files of other users found, if any, with the chown
// that gives the cache's trees back to this process's user.
func (f *foreign) report(c *Cache) {
	if f.n == 0 {
		return
	}
	why := ""
	if f.uids[0] && os.Geteuid() != 0 {
		why = " (left by a run as root)"
	}
	me, grp := strconv.Itoa(os.Geteuid()), strconv.Itoa(os.Getegid())
	if u, err := user.LookupId(me); err == nil {
		me = u.Username
	}
	if g, err := user.LookupGroupId(grp); err == nil {
		grp = g.Name
	}
	fix := "chown -R " + me + ":" + grp + " " + strings.Join(append([]string{c.cfg.Dir}, c.cfg.DataDirs...), " ")
	c.cfg.Logger.Warn(fmt.Sprintf("%d cached files belong to another user%s: each is fetched again, or read past the cache where its directory is not %s's, never an error to a client; give them back", f.n, why, me),
		"files", strings.Join(f.paths, " "), "fix", fix)
}
