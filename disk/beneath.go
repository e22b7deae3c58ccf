package disk

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// beneath is one directory tree held by descriptor. Every path inside it
// is resolved by the kernel in one openat2(2) with RESOLVE_BENEATH and
// RESOLVE_NO_SYMLINKS: it cannot leave the tree nor pass a symbolic link,
// whatever another user does to the names meanwhile. os.Root, used where
// the kernel has no openat2 (before Linux 5.6), checks the same but walks
// the path a component at a time from user space, an openat and a close
// per directory: for a sidecar six levels deep, a dozen system calls per
// open, a third of a small miss's CPU.
type beneath struct {
	// mu is held shared by every operation and exclusively by close, so
	// that the descriptor is never closed (and its number reused by
	// another open) under an operation.
	mu     sync.RWMutex
	fd     int // O_PATH directory; -1 once closed
	root   *os.Root
	closed bool
}

// openat2OK is 1 once openat2 is known to work, 2 once it is known
// missing (ENOSYS: os.Root is used).
var openat2OK atomic.Int32

// resolveBeneath confines a resolution to the tree and refuses links.
const resolveBeneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// openBeneath opens dir with OpenTrusted for uid (creating it with
// create) and holds what it found.
func openBeneath(dir string, uid int, create bool) (*beneath, error) {
	f, _, err := OpenTrusted(dir, uid, -1, create)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	r, err := os.OpenRoot(ProcPath(f))
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	return &beneath{fd: fd, root: r}, nil
}

func (b *beneath) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		unix.Close(b.fd)
		b.root.Close()
	}
}

var errClosed = errors.New("cache directory closed")

// openat2 opens rel beneath the tree; ENOSYS says to use os.Root.
// MUST be called with b.mu held (shared).
func (b *beneath) openat2Locked(rel string, flags int, mode uint32) (int, error) {
	if b.closed {
		return -1, errClosed
	}
	if openat2OK.Load() == 2 {
		return -1, unix.ENOSYS
	}
	if flags&(unix.O_CREAT|unix.O_TMPFILE) == 0 {
		mode = 0 // openat2 refuses a mode it would not use (EINVAL)
	}
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: resolveBeneath}
	for i := 0; ; i++ {
		fd, err := unix.Openat2(b.fd, rel, &how)
		switch {
		case err == nil:
			openat2OK.Store(1)
			return fd, nil
		case errors.Is(err, unix.ENOSYS):
			openat2OK.Store(2)
			return -1, err
		case (errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR)) && i < 16:
			// A rename raced with the resolution (RESOLVE_BENEATH
			// refuses to guess): resolve again.
			continue
		}
		return -1, err
	}
}

// openFile opens rel with os.OpenFile's flags.
func (b *beneath) openFile(rel string, flag int, perm fs.FileMode) (*os.File, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	fd, err := b.openat2Locked(rel, flag, uint32(perm.Perm()))
	if errors.Is(err, unix.ENOSYS) {
		return b.root.OpenFile(rel, flag, perm)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: rel, Err: err}
	}
	return os.NewFile(uintptr(fd), rel), nil
}

// parent opens the directory holding rel (O_PATH) and returns it with
// rel's last name. MUST be called with b.mu held (shared).
func (b *beneath) parentLocked(rel string) (int, string, error) {
	dir, name := filepath.Split(rel)
	if dir == "" {
		dir = "."
	}
	fd, err := b.openat2Locked(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	return fd, name, err
}

func (b *beneath) remove(rel string) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	pfd, name, err := b.parentLocked(rel)
	if errors.Is(err, unix.ENOSYS) {
		return b.root.Remove(rel)
	}
	if err != nil {
		return &fs.PathError{Op: "remove", Path: rel, Err: err}
	}
	defer unix.Close(pfd)
	err = unix.Unlinkat(pfd, name, 0)
	if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EPERM) {
		if derr := unix.Unlinkat(pfd, name, unix.AT_REMOVEDIR); derr == nil || !errors.Is(derr, unix.ENOTDIR) {
			err = derr
		}
	}
	if err != nil {
		return &fs.PathError{Op: "remove", Path: rel, Err: err}
	}
	return nil
}

func (b *beneath) rename(oldrel, newrel string) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	ofd, oname, err := b.parentLocked(oldrel)
	if errors.Is(err, unix.ENOSYS) {
		return b.root.Rename(oldrel, newrel)
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldrel, New: newrel, Err: err}
	}
	defer unix.Close(ofd)
	nfd, nname, err := b.parentLocked(newrel)
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldrel, New: newrel, Err: err}
	}
	defer unix.Close(nfd)
	if err := unix.Renameat(ofd, oname, nfd, nname); err != nil {
		return &os.LinkError{Op: "rename", Old: oldrel, New: newrel, Err: err}
	}
	return nil
}

// mkdirAll makes rel and its missing parents. A directory that exists
// costs one system call.
func (b *beneath) mkdirAll(rel string, perm fs.FileMode) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.mkdirAllLocked(rel, perm)
}

func (b *beneath) mkdirAllLocked(rel string, perm fs.FileMode) error {
	fd, err := b.openat2Locked(rel, unix.O_PATH|unix.O_DIRECTORY, 0)
	if errors.Is(err, unix.ENOSYS) {
		return b.root.MkdirAll(rel, perm)
	}
	if err == nil {
		unix.Close(fd)
		return nil
	}
	if !errors.Is(err, unix.ENOENT) {
		return &fs.PathError{Op: "mkdir", Path: rel, Err: err}
	}
	if dir := filepath.Dir(rel); dir != "." && dir != rel {
		if err := b.mkdirAllLocked(dir, perm); err != nil {
			return err
		}
	}
	pfd, name, err := b.parentLocked(rel)
	if err != nil {
		return &fs.PathError{Op: "mkdir", Path: rel, Err: err}
	}
	defer unix.Close(pfd)
	if err := unix.Mkdirat(pfd, name, uint32(perm.Perm())); err != nil && !errors.Is(err, unix.EEXIST) {
		return &fs.PathError{Op: "mkdir", Path: rel, Err: err}
	}
	return nil
}

// lstat describes rel itself (a final link as a link).
func (b *beneath) lstat(rel string) (fs.FileInfo, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	fd, err := b.openat2Locked(rel, unix.O_PATH|unix.O_NOFOLLOW, 0)
	if errors.Is(err, unix.ENOSYS) {
		return b.root.Lstat(rel)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "lstat", Path: rel, Err: err}
	}
	f := os.NewFile(uintptr(fd), filepath.Base(rel))
	defer f.Close()
	return f.Stat()
}

func (b *beneath) lchown(rel string, uid, gid int) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	fd, err := b.openat2Locked(rel, unix.O_PATH|unix.O_NOFOLLOW, 0)
	if errors.Is(err, unix.ENOSYS) {
		return b.root.Lchown(rel, uid, gid)
	}
	if err != nil {
		return &fs.PathError{Op: "lchown", Path: rel, Err: err}
	}
	defer unix.Close(fd)
	if err := unix.Fchownat(fd, "", uid, gid, unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &fs.PathError{Op: "lchown", Path: rel, Err: err}
	}
	return nil
}
