package admin

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hepcache/hepcache/internal/realclient"
)

// TestLockNotHeldByOthers is issue 36 item 4: another local user's flock
// on the lock file (0644 before) kept serve from starting. The lock file
// is now 0600, an old one is made so, and a lock held by another user is
// no running hepcache: the file is replaced and the lock taken.
func TestLockNotHeldByOthers(t *testing.T) {
	realclient.RequireRoot(t, "a second user")
	flock := realclient.Require(t, "flock")
	setpriv := realclient.Require(t, "setpriv")
	top, err := os.MkdirTemp("", "hepcache-lock-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	os.Chmod(top, 0o755)
	dir := filepath.Join(top, "cache")
	os.Mkdir(dir, 0o755)
	lock := filepath.Join(dir, "lock")
	// As an older version left it.
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// nobody takes it while it is readable, and keeps it.
	hold := exec.Command(setpriv, "--reuid", "nobody", "--regid", "nogroup", "--clear-groups", flock, "-s", lock, "sleep", "60")
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hold.Process.Kill(); hold.Wait() })
	waitHeld(t, lock)

	unlock, err := Lock(dir)
	if err != nil {
		t.Fatalf("a lock held by another user kept the cache's lock: %v", err)
	}
	st, err := os.Stat(lock)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("lock file after Lock: %v %v, want 0600", st.Mode(), err)
	}
	// The lock held now is a server's: a second Lock is refused.
	if _, err := Lock(dir); !errors.Is(err, ErrLocked) {
		t.Errorf("second Lock: %v, want ErrLocked", err)
	}
	unlock()
	// Nobody cannot open the 0600 file any more.
	out, err := exec.Command(setpriv, "--reuid", "nobody", "--regid", "nogroup", "--clear-groups", flock, "-n", "-s", lock, "true").CombinedOutput()
	if err == nil {
		t.Errorf("another user could lock the 0600 lock file: %s", out)
	}
}

// waitHeld waits until some process holds a flock on p.
func waitHeld(t *testing.T, p string) {
	t.Helper()
	for i := 0; i < 500; i++ {
		f, err := os.Open(p)
		if err == nil {
			err = tryLock(f)
			f.Close()
			if err != nil {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the other user never took the lock")
}

func tryLock(f *os.File) error {
	return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
}
