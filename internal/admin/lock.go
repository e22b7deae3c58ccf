package admin

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/hepcache/hepcache/disk"
)

// lockName is the lock file in the cache directory. Its name is the one
// every version locks, so that an upgrade's new process waits for the old
// one whatever their versions.
const lockName = "lock"

// Lock takes the exclusive lock on dir: the lock file in it, which only
// the cache's user (and root) can open. The lock is released by the
// returned function or when the process dies (kill -9 included).
//
// The directory is resolved once (disk.OpenTrusted) and the lock file
// opened from its descriptor, never through a link. The file is 0600: no
// other user can open it, so none can hold it to keep the server from
// starting or win it during an upgrade's hand-over. A lock file left by
// an older version (0644) is made 0600; one that another user holds (it
// opened the file while it was readable), or that this user cannot open,
// is replaced by a new file: the holder keeps a lock on a file nobody
// uses. Only a holder of the cache's own user or root is a running server.
func Lock(dir string) (unlock func(), err error) {
	d, owner, err := disk.OpenTrusted(dir, disk.Self(), -1, false)
	if err != nil {
		return nil, fmt.Errorf("lock cache dir: %w", err)
	}
	defer d.Close()
	dirfd := int(d.Fd())
	for attempt := 0; ; attempt++ {
		fd, err := openLock(dirfd, owner)
		if err != nil {
			return nil, fmt.Errorf("lock cache dir %s: %w", dir, err)
		}
		if ferr := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); ferr != nil {
			var st unix.Stat_t
			unix.Fstat(fd, &st)
			unix.Close(fd)
			if !errors.Is(ferr, unix.EWOULDBLOCK) {
				return nil, fmt.Errorf("lock cache dir %s: %w", dir, ferr)
			}
			pid, huid, known := lockHolder(&st)
			if !known || huid == 0 || huid == os.Geteuid() || huid == owner || attempt > 0 {
				return nil, fmt.Errorf("%s: %w", dir, ErrLocked)
			}
			// Another user holds it: not a hepcache of this cache.
			if err := replaceLock(dirfd, owner); err != nil {
				return nil, fmt.Errorf("lock cache dir %s: the lock is held by pid %d of uid %d, not this cache's user, and cannot be replaced: %w", dir, pid, huid, err)
			}
			continue
		}
		// Still the file the directory names (not replaced between the
		// open and the flock by another starting process)?
		var held, named unix.Stat_t
		if unix.Fstat(fd, &held) == nil && unix.Fstatat(dirfd, lockName, &named, unix.AT_SYMLINK_NOFOLLOW) == nil &&
			held.Dev == named.Dev && held.Ino == named.Ino {
			f := os.NewFile(uintptr(fd), lockName)
			return func() { f.Close() }, nil
		}
		unix.Close(fd)
		if attempt > 3 {
			return nil, fmt.Errorf("%s: %w", dir, ErrLocked)
		}
	}
}

// openLock opens (or creates) the lock file read-write, 0600 and the
// cache owner's, replacing one it cannot use.
func openLock(dirfd, owner int) (int, error) {
	fd, err := unix.Openat(dirfd, lockName, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.ELOOP) {
		// Another user's file (or a link): replaced, as the directory's
		// owner may.
		if err := replaceLock(dirfd, owner); err != nil {
			return -1, err
		}
		fd, err = unix.Openat(dirfd, lockName, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	me := os.Geteuid()
	if me == 0 && owner > 0 && int(st.Uid) != owner {
		// Created by root now, or left by a run as root: the service's.
		unix.Fchown(fd, owner, -1)
	}
	if st.Mode&0o077 != 0 || (int(st.Uid) != me && me != 0) {
		if int(st.Uid) == me || me == 0 {
			unix.Fchmod(fd, 0o600) // left by an older version
		} else {
			// Writable by this user but not its own: replaced.
			unix.Close(fd)
			if err := replaceLock(dirfd, owner); err != nil {
				return -1, err
			}
			return unix.Openat(dirfd, lockName, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		}
	}
	return fd, nil
}

// replaceLock puts a new lock file, 0600 and owner's, in place of the
// old one.
func replaceLock(dirfd, owner int) error {
	tmp := lockName + "." + strconv.Itoa(os.Getpid()) + ".new"
	fd, err := unix.Openat(dirfd, tmp, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	if os.Geteuid() == 0 && owner > 0 {
		unix.Fchown(fd, owner, -1)
	}
	unix.Close(fd)
	if err := unix.Renameat(dirfd, tmp, dirfd, lockName); err != nil {
		unix.Unlinkat(dirfd, tmp, 0)
		return err
	}
	return nil
}

// lockHolder finds the process holding a flock on the file st describes
// (/proc/locks) and its uid; known is false when it cannot tell.
func lockHolder(st *unix.Stat_t) (pid, uid int, known bool) {
	f, err := os.Open("/proc/locks")
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev)), st.Ino)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// 1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF
		fl := strings.Fields(sc.Text())
		if len(fl) < 6 || fl[1] != "FLOCK" || fl[5] != want {
			continue
		}
		pid, err := strconv.Atoi(fl[4])
		if err != nil || pid <= 0 {
			return 0, 0, false
		}
		var pst unix.Stat_t
		if unix.Stat("/proc/"+strconv.Itoa(pid), &pst) != nil {
			return pid, 0, false
		}
		return pid, int(pst.Uid), true
	}
	return 0, 0, false
}
