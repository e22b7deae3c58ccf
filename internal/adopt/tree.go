package adopt

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The XCache tree belongs to another user (XCache's), who may change it
// while adoption runs, which may be as root. So it is never addressed by
// path after the start: every directory is opened relative to its
// parent's descriptor, one name at a time, with O_NOFOLLOW, and every file
// is acted on through a descriptor whose inode was checked (regular, one
// link, the tree owner's), never through a name resolved earlier. A
// directory swapped for a symbolic link fails to open (ELOOP); a name
// swapped after the check is not what is linked, chowned or truncated,
// since those act on the descriptor. What is removed is removed by name
// in a directory of the tree, and only if the name still is the inode
// that was adopted.

// maxDepth bounds the walk (XCache mirrors logical file names, a dozen
// levels deep); a deeper tree is refused, not followed.
const maxDepth = 128

// dir is a directory of the tree, opened without following links.
type dir struct {
	fd   int
	path string // for messages only, never opened
}

// openDir opens a directory named by the administrator (the XCache root,
// a space): the one path resolved by name.
func openDir(path string) (*dir, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return &dir{fd: fd, path: path}, nil
}

func (d *dir) close() { unix.Close(d.fd) }

// checkName refuses anything but one path component.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return fmt.Errorf("%q is not a file name", name)
	}
	return nil
}

// sub opens the directory name inside d; a symbolic link is refused.
func (d *dir) sub(name string) (*dir, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			err = fmt.Errorf("not a directory (a symbolic link is not followed): %w", err)
		}
		return nil, &os.PathError{Op: "open", Path: filepath.Join(d.path, name), Err: err}
	}
	return &dir{fd: fd, path: filepath.Join(d.path, name)}, nil
}

// walkTo opens the directory rel (slash-separated, relative) under d one
// component at a time.
func (d *dir) walkTo(rel string) (*dir, error) {
	cur := d
	for _, c := range strings.Split(rel, "/") {
		if c == "" || c == "." {
			continue
		}
		next, err := cur.sub(c)
		if cur != d {
			cur.close()
		}
		if err != nil {
			return nil, err
		}
		cur = next
	}
	if cur == d {
		// Callers close what walkTo returns: never d itself.
		fd, err := unix.Dup(d.fd)
		if err != nil {
			return nil, err
		}
		unix.CloseOnExec(fd)
		return &dir{fd: fd, path: d.path}, nil
	}
	return cur, nil
}

// names lists d's entries (without . and ..).
func (d *dir) names() ([]string, error) {
	fd, err := unix.Dup(d.fd)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), d.path)
	defer f.Close()
	// A fresh descriptor shares the offset: start from the beginning.
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return f.Readdirnames(-1)
}

// lstat describes name in d without following a link.
func (d *dir) lstat(name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	if err := checkName(name); err != nil {
		return st, err
	}
	err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err != nil {
		return st, &os.PathError{Op: "stat", Path: filepath.Join(d.path, name), Err: err}
	}
	return st, nil
}

// readlink returns the target of the symbolic link name in d.
func (d *dir) readlink(name string) (string, error) {
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(d.fd, name, buf)
	if err != nil {
		return "", &os.PathError{Op: "readlink", Path: filepath.Join(d.path, name), Err: err}
	}
	if n == len(buf) {
		return "", fmt.Errorf("%s: link target too long", filepath.Join(d.path, name))
	}
	return string(buf[:n]), nil
}

// node is a file of the tree held by an O_PATH descriptor: what it refers
// to cannot change, whatever happens to its names.
type node struct {
	fd   int
	st   unix.Stat_t
	path string // for messages
}

// open takes hold of the file name in d (a link is refused) and describes it.
func (d *dir) open(name string) (*node, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	p := filepath.Join(d.path, name)
	fd, err := unix.Openat(d.fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	n := &node{fd: fd, path: p}
	if err := unix.Fstat(fd, &n.st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "stat", Path: p, Err: err}
	}
	if n.st.Mode&unix.S_IFMT == unix.S_IFLNK {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: a symbolic link, not followed", p)
	}
	return n, nil
}

func (n *node) close() { unix.Close(n.fd) }

// regular reports whether the node is a regular file.
func (n *node) regular() bool { return n.st.Mode&unix.S_IFMT == unix.S_IFREG }

// reopen opens the node's own inode for I/O (through /proc/self/fd, which
// names the descriptor, not a path in the tree).
func (n *node) reopen(flag int) (*os.File, error) {
	f, err := os.OpenFile("/proc/self/fd/"+strconv.Itoa(n.fd), flag|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, fmt.Errorf("reopen %s: %w", n.path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || !n.same(&st) {
		f.Close()
		return nil, fmt.Errorf("reopen %s: another file", n.path)
	}
	return f, nil
}

// readAll reads the node, refusing more than limit bytes.
func (n *node) readAll(limit int64) ([]byte, error) {
	if n.st.Size > limit {
		return nil, fmt.Errorf("%s: %d bytes, more than the %d a file of its kind may have", n.path, n.st.Size, limit)
	}
	f, err := n.reopen(os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = fmt.Errorf("%s: more than %d bytes", n.path, limit)
	}
	return b, err
}

// linkInto gives the node the name name in the directory dirfd (a hard
// link of the inode held, never of a path).
func (n *node) linkInto(dirfd int, name string) error {
	err := unix.Linkat(n.fd, "", dirfd, name, unix.AT_EMPTY_PATH)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EPERM) {
		// AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH; the descriptor's
		// /proc link names the same inode.
		err = unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(n.fd), dirfd, name, unix.AT_SYMLINK_FOLLOW)
	}
	return err
}

// chown changes the owner of the node's inode.
func (n *node) chown(uid, gid int) error {
	if err := unix.Fchownat(n.fd, "", uid, gid, unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("chown %s: %w", n.path, err)
	}
	return nil
}

// chmod changes the mode of the node's inode (through its /proc link: an
// O_PATH descriptor takes no fchmod).
func (n *node) chmod(mode uint32) error {
	if err := unix.Fchmodat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(n.fd), mode, 0); err != nil {
		return fmt.Errorf("chmod %s: %w", n.path, err)
	}
	return nil
}

// same reports whether st describes the node's inode.
func (n *node) same(st *unix.Stat_t) bool { return st.Dev == n.st.Dev && st.Ino == n.st.Ino }

// unlinkIf removes name from d if it still is the inode of n (a name the
// tree's owner swapped meanwhile is left alone).
func (d *dir) unlinkIf(name string, n *node) error {
	st, err := d.lstat(name)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	if !n.same(&st) {
		return fmt.Errorf("%s: no longer the file adopted, left in place", filepath.Join(d.path, name))
	}
	if err := unix.Unlinkat(d.fd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return &os.PathError{Op: "remove", Path: filepath.Join(d.path, name), Err: err}
	}
	return nil
}

// holeIn reports whether [off, off+n) of the node's file has a hole: bytes
// never written, which no .cinfo can make present.
func holeIn(f *os.File, off, n int64) bool {
	h, err := unix.Seek(int(f.Fd()), off, unix.SEEK_HOLE)
	if err != nil {
		// No hole information (ENXIO: off at or past the end).
		return true
	}
	return h < off+n
}
