package disk

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// ErrLink marks an operation refused because a path inside a cache
// directory is (or passes through) a symbolic link. The cache's own files
// are never links: one found there was planted, and following it could
// write a cached file's bytes outside the cache or serve a file from
// outside as a cached one.
var ErrLink = errors.New("symbolic link in the cache directory, not followed")

// Confined is the real file system limited to a few directory trees (the
// cache directory and its data disks), each resolved once by descriptor
// (OpenTrusted). Every path is resolved beneath its tree's descriptor by
// the kernel (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS; os.Root where
// the kernel lacks it), and files are opened with O_NOFOLLOW: no symbolic
// link is followed, and paths outside the trees are refused.
type Confined struct {
	// mu protects roots: Reopen replaces a tree while others resolve.
	mu    sync.RWMutex
	roots []confinedRoot
	// uid is the user the trees are trusted for (OpenTrusted).
	uid int
}

// confinedRoot is one tree: its directory by descriptor (openat2 resolves
// beneath it) and, where the kernel has no openat2, as an os.Root.
type confinedRoot struct {
	dir string
	*beneath
}

var _ FS = (*Confined)(nil)

// Reopen opens the tree at dir again (or for the first time), replacing
// the one of that name: a data disk mounted since it was opened is then
// reached, instead of the directory its mount point covers. dir must
// exist. Operations in progress in the old tree may fail.
func (c *Confined) Reopen(dir string) error {
	dir = filepath.Clean(dir)
	r, err := openBeneath(dir, c.uid, false)
	if err != nil {
		return err
	}
	c.mu.Lock()
	var old *beneath
	for i := range c.roots {
		if c.roots[i].dir == dir {
			old, c.roots[i].beneath = c.roots[i].beneath, r
		}
	}
	if old == nil {
		c.roots = append(c.roots, confinedRoot{dir: dir, beneath: r})
	}
	c.mu.Unlock()
	if old != nil {
		old.close()
	}
	return nil
}

// NewConfined opens dirs, creating them if needed, for this process's
// user (OpenTrusted; root: for each directory's owner).
func NewConfined(dirs ...string) (*Confined, error) {
	return NewConfinedFor(Self(), dirs...)
}

// NewConfinedFor opens dirs, creating them if needed, for a cache of user
// uid (OpenTrusted): each is resolved once, and every later operation
// starts from its descriptor.
func NewConfinedFor(uid int, dirs ...string) (*Confined, error) {
	c := &Confined{uid: uid}
	for _, d := range dirs {
		d = filepath.Clean(d)
		r, err := openBeneath(d, uid, true)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.roots = append(c.roots, confinedRoot{dir: d, beneath: r})
	}
	return c, nil
}

// Close releases the trees.
func (c *Confined) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.roots {
		r.close()
	}
	return nil
}

// resolve finds the tree holding name (the longest matching directory)
// and name's path inside it.
func (c *Confined) resolve(op, name string) (*confinedRoot, string, error) {
	name = filepath.Clean(name)
	c.mu.RLock()
	defer c.mu.RUnlock()
	var best *confinedRoot
	for i := range c.roots {
		r := &c.roots[i]
		if (name == r.dir || strings.HasPrefix(name, r.dir+string(filepath.Separator))) && (best == nil || len(r.dir) > len(best.dir)) {
			best = r
		}
	}
	if best == nil {
		return nil, "", &fs.PathError{Op: op, Path: name, Err: errors.New("outside the cache directories")}
	}
	rel, err := filepath.Rel(best.dir, name)
	if err != nil {
		return nil, "", &fs.PathError{Op: op, Path: name, Err: err}
	}
	// A copy: Reopen may replace the tree while the caller uses it (its
	// descriptors stay open until the caller is done: see close).
	r := *best
	return &r, rel, nil
}

// linkErr turns os.Root's, openat2's and O_NOFOLLOW's refusals into
// ErrLink.
func linkErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.EXDEV) || strings.Contains(err.Error(), "escapes from parent") {
		return &fs.PathError{Op: op, Path: name, Err: ErrLink}
	}
	return err
}

// OpenFile implements FS.
func (c *Confined) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	r, rel, err := c.resolve("open", name)
	if err != nil {
		return nil, err
	}
	f, err := r.openFile(rel, flag|syscall.O_NOFOLLOW, perm)
	if err != nil {
		return nil, linkErr("open", name, err)
	}
	return osFile{f}, nil
}

// Remove implements FS. A link is removed itself, never its target.
func (c *Confined) Remove(name string) error {
	r, rel, err := c.resolve("remove", name)
	if err != nil {
		return err
	}
	return linkErr("remove", name, r.remove(rel))
}

// Rename implements FS.
func (c *Confined) Rename(oldname, newname string) error {
	r1, rel1, err := c.resolve("rename", oldname)
	if err != nil {
		return err
	}
	r2, rel2, err := c.resolve("rename", newname)
	if err != nil {
		return err
	}
	if r1.dir != r2.dir {
		return &fs.PathError{Op: "rename", Path: newname, Err: fmt.Errorf("across cache directories")}
	}
	return linkErr("rename", newname, r1.rename(rel1, rel2))
}

// MkdirAll implements FS.
func (c *Confined) MkdirAll(name string, perm fs.FileMode) error {
	r, rel, err := c.resolve("mkdir", name)
	if err != nil {
		return err
	}
	if rel == "." {
		return nil
	}
	return linkErr("mkdir", name, r.mkdirAll(rel, perm))
}

// Stat implements FS. It does not follow a final link: a link is reported
// as one (Mode()&ModeSymlink), never as its target.
func (c *Confined) Stat(name string) (fs.FileInfo, error) {
	r, rel, err := c.resolve("stat", name)
	if err != nil {
		return nil, err
	}
	fi, err := r.lstat(rel)
	return fi, linkErr("stat", name, err)
}

// ReadDir implements FS.
func (c *Confined) ReadDir(name string) ([]fs.DirEntry, error) {
	d, err := c.OpenDir(name)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.ReadDir(-1)
}

// SyncDir implements FS.
func (c *Confined) SyncDir(name string) error {
	d, err := c.OpenDir(name)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Lchown changes the owner of name itself (a link is not followed).
func (c *Confined) Lchown(name string, uid, gid int) error {
	r, rel, err := c.resolve("chown", name)
	if err != nil {
		return err
	}
	return linkErr("chown", name, r.lchown(rel, uid, gid))
}

// OpenDir opens the directory name for use as a directory descriptor
// (openat, linkat); a link is refused.
func (c *Confined) OpenDir(name string) (*os.File, error) {
	r, rel, err := c.resolve("open", name)
	if err != nil {
		return nil, err
	}
	d, err := r.openFile(rel, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_DIRECTORY, 0)
	return d, linkErr("open", name, err)
}

// SyncFS implements SyncFSer: name is any directory of a tree.
func (c *Confined) SyncFS(name string) error {
	d, err := c.OpenDir(name)
	if err != nil {
		return err
	}
	return syncfsClose(d, name)
}
