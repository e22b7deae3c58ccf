package adopt

import (
	"bytes"
	"context"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/sidecar"
	"github.com/hepcache/hepcache/internal/xrdpfc"
)

const (
	mib    = 1 << 20
	origin = "root://origin.example:1094"
	nobody = 65534
)

var created = time.Unix(1700000000, 0)

// openDirs makes dir and its parents up to the temporary root traversable
// by other users (t.TempDir's are 0700): the tree's owner is not root.
func openDirs(tb testing.TB, dir string) {
	tb.Helper()
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
}

// put writes a data file and its .cinfo into an XCache tree.
func put(tb testing.TB, root, path string, data, ci []byte) {
	tb.Helper()
	p := filepath.Join(root, path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tb.Fatal(err)
	}
	if data != nil {
		if err := os.WriteFile(p, data, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	if err := os.WriteFile(p+xrdpfc.Ext, ci, 0o644); err != nil {
		tb.Fatal(err)
	}
}

func all(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>11)
	}
	return b
}

func run(tb testing.TB, xc, hc string, uid, gid int) Result {
	tb.Helper()
	res, err := Run(Config{XCacheDir: xc, CacheDir: hc, Origin: origin, BlockSize: mib, UID: uid, GID: gid,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	if err != nil {
		tb.Fatalf("adopt: %v", err)
	}
	return res
}

func readSide(tb testing.TB, hc, path string) *sidecar.Info {
	tb.Helper()
	b, err := os.ReadFile(cache.MetaPath(hc, cache.Key{Origin: origin, Path: path}))
	if err != nil {
		tb.Fatalf("sidecar of %s: %v", path, err)
	}
	in, err := sidecar.Unmarshal(b)
	if err != nil {
		tb.Fatal(err)
	}
	return in
}

// TestLyingCinfo: a .cinfo vouches only for blocks that lie inside its
// data file and were written; sizes are bounded; a bad record skips its
// file and the rest goes on; every adopted copy is unconfirmed until the
// origin is asked.
func TestLyingCinfo(t *testing.T) {
	xc, hc := t.TempDir(), t.TempDir()
	put(t, xc, "store/good.root", pattern(3*mib), xrdpfc.Encode(128<<10, 3*mib, created, all(24), nil))
	// 1 MiB of data, a .cinfo saying 4 MiB, all of it present.
	put(t, xc, "store/short.root", pattern(mib), xrdpfc.Encode(128<<10, 4*mib, created, all(32), nil))
	// 4 MiB file of which only the first MiB was ever written.
	put(t, xc, "store/holes.root", nil, xrdpfc.Encode(mib, 4*mib, created, all(4), nil))
	f, _ := os.Create(filepath.Join(xc, "store/holes.root"))
	f.Write(pattern(mib))
	f.Truncate(4 * mib)
	f.Close()
	// 8 TiB of blocks of 1 GiB, for a 4 KiB data file.
	put(t, xc, "store/huge.root", pattern(4096), xrdpfc.Encode(1<<30, 1<<43, created, all(8192), nil))
	// 2^53 bytes in a .cinfo of 1 MiB: once crashed adoption for memory.
	put(t, xc, "store/crash.root", pattern(4096), xrdpfc.Encode(1<<30, 1<<53, created, []int{0}, nil))
	// A data file longer than its .cinfo says.
	put(t, xc, "store/long.root", pattern(2*mib), xrdpfc.Encode(mib, mib, created, all(1), nil))

	res := run(t, xc, hc, -1, -1)
	if res.Complete != 1 || res.Partial != 2 || res.Skipped != 3 {
		t.Fatalf("adopted %d complete, %d partial, skipped %d (%v); want 1, 2, 3", res.Complete, res.Partial, res.Skipped, res.Errors)
	}
	for _, tc := range []struct {
		path    string
		present int
	}{{"/store/good.root", 3}, {"/store/short.root", 1}, {"/store/holes.root", 1}} {
		in := readSide(t, hc, tc.path)
		if got := in.Durable.Count(); got != tc.present {
			t.Errorf("%s: %d blocks present, want %d (the data file has only those)", tc.path, got, tc.present)
		}
		if !in.Unconfirmed() {
			t.Errorf("%s: adopted copy not marked unconfirmed", tc.path)
		}
	}
	for _, p := range []string{"/store/huge.root", "/store/crash.root", "/store/long.root"} {
		if _, err := os.Stat(cache.MetaPath(hc, cache.Key{Origin: origin, Path: p})); err == nil {
			t.Errorf("%s adopted", p)
		}
		if _, err := os.Stat(filepath.Join(xc, p)); err != nil {
			t.Errorf("%s: XCache's file of a file not adopted was touched: %v", p, err)
		}
	}
	joined := ""
	for _, e := range res.Errors {
		joined += e.Error() + "\n"
	}
	for _, want := range []string{"huge.root.cinfo", "crash.root.cinfo", "long.root.cinfo: data file of 2097152 bytes"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no message naming %q in:\n%s", want, joined)
		}
	}
}

// TestHardLinkRefused: a name in the XCache tree hard-linked to a
// root-only file (planted where protected_hardlinks is off, or by root)
// is neither adopted, served, nor chowned; nor is a second name of one of
// the tree owner's own files.
func TestHardLinkRefused(t *testing.T) {
	realclient.RequireRoot(t, "the tree belongs to another user than the one adopting it")
	base := t.TempDir()
	openDirs(t, base)
	secretDir := filepath.Join(base, "secret")
	os.Mkdir(secretDir, 0o700)
	secret := filepath.Join(secretDir, "shadow")
	if err := os.WriteFile(secret, []byte("root:$6$secret:19000:0:99999:7:::\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	xc, hc := filepath.Join(base, "xcache"), filepath.Join(base, "hepcache")
	put(t, xc, "store/shadow.root", nil, xrdpfc.Encode(4096, 4096, created, []int{0}, nil))
	put(t, xc, "store/own.root", pattern(mib), xrdpfc.Encode(mib, mib, created, []int{0}, nil))
	chownTree(t, xc, nobody)
	// The links last: chownTree would give root's file away itself.
	if err := os.Link(secret, filepath.Join(xc, "store/shadow.root")); err != nil {
		t.Fatal(err)
	}
	os.Link(filepath.Join(xc, "store/own.root"), filepath.Join(base, "elsewhere"))
	res := run(t, xc, hc, 4321, 4321)
	if res.Complete+res.Partial != 0 || res.Skipped != 2 {
		t.Fatalf("adopted %d, skipped %d (%v); want 0 and 2", res.Complete+res.Partial, res.Skipped, res.Errors)
	}
	var st syscall.Stat_t
	syscall.Stat(secret, &st)
	if st.Uid != 0 || st.Mode&0o777 != 0o600 || st.Nlink != 2 || st.Size != 34 {
		t.Fatalf("root's file changed: uid %d mode %o links %d size %d", st.Uid, st.Mode&0o777, st.Nlink, st.Size)
	}
	noInode(t, hc, st.Ino)
}

func chownTree(tb testing.TB, dir string, uid int) {
	tb.Helper()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			os.Lchown(p, uid, uid)
		}
		return nil
	})
}

// noInode fails if any file under dir is the inode ino.
func noInode(tb testing.TB, dir string, ino uint64) {
	tb.Helper()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		var st syscall.Stat_t
		if err == nil && syscall.Lstat(p, &st) == nil && st.Ino == ino {
			tb.Errorf("%s is root's file", p)
		}
		return nil
	})
}

// TestSymlinkSwapRace: while adoption runs as root, the tree's owner (an
// unprivileged user) exchanges directories of the tree with symbolic
// links to a root-only directory, as fast as renameat2 allows. Nothing of
// root's directory may be linked into the cache, removed, chowned or
// extended. (Before the descriptor walk, 31-54 of root's files per run
// were linked and served, as many deleted, some chowned, all extended.)
func TestSymlinkSwapRace(t *testing.T) {
	realclient.RequireRoot(t, "the attacker runs as another user than adoption")
	py := realclient.RequireFile(t, "/usr/bin/python3")
	base := t.TempDir()
	openDirs(t, base)
	secretDir := filepath.Join(base, "secret")
	os.Mkdir(secretDir, 0o700)
	const dirs, files = 16, 12
	secretBytes := []byte("root-only bytes\n")
	secretCinfo := xrdpfc.Encode(4096, 4096, created, []int{0}, nil)
	for j := range files {
		name := filepath.Join(secretDir, "f"+itoa(j)+".root")
		os.WriteFile(name, secretBytes, 0o600)
		os.WriteFile(name+xrdpfc.Ext, secretCinfo, 0o600)
	}
	xc, hc := filepath.Join(base, "xcache"), filepath.Join(base, "hepcache")
	var pairs []string
	for i := range dirs {
		d := filepath.Join(xc, "store", "d"+itoa(i))
		for j := range files {
			put(t, d, "f"+itoa(j)+".root", pattern(4096), xrdpfc.Encode(4096, 4096, created, []int{0}, nil))
		}
		l := filepath.Join(xc, "store", "l"+itoa(i))
		os.Symlink(secretDir, l)
		pairs = append(pairs, d, l)
	}
	chownTree(t, xc, nobody)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	attacker := exec.CommandContext(ctx, py, append([]string{"-c", `
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
p = [a.encode() for a in sys.argv[1:]]
pairs = list(zip(p[0::2], p[1::2]))
print("ready", flush=True)
while True:
    for a, b in pairs:
        libc.renameat2(-100, a, -100, b, 2)  # RENAME_EXCHANGE
`}, pairs...)...)
	attacker.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, _ := attacker.StdoutPipe()
	attacker.Stderr = os.Stderr
	if err := attacker.Start(); err != nil {
		t.Fatal(err)
	}
	defer attacker.Wait()
	buf := make([]byte, 6)
	if n, _ := out.Read(buf); n < 5 {
		t.Fatal("attacker did not start")
	}
	var adopted int
	for range 3 {
		res := run(t, xc, hc, 4321, 4321)
		adopted += res.Complete + res.Partial
	}
	cancel()
	if adopted == 0 {
		t.Fatal("nothing of the tree adopted: the test did not exercise adoption")
	}
	for j := range files {
		name := filepath.Join(secretDir, "f"+itoa(j)+".root")
		for p, want := range map[string][]byte{name: secretBytes, name + xrdpfc.Ext: secretCinfo} {
			var st syscall.Stat_t
			if err := syscall.Stat(p, &st); err != nil {
				t.Errorf("root's %s: %v", p, err)
				continue
			}
			if st.Uid != 0 || st.Nlink != 1 || st.Mode&0o777 != 0o600 {
				t.Errorf("root's %s changed: uid %d links %d mode %o", p, st.Uid, st.Nlink, st.Mode&0o777)
			}
			if b, _ := os.ReadFile(p); !bytes.Equal(b, want) {
				t.Errorf("root's %s changed: %d bytes", p, len(b))
			}
		}
	}
	filepath.WalkDir(hc, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, _ := os.ReadFile(p); bytes.HasPrefix(b, secretBytes) {
				t.Errorf("%s holds root's bytes", p)
			}
		}
		return nil
	})
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestWritableByOthersNotAdopted (issue 36 item 3): a data file or .cinfo
// XCache's user left writable by group or others is not adopted (another
// user could have written into it: its bytes would be served as cached
// ones); what is adopted gets the cache's own mode, 0644.
func TestWritableByOthersNotAdopted(t *testing.T) {
	xc, hc := t.TempDir(), t.TempDir()
	for _, name := range []string{"ok", "data666", "cinfo666"} {
		put(t, xc, "store/"+name+".root", pattern(mib), xrdpfc.Encode(mib, mib, created, all(1), nil))
	}
	os.Chmod(filepath.Join(xc, "store/ok.root"), 0o600)
	os.Chmod(filepath.Join(xc, "store/data666.root"), 0o666)
	os.Chmod(filepath.Join(xc, "store/cinfo666.root"+xrdpfc.Ext), 0o666)
	res := run(t, xc, hc, -1, -1)
	if res.Complete != 1 || res.Skipped != 2 {
		t.Fatalf("adopted %d, skipped %d (%v); want 1 and 2", res.Complete, res.Skipped, res.Errors)
	}
	st, err := os.Stat(cache.DataPath(hc, cache.Key{Origin: origin, Path: "/store/ok.root"}))
	if err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("adopted data file: %v, want mode 0644", err)
	} else {
		t.Logf("adopted data file mode %v", st.Mode())
	}
	for _, e := range res.Errors {
		if !strings.Contains(e.Error(), "writable by group or others") {
			t.Errorf("refusal does not say why: %v", e)
		}
	}
}
