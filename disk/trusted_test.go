package disk

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hepcache/hepcache/internal/realclient"
)

// TestOpenTrusted decides, for a cache of user svc, which directories
// another user (other) could swap, as issue 36 item 2's XCache tree owner
// did with cache.dir.
func TestOpenTrusted(t *testing.T) {
	realclient.RequireRoot(t, "directories of other users")
	const svc, other = 65534, 12345
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, top string) string // returns the path to open
		uid   int
		ok    bool
		owner int // when ok
	}{
		{name: "root's parents, the service's directory", uid: svc, ok: true, owner: svc, setup: func(t *testing.T, top string) string {
			return mkdir(t, top, "cache", svc, 0o755)
		}},
		{name: "a parent of another user's", uid: svc, setup: func(t *testing.T, top string) string {
			p := mkdir(t, top, "xcache", other, 0o755)
			return mkdir(t, p, ".hepcache", svc, 0o755)
		}},
		{name: "a parent writable by its group", uid: svc, setup: func(t *testing.T, top string) string {
			p := mkdir(t, top, "shared", 0, 0o775)
			return mkdir(t, p, "cache", svc, 0o755)
		}},
		{name: "a sticky parent, the entry the service's", uid: svc, ok: true, owner: svc, setup: func(t *testing.T, top string) string {
			p := mkdir(t, top, "tmp", 0, os.ModeSticky|0o777)
			return mkdir(t, p, "cache", svc, 0o755)
		}},
		{name: "a sticky parent, the entry another user's", uid: svc, setup: func(t *testing.T, top string) string {
			p := mkdir(t, top, "tmp", 0, os.ModeSticky|0o777)
			return mkdir(t, p, "cache", other, 0o755)
		}},
		{name: "the directory itself another user's", uid: svc, setup: func(t *testing.T, top string) string {
			return mkdir(t, top, "cache", other, 0o755)
		}},
		{name: "the directory writable by others", uid: svc, setup: func(t *testing.T, top string) string {
			return mkdir(t, top, "cache", svc, 0o777)
		}},
		{name: "a link planted in another user's directory", uid: svc, setup: func(t *testing.T, top string) string {
			p := mkdir(t, top, "xcache", other, 0o755)
			secret := mkdir(t, top, "secret", 0, 0o700)
			link(t, secret, filepath.Join(p, ".hepcache"), other)
			return filepath.Join(p, ".hepcache")
		}},
		{name: "root's link in root's directory", uid: svc, ok: true, owner: svc, setup: func(t *testing.T, top string) string {
			c := mkdir(t, top, "real", svc, 0o755)
			link(t, c, filepath.Join(top, "cache"), 0)
			return filepath.Join(top, "cache")
		}},
		{name: "a root tool: the directory's owner is trusted", uid: -1, ok: true, owner: other, setup: func(t *testing.T, top string) string {
			p := mkdir(t, top, "xcache", other, 0o755)
			return mkdir(t, p, ".hepcache", other, 0o755)
		}},
		{name: "a root tool: a parent of one user, the directory of another", uid: -1, setup: func(t *testing.T, top string) string {
			p := mkdir(t, top, "xcache", other, 0o755)
			return mkdir(t, p, ".hepcache", svc, 0o755)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			top := mkdir(t, t.TempDir(), "top", 0, 0o755)
			p := tc.setup(t, top)
			f, owner, err := OpenTrusted(p, tc.uid, -1, false)
			if tc.ok != (err == nil) {
				t.Fatalf("OpenTrusted(%s) = %v, want ok %v", p, err, tc.ok)
			}
			if err != nil {
				if !errors.Is(err, ErrUntrusted) {
					t.Fatalf("error %v is not ErrUntrusted", err)
				}
				t.Logf("refused: %v", err)
				return
			}
			defer f.Close()
			if owner != tc.owner {
				t.Errorf("owner %d, want %d", owner, tc.owner)
			}
		})
	}
}

// TestOpenTrustedHoldsWhatItChecked: once opened, a swap of the name
// changes nothing the descriptor names; created directories are the
// service's from the start.
func TestOpenTrustedHoldsWhatItChecked(t *testing.T) {
	realclient.RequireRoot(t, "directories of other users")
	top := mkdir(t, t.TempDir(), "top", 0, 0o755)
	p := filepath.Join(top, "a", "cache")
	f, owner, err := OpenTrusted(p, 65534, -1, true)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if owner != 65534 {
		t.Fatalf("owner %d", owner)
	}
	for _, d := range []string{filepath.Join(top, "a"), p} {
		if st, err := os.Stat(d); err != nil || uidOf(st) != 65534 {
			t.Fatalf("%s not made for the service: %v", d, err)
		}
	}
	secret := mkdir(t, top, "secret", 0, 0o700)
	if err := os.Rename(p, p+".moved"); err != nil {
		t.Fatal(err)
	}
	link(t, secret, p, 0)
	r, err := os.OpenRoot(ProcPath(f))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.WriteFile("written", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(secret, "written")); err == nil {
		t.Fatal("the write followed the swapped name")
	}
	if _, err := os.Stat(filepath.Join(p+".moved", "written")); err != nil {
		t.Fatalf("the write did not land in the directory checked: %v", err)
	}
}

func mkdir(t *testing.T, parent, name string, uid int, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(parent, name)
	if err := os.Mkdir(p, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, uid, uid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func link(t *testing.T, target, name string, uid int) {
	t.Helper()
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
	os.Lchown(name, uid, uid)
}

func uidOf(fi os.FileInfo) int { return int(fi.Sys().(*syscall.Stat_t).Uid) }
