// Package adopt takes the files of a warm XCache (XrdPfc) cache into a
// hepcache cache directory without copying a byte: each data file gets a
// second name in hepcache's data tree (a hard link), and a sidecar made
// from its .cinfo (block bitmap, access records, creation time) and, where
// XCache kept page CRC32Cs (pfc.cschk cache), the CRC32C of every block.
//
// # Why a hard link, then (by default) XCache's names removed
//
// A rename would leave, between the rename and the sidecar being durable,
// a data file that no metadata describes (hepcache's index removes such
// files), so a crash could lose warm data. Linking first, writing the
// sidecar second and unlinking XCache's names last keeps every file valid
// in at least one of the two caches at every instant, makes a rerun after
// an interruption pick up where it stopped, and with Keep leaves the XCache
// tree able to serve again (rollback). Links never cross file systems:
// a file whose data lives on a file system holding no hepcache data
// directory is reported, not copied.
//
// # What adoption trusts
//
// Nothing in the XCache tree: it belongs to XCache's user, who may change
// it while adoption runs (as root). The tree is walked relative to
// directory descriptors without following links (tree.go); a file is
// adopted only if it is a regular file with one link, owned by the tree's
// owner (the owner of XCacheDir), so a hard link to someone else's file is
// refused; a .cinfo is bounded in size and only vouches for blocks that
// lie inside the data file and hold written bytes; and the copy is
// unconfirmed until its first open compares it with the origin's file
// (internal/cache/adopted.go). docs/security.md lists the checks.
package adopt

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hepcache/hepcache/disk"
	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/sidecar"
	"github.com/hepcache/hepcache/internal/xrdpfc"
)

// Config says what to adopt and where.
type Config struct {
	// XCacheDir is XCache's oss.localroot: its namespace of data files
	// and .cinfo files. Required.
	XCacheDir string
	// Spaces are further directories XCache's names may point into
	// (oss.space data and meta, pfc.spaces): a symbolic link of the tree
	// is followed only if its target lies in one of these, and then
	// relative to the space's descriptor, without following further links.
	Spaces []string
	// CacheDir is hepcache's cache.dir, DataDirs its cache.data_dirs.
	CacheDir string
	DataDirs []string
	// Origin is the canonical URL of the origin the files are adopted for
	// (XCache keeps no origin with its files).
	Origin string
	// BlockSize is hepcache's cache.block_size.
	BlockSize int64
	// Keep leaves XCache's names (data, .cinfo, tag files) in place:
	// XCache can serve again, but the disk space is shared until the
	// XCache tree is removed (hepcache's purge frees nothing meanwhile).
	Keep bool
	// UID and GID, if not -1, own what adoption creates and the adopted
	// data files (a run as root for a service user).
	UID, GID int
	// TreeOwner is the uid whose files the XCache tree holds (XCache's
	// user); only its files are adopted. 0: the owner of XCacheDir (when
	// that was given to root, name XCache's user).
	TreeOwner int
	// Logger receives a line per file not adopted. Default slog.Default().
	Logger *slog.Logger
}

// Result counts what a run did.
type Result struct {
	// Complete and Partial count the files adopted; Bytes their cached
	// bytes (whole hepcache blocks present).
	Complete, Partial int
	Bytes             int64
	// Already counts files a previous run adopted.
	Already int
	// Skipped counts files not adopted; Errors says why, per file.
	Skipped int
	Errors  []error
}

// maxCinfo bounds a .cinfo file: its bitmap for a file of
// xrdpfc.MaxFileSize at the smallest block size, and XCache's access records.
const maxCinfo = 64 << 20

// dataFileMode is the mode of the cache's own data files (and sidecars),
// which adopted files take.
const dataFileMode = 0o644

// Run adopts every file of cfg.XCacheDir that has a .cinfo. hepcache must
// not be serving from cfg.CacheDir meanwhile (its index is built at
// start-up). A file that cannot be adopted is skipped and reported; Run
// fails only when the directories themselves are unusable.
func Run(cfg Config) (Result, error) {
	var res Result
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.BlockSize <= 0 || cfg.Origin == "" {
		return res, errors.New("adopt: block size and origin are required")
	}
	a := &adopter{cfg: cfg, res: &res}
	defer a.close()
	rootPath, err := realDir(cfg.XCacheDir)
	if err != nil {
		return res, fmt.Errorf("xcache dir: %w", err)
	}
	if a.root, err = openDir(rootPath); err != nil {
		return res, fmt.Errorf("xcache dir: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(a.root.fd, &st); err != nil {
		return res, fmt.Errorf("xcache dir: %w", err)
	}
	a.owner = st.Uid
	if cfg.TreeOwner > 0 {
		a.owner = uint32(cfg.TreeOwner)
	}
	for _, s := range cfg.Spaces {
		r, err := realDir(s)
		if err != nil {
			return res, fmt.Errorf("xcache space: %w", err)
		}
		d, err := openDir(r)
		if err != nil {
			return res, fmt.Errorf("xcache space: %w", err)
		}
		a.spaces = append(a.spaces, d)
	}
	roots := cfg.DataDirs
	if len(roots) == 0 {
		roots = []string{cfg.CacheDir}
	}
	// hepcache's directories, each resolved once (disk.OpenTrusted) for
	// the user its files go to.
	uid := cfg.UID
	if uid < 0 && os.Geteuid() != 0 {
		uid = os.Geteuid()
	}
	if a.fs, err = disk.NewConfinedFor(uid, append([]string{cfg.CacheDir}, roots...)...); err != nil {
		return res, fmt.Errorf("cache dir: %w", err)
	}
	for _, d := range append([]string{cfg.CacheDir}, roots...) {
		if err := a.chown(d); err != nil {
			return res, fmt.Errorf("cache dir %s: %w", d, err)
		}
		var st unix.Stat_t
		if err := unix.Stat(d, &st); err != nil {
			return res, fmt.Errorf("cache dir %s: %w", d, err)
		}
		a.skip = append(a.skip, st)
	}
	for i, r := range roots {
		a.dataRoots = append(a.dataRoots, dataRoot{dir: filepath.Clean(r), dev: uint64(a.skip[i+1].Dev)})
	}
	a.walk(a.root, "", 0)
	return res, nil
}

type dataRoot struct {
	dir string
	dev uint64
}

type adopter struct {
	cfg    Config
	res    *Result
	root   *dir   // XCacheDir
	owner  uint32 // of XCacheDir: the tree's owner
	spaces []*dir
	// skip are hepcache's own directories, which may lie inside XCacheDir.
	skip      []unix.Stat_t
	dataRoots []dataRoot
	// fs confines what adoption creates to hepcache's directories.
	fs *disk.Confined
}

func (a *adopter) close() {
	if a.root != nil {
		a.root.close()
	}
	for _, s := range a.spaces {
		s.close()
	}
	if a.fs != nil {
		a.fs.Close()
	}
}

func (a *adopter) fail(p string, err error) {
	a.res.Skipped++
	a.res.Errors = append(a.res.Errors, fmt.Errorf("%s: %w", p, err))
	a.cfg.Logger.Warn("not adopted", "file", p, "err", err)
}

// walk adopts the files of d, the directory rel ("" for the root) of the
// tree, and descends into its subdirectories.
func (a *adopter) walk(d *dir, rel string, depth int) {
	if depth > maxDepth {
		a.fail(d.path, fmt.Errorf("deeper than %d directories: not descended into", maxDepth))
		return
	}
	names, err := d.names()
	if err != nil {
		a.fail(d.path, err)
		return
	}
	for _, name := range names {
		st, err := d.lstat(name)
		if errors.Is(err, unix.ENOENT) {
			continue // a data file adopted with its .cinfo listed before it
		}
		if err != nil {
			a.fail(filepath.Join(d.path, name), err)
			continue
		}
		switch {
		case st.Mode&unix.S_IFMT == unix.S_IFDIR:
			if (rel == "" && name == xrdpfc.TagDir) || a.skipped(&st) {
				continue
			}
			sub, err := d.sub(name)
			if err != nil {
				a.fail(filepath.Join(d.path, name), err)
				continue
			}
			a.walk(sub, rel+"/"+name, depth+1)
			sub.close()
		case strings.HasSuffix(name, xrdpfc.Ext) && len(name) > len(xrdpfc.Ext):
			base := strings.TrimSuffix(name, xrdpfc.Ext)
			if err := a.adoptOne(d, rel+"/"+base, base); err != nil {
				a.fail(filepath.Join(d.path, name), err)
			}
		}
	}
}

func (a *adopter) skipped(st *unix.Stat_t) bool {
	for i := range a.skip {
		if a.skip[i].Dev == st.Dev && a.skip[i].Ino == st.Ino {
			return true
		}
	}
	return false
}

// named is a file of the tree held open, with where its name lives: in
// the tree, and behind a symbolic link of the tree, in a space.
type named struct {
	*node
	dir  *dir // holds name (the link, if any)
	name string
	// link: the name in dir is a symbolic link to target's name in tdir.
	link  bool
	tdir  *dir
	tname string
}

func (f *named) close() {
	f.node.close()
	if f.tdir != nil {
		f.tdir.close()
	}
}

// lookup takes hold of the file name in d, following a symbolic link only
// into a space (XCache's oss.space layout), relative to the space's
// descriptor.
func (a *adopter) lookup(d *dir, name string) (*named, error) {
	st, err := d.lstat(name)
	if err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFLNK {
		n, err := d.open(name)
		if err != nil {
			return nil, err
		}
		return &named{node: n, dir: d, name: name}, nil
	}
	target, err := d.readlink(name)
	if err != nil {
		return nil, err
	}
	target = filepath.Clean(target)
	for _, s := range a.spaces {
		rel, err := filepath.Rel(s.path, target)
		if err != nil || rel == "." || strings.HasPrefix(rel, "..") || !filepath.IsAbs(target) {
			continue
		}
		td, err := s.walkTo(filepath.Dir(rel))
		if err != nil {
			return nil, err
		}
		n, err := td.open(filepath.Base(rel))
		if err != nil {
			td.close()
			return nil, err
		}
		return &named{node: n, dir: d, name: name, link: true, tdir: td, tname: filepath.Base(rel)}, nil
	}
	return nil, fmt.Errorf("%s points to %s, outside the XCache directories given (add it with --space)", filepath.Join(d.path, name), target)
}

// trusted checks what the tree's owner could have planted: a file must be
// a regular file of the owner's with a single name, so that no hard link
// to another user's file (root's /etc/shadow, say) is ever adopted.
func (a *adopter) trusted(n *node) error {
	switch {
	case !n.regular():
		return fmt.Errorf("%s: not a regular file", n.path)
	case n.st.Uid != a.owner:
		return fmt.Errorf("%s: owned by uid %d, not by the XCache tree's owner (uid %d)", n.path, n.st.Uid, a.owner)
	case n.st.Nlink != 1:
		return fmt.Errorf("%s: %d hard links (XCache's files have one): refused", n.path, n.st.Nlink)
	case n.st.Mode&0o022 != 0:
		// Its bytes (or, for a .cinfo, its record of them) may be another
		// user's: a copy with them would be served as cached bytes.
		return fmt.Errorf("%s: writable by group or others (mode %04o): another user could have changed it; not adopted (fetched again when read)", n.path, n.st.Mode&0o7777)
	}
	return nil
}

// adoptOne adopts the data file base of d (rel in XCache's namespace)
// with its .cinfo beside it.
func (a *adopter) adoptOne(d *dir, rel, base string) error {
	key := cache.Key{Origin: a.cfg.Origin, Path: rel}
	ciFile, err := a.lookup(d, base+xrdpfc.Ext)
	if err != nil {
		return err
	}
	defer ciFile.close()
	if err := a.trusted(ciFile.node); err != nil {
		return err
	}
	b, err := ciFile.readAll(maxCinfo)
	if err != nil {
		return err
	}
	ci, err := xrdpfc.Parse(b)
	if err != nil {
		return err
	}
	src, err := a.lookup(d, base)
	if err != nil {
		return fmt.Errorf("data file: %w", err)
	}
	defer src.close()
	var droot *dataRoot
	for i := range a.dataRoots {
		if a.dataRoots[i].dev == uint64(src.st.Dev) {
			droot = &a.dataRoots[i]
			break
		}
	}
	if droot == nil {
		return fmt.Errorf("data file %s is on a file system without a hepcache data directory: adoption links files and never copies; put cache.dir (or a cache.data_dirs entry) on that file system", src.path)
	}
	dst := cache.DataPath(droot.dir, key)
	meta := cache.MetaPath(a.cfg.CacheDir, key)
	if _, err := a.fs.Stat(meta); err == nil {
		if a.sameFile(dst, src.node) {
			a.res.Already++
			return a.removeXCache(rel, ciFile, src)
		}
		return errors.New("hepcache already caches this path")
	}
	if err := a.trusted(src.node); err != nil {
		return fmt.Errorf("data file: %w", err)
	}
	if src.st.Size > ci.FileSize {
		return fmt.Errorf("data file of %d bytes, .cinfo says %d", src.st.Size, ci.FileSize)
	}
	side, err := a.sidecar(key, ci, src.node, rel)
	if err != nil {
		return err
	}
	if side.Durable.Len() > 0 && side.Durable.Count() == 0 {
		return errors.New("no block the .cinfo records as present is in the data file")
	}
	if err := a.mkdirAll(filepath.Dir(dst)); err != nil {
		return err
	}
	if err := a.link(src.node, dst); err != nil {
		return err
	}
	// hepcache's data files have the file's full size (XCache's grow as
	// blocks arrive): extend with a hole, which XCache never reads.
	if src.st.Size < ci.FileSize {
		f, err := a.fs.OpenFile(dst, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		err = f.Truncate(ci.FileSize)
		f.Close()
		if err != nil {
			return err
		}
	}
	if a.cfg.UID >= 0 || a.cfg.GID >= 0 {
		if err := src.chown(a.cfg.UID, a.cfg.GID); err != nil {
			return err
		}
	}
	if err := src.chmod(dataFileMode); err != nil {
		return err
	}
	if err := a.mkdirAll(filepath.Dir(meta)); err != nil {
		return err
	}
	if err := disk.WriteFileAtomic(a.fs, meta, side.Marshal(), true); err != nil {
		return fmt.Errorf("write sidecar: %w", err)
	}
	if err := a.chown(meta); err != nil {
		return err
	}
	if side.Complete() {
		a.res.Complete++
	} else {
		a.res.Partial++
	}
	a.res.Bytes += durableBytes(side)
	return a.removeXCache(rel, ciFile, src)
}

// link gives the inode src holds the name dst in hepcache's data tree.
func (a *adopter) link(src *node, dst string) error {
	dd, err := a.fs.OpenDir(filepath.Dir(dst))
	if err != nil {
		return err
	}
	defer dd.Close()
	if err := src.linkInto(int(dd.Fd()), filepath.Base(dst)); err != nil {
		if !errors.Is(err, unix.EEXIST) || !a.sameFile(dst, src) {
			return fmt.Errorf("link into the hepcache data tree: %w", err)
		}
	}
	return nil
}

// sameFile reports whether p, in hepcache's directories, is n's inode.
func (a *adopter) sameFile(p string, n *node) bool {
	fi, err := a.fs.Stat(p)
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && uint64(st.Dev) == uint64(n.st.Dev) && st.Ino == n.st.Ino
}

// sidecar maps XCache's blocks onto hepcache's: a hepcache block is present
// when every XCache block it overlaps is (the two sizes need not divide
// each other; a partly present block is fetched again), and when its bytes
// lie inside the data file and were written (no hole): a .cinfo cannot
// vouch for bytes the file does not have.
func (a *adopter) sidecar(key cache.Key, ci *xrdpfc.Info, src *node, rel string) (*sidecar.Info, error) {
	data, err := src.reopen(os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer data.Close()
	bs := a.cfg.BlockSize
	// The origin's modification time is unknown (XCache keeps none): the
	// copy is confirmed with the origin's file on its first open.
	side := sidecar.New(key.Origin, key.Path, ci.FileSize, bs, time.Time{}, "", ci.Created)
	side.Flags |= sidecar.FlagUnconfirmed
	side.LastAccess = ci.LastAccess()
	side.AccessCount = ci.AccessCount
	for _, r := range ci.Records {
		side.AddRecord(sidecar.Access{Open: r.Attach, Close: r.Detach, BytesHit: r.BytesHit, BytesMissed: r.BytesMissed, Bypass: r.Bypass})
	}
	tags := a.tags(rel, ci)
	for b := range side.Durable.Len() {
		off := int64(b) * bs
		n := min(bs, ci.FileSize-off)
		if off+n > src.st.Size || holeIn(data, off, n) {
			continue
		}
		present := true
		for x := off / ci.BlockSize; x*ci.BlockSize < off+n; x++ {
			if !ci.Synced.Test(int(x)) {
				present = false
				break
			}
		}
		if !present {
			continue
		}
		side.Durable.Set(b)
		if tags != nil {
			if crc, ok := tags.CRC(off, n, ci.FileSize); ok {
				side.SetBlockCRC(b, crc)
			}
		}
	}
	return side, nil
}

// tags reads the file's XrdOssCsi page CRCs, nil without them.
func (a *adopter) tags(rel string, ci *xrdpfc.Info) *xrdpfc.Tags {
	if ci.CkSumState&xrdpfc.CkSumCache == 0 {
		return nil
	}
	t, err := a.openTag(rel)
	if err != nil {
		return nil
	}
	defer t.close()
	if a.trusted(t.node) != nil {
		return nil
	}
	b, err := t.readAll(xrdpfc.TagFileSize(ci.FileSize))
	if err != nil {
		return nil
	}
	tags, err := xrdpfc.ParseTags(b)
	if err != nil {
		a.cfg.Logger.Warn("ignoring the page checksums of an adopted file", "file", t.path, "err", err)
		return nil
	}
	return tags
}

// openTag takes hold of the tag file of rel (<root>/.xrdt/rel.xrdt).
func (a *adopter) openTag(rel string) (*named, error) {
	td, err := a.root.walkTo(xrdpfc.TagDir + filepath.Dir(rel))
	if err != nil {
		return nil, err
	}
	f, err := a.lookup(td, filepath.Base(rel)+xrdpfc.TagExt)
	if err != nil {
		td.close()
		return nil, err
	}
	// lookup's result names td: hand its closing to f.
	if f.tdir == nil {
		f.tdir = td
	} else {
		td.close()
	}
	return f, nil
}

// removeXCache drops XCache's names of an adopted file (the data file's
// name and, behind a symbolic link, the link's target name; the .cinfo;
// the tag file), unless Keep. Each is removed only if it still names the
// inode adopted.
func (a *adopter) removeXCache(rel string, ci, data *named) error {
	if a.cfg.Keep {
		return nil
	}
	var errs []error
	for _, f := range []*named{data, ci} {
		errs = append(errs, a.unlink(f))
	}
	if t, err := a.openTag(rel); err == nil {
		errs = append(errs, a.unlink(t))
		t.close()
	}
	return errors.Join(errs...)
}

// unlink removes the names of f: the link in the tree and its target in a
// space, or the file's own name.
func (a *adopter) unlink(f *named) error {
	if !f.link {
		return f.dir.unlinkIf(f.name, f.node)
	}
	if err := f.tdir.unlinkIf(f.tname, f.node); err != nil {
		return err
	}
	st, err := f.dir.lstat(f.name)
	if err != nil || st.Mode&unix.S_IFMT != unix.S_IFLNK {
		return nil // gone, or no longer the link adopted
	}
	if err := unix.Unlinkat(f.dir.fd, f.name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return &os.PathError{Op: "remove", Path: filepath.Join(f.dir.path, f.name), Err: err}
	}
	return nil
}

// mkdirAll creates dir (in hepcache's directories) and its missing
// parents, owned as configured.
func (a *adopter) mkdirAll(dir string) error {
	if _, err := a.fs.Stat(dir); err == nil {
		return nil
	}
	if err := a.mkdirAll(filepath.Dir(dir)); err != nil {
		return err
	}
	if err := a.fs.MkdirAll(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return a.chown(dir)
}

// chown gives p, in hepcache's directories, the configured owner.
func (a *adopter) chown(p string) error {
	if a.cfg.UID < 0 && a.cfg.GID < 0 {
		return nil
	}
	return a.fs.Lchown(p, a.cfg.UID, a.cfg.GID)
}

func realDir(d string) (string, error) {
	abs, err := filepath.Abs(d)
	if err != nil {
		return "", err
	}
	r, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(r)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return "", fmt.Errorf("%s: not a directory", d)
	}
	return r, nil
}

// durableBytes is the size of the blocks a sidecar records as present.
func durableBytes(in *sidecar.Info) int64 {
	var n int64
	for b := range in.Durable.Len() {
		if in.Durable.Test(b) {
			n += min(in.BlockSize, in.FileSize-int64(b)*in.BlockSize)
		}
	}
	return n
}
