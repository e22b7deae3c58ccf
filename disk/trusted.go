package disk

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrUntrusted marks a directory refused because a user other than root
// and the one the cache runs for could replace it or what leads to it:
// whoever may write a directory on the way may swap the next name for a
// link or a directory of their own, and the cache would then write its
// files, or read cached bytes, where that user chose.
var ErrUntrusted = errors.New("another user could replace it")

// maxLinks bounds the symbolic links one OpenTrusted follows, as the
// kernel's own resolution does (ELOOP after 40).
const maxLinks = 40

// OpenTrusted opens the directory at path (made absolute) once, by
// descriptor, for a process that keeps the cache of user uid (root: uid
// 0). Walking from /, every directory on the way must be owned by root or
// uid and writable by no one else, except a sticky one (as /tmp) whose
// entry on the way is root's or uid's; a symbolic link is followed only
// where it sits in such a directory. The directory itself must be root's
// or uid's and writable by no one else. Whatever then happens to the names,
// the descriptor keeps naming what was checked: act on it (openat, os.Root
// over ProcPath), never on path again.
//
// uid < 0 is a root tool that does not know the cache's user: parents
// owned by the directory's own owner are then trusted too (that user
// could do to its own files what a swap would), and its owner is the
// returned uid.
//
// With create, missing directories are made (mode 0755) and given to uid,
// gid by descriptor when this process is root; gid < 0 is uid's group.
func OpenTrusted(path string, uid, gid int, create bool) (f *os.File, owner int, err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, -1, err
	}
	f, owner, err = openTrusted(abs, uid, gid, create, false)
	var ue *untrustedError
	if uid < 0 && errors.As(err, &ue) && ue.owner != 0 && ue.owner >= 0 {
		// A parent of the directory's owner: trusted if the directory is
		// that user's too (not root's: a link of that user's could have
		// led there).
		if f2, owner2, err2 := openTrusted(abs, ue.owner, gid, create, true); err2 == nil {
			f, owner, err = f2, owner2, nil
		}
	}
	if err != nil && !errors.As(err, &ue) {
		err = fmt.Errorf("%s: %w", path, err)
	}
	if err != nil {
		return nil, -1, err
	}
	return f, owner, nil
}

// Self is the uid OpenTrusted takes for this process's own cache: its
// effective uid, or -1 for root (a root tool acts for the directory's
// owner).
func Self() int {
	if uid := os.Geteuid(); uid != 0 {
		return uid
	}
	return -1
}

// ProcPath is a path naming what the descriptor f names, for APIs that
// take paths (os.OpenRoot): the kernel resolves it to f's inode, not by
// name.
func ProcPath(f *os.File) string { return "/proc/self/fd/" + strconv.Itoa(int(f.Fd())) }

// untrustedError says which directory another user could change.
type untrustedError struct {
	dir   string
	owner int
	why   string
	fix   string
}

func (e *untrustedError) Error() string {
	return fmt.Sprintf("%s %s: %s (fix: %s)", e.dir, e.why, ErrUntrusted, e.fix)
}

func (e *untrustedError) Unwrap() error { return ErrUntrusted }

// openTrusted is OpenTrusted; with ownedByUID the directory itself must be
// uid's, not root's.
func openTrusted(abs string, uid, gid int, create, ownedByUID bool) (*os.File, int, error) {
	if uid < 0 {
		uid = 0
	}
	asRoot := os.Geteuid() == 0
	if gid < 0 {
		gid = groupOf(uid)
	}
	links := 0
	fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, -1, err
	}
	cur := "/"
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, -1, err
	}
	rest := strings.Split(strings.TrimPrefix(abs, "/"), "/")
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		if name == "" || name == "." {
			continue
		}
		// fd is cur, a directory already checked to be trusted as a
		// directory of its own; now as the parent of name.
		if int(st.Uid) != 0 && int(st.Uid) != uid {
			unix.Close(fd)
			return nil, -1, &untrustedError{dir: cur, owner: int(st.Uid), why: "belongs to " + userName(int(st.Uid)),
				fix: "give " + cur + " to root (chown root: " + cur + "), or choose a directory outside it"}
		}
		sticky := st.Mode&unix.S_ISVTX != 0
		if st.Mode&0o022 != 0 && !sticky {
			unix.Close(fd)
			return nil, -1, &untrustedError{dir: cur, owner: int(st.Uid), why: fmt.Sprintf("is writable by its group or others (mode %04o)", st.Mode&0o7777),
				fix: "chmod go-w " + cur}
		}
		var cst unix.Stat_t
		err := unix.Fstatat(fd, name, &cst, unix.AT_SYMLINK_NOFOLLOW)
		if errors.Is(err, unix.ENOENT) && create {
			err = unix.Mkdirat(fd, name, 0o755)
			if err == nil {
				if nfd, oerr := unix.Openat(fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); oerr == nil {
					if asRoot && uid != 0 {
						err = unix.Fchownat(nfd, "", uid, gid, unix.AT_EMPTY_PATH)
					}
					unix.Close(nfd)
				}
			}
			if err != nil && !errors.Is(err, unix.EEXIST) {
				unix.Close(fd)
				return nil, -1, &fs.PathError{Op: "mkdir", Path: filepath.Join(cur, name), Err: err}
			}
			err = unix.Fstatat(fd, name, &cst, unix.AT_SYMLINK_NOFOLLOW)
		}
		if err != nil {
			unix.Close(fd)
			return nil, -1, &fs.PathError{Op: "stat", Path: filepath.Join(cur, name), Err: err}
		}
		next := filepath.Join(cur, name)
		if sticky && int(cst.Uid) != 0 && int(cst.Uid) != uid {
			unix.Close(fd)
			return nil, -1, &untrustedError{dir: next, owner: int(cst.Uid), why: "belongs to " + userName(int(cst.Uid)) + " in the shared directory " + cur,
				fix: "choose a directory of root's or the service user's"}
		}
		if cst.Mode&unix.S_IFMT == unix.S_IFLNK {
			links++
			if links > maxLinks {
				unix.Close(fd)
				return nil, -1, &fs.PathError{Op: "open", Path: abs, Err: unix.ELOOP}
			}
			target, err := readlinkat(fd, name)
			if err != nil {
				unix.Close(fd)
				return nil, -1, err
			}
			// Walk the target from its start, checked the same way.
			if !filepath.IsAbs(target) {
				target = filepath.Join(cur, target)
			}
			rest = append(strings.Split(strings.TrimPrefix(filepath.Clean(target), "/"), "/"), rest...)
			unix.Close(fd)
			if fd, err = unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
				return nil, -1, err
			}
			cur = "/"
			if err := unix.Fstat(fd, &st); err != nil {
				unix.Close(fd)
				return nil, -1, err
			}
			continue
		}
		nfd, err := unix.Openat(fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return nil, -1, &fs.PathError{Op: "open", Path: next, Err: err}
		}
		fd, cur = nfd, next
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return nil, -1, err
		}
	}
	// The directory itself.
	if (int(st.Uid) != 0 || ownedByUID) && int(st.Uid) != uid {
		unix.Close(fd)
		return nil, -1, &untrustedError{dir: cur, owner: int(st.Uid), why: "belongs to " + userName(int(st.Uid)) + ", not to root or " + userName(uid),
			fix: "chown " + userName(uid) + ": " + cur}
	}
	if st.Mode&0o022 != 0 {
		unix.Close(fd)
		return nil, -1, &untrustedError{dir: cur, owner: int(st.Uid), why: fmt.Sprintf("is writable by its group or others (mode %04o)", st.Mode&0o7777),
			fix: "chmod go-w " + cur}
	}
	owner := int(st.Uid)
	if owner == 0 {
		owner = uid
	}
	return os.NewFile(uintptr(fd), cur), owner, nil
}

func readlinkat(dirfd int, name string) (string, error) {
	for n := 256; ; n *= 2 {
		b := make([]byte, n)
		k, err := unix.Readlinkat(dirfd, name, b)
		if err != nil {
			return "", err
		}
		if k < n {
			return string(b[:k]), nil
		}
	}
}

func userName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return u.Username
	}
	return strconv.Itoa(uid)
}

func groupOf(uid int) int {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		if g, err := strconv.Atoi(u.Gid); err == nil {
			return g
		}
	}
	return uid
}
