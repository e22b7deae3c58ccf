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
	// (oss.space data and meta, pfc.spaces): symbolic links are followed
	// only into XCacheDir and these.
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
	var err error
	if a.root, err = realDir(cfg.XCacheDir); err != nil {
		return res, fmt.Errorf("xcache dir: %w", err)
	}
	a.allowed = []string{a.root}
	for _, s := range cfg.Spaces {
		r, err := realDir(s)
		if err != nil {
			return res, fmt.Errorf("xcache space: %w", err)
		}
		a.allowed = append(a.allowed, r)
	}
	roots := cfg.DataDirs
	if len(roots) == 0 {
		roots = []string{cfg.CacheDir}
	}
	for _, d := range append([]string{cfg.CacheDir}, roots...) {
		if err := a.mkdirAll(d); err != nil {
			return res, fmt.Errorf("cache dir %s: %w", d, err)
		}
	}
	for _, r := range roots {
		rr, err := realDir(r)
		if err != nil {
			return res, err
		}
		dev, err := deviceOf(rr)
		if err != nil {
			return res, err
		}
		a.dataRoots = append(a.dataRoots, dataRoot{dir: r, dev: dev})
		a.skip = append(a.skip, rr)
	}
	if rc, err := realDir(cfg.CacheDir); err == nil {
		a.skip = append(a.skip, rc)
	}
	err = filepath.WalkDir(a.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			a.fail(p, err)
			return nil
		}
		if d.IsDir() {
			if p == filepath.Join(a.root, xrdpfc.TagDir) || a.skipped(p) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, xrdpfc.Ext) {
			if err := a.adoptOne(strings.TrimSuffix(p, xrdpfc.Ext)); err != nil {
				a.fail(p, err)
			}
		}
		return nil
	})
	return res, err
}

type dataRoot struct {
	dir string
	dev uint64
}

type adopter struct {
	cfg       Config
	res       *Result
	root      string   // XCacheDir, symbolic links resolved
	allowed   []string // where XCache's names may point
	skip      []string // hepcache's own directories inside XCacheDir
	dataRoots []dataRoot
}

func (a *adopter) fail(p string, err error) {
	a.res.Skipped++
	a.res.Errors = append(a.res.Errors, fmt.Errorf("%s: %w", p, err))
	a.cfg.Logger.Warn("not adopted", "file", p, "err", err)
}

func (a *adopter) skipped(p string) bool {
	for _, s := range a.skip {
		if p == s {
			return true
		}
	}
	return false
}

// adoptOne adopts the data file at name (in XCache's namespace) with its
// .cinfo beside it.
func (a *adopter) adoptOne(name string) error {
	rel, err := filepath.Rel(a.root, name)
	if err != nil || strings.HasPrefix(rel, "..") {
		return fmt.Errorf("outside %s", a.root)
	}
	key := cache.Key{Origin: a.cfg.Origin, Path: "/" + filepath.ToSlash(rel)}
	cinfoPath, err := a.resolve(name + xrdpfc.Ext)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(cinfoPath)
	if err != nil {
		return err
	}
	ci, err := xrdpfc.Parse(b)
	if err != nil {
		return err
	}
	src, err := a.resolve(name)
	if err != nil {
		return fmt.Errorf("data file: %w", err)
	}
	st, err := os.Lstat(src)
	if err != nil {
		return fmt.Errorf("data file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("data file %s: not a regular file", src)
	}
	if st.Size() > ci.FileSize {
		return fmt.Errorf("data file of %d bytes, .cinfo says %d", st.Size(), ci.FileSize)
	}
	sst := st.Sys().(*syscall.Stat_t)
	var droot *dataRoot
	for i := range a.dataRoots {
		if a.dataRoots[i].dev == uint64(sst.Dev) {
			droot = &a.dataRoots[i]
			break
		}
	}
	if droot == nil {
		return fmt.Errorf("data file %s is on a file system without a hepcache data directory: adoption links files and never copies; put cache.dir (or a cache.data_dirs entry) on that file system", src)
	}
	dst := cache.DataPath(droot.dir, key)
	meta := cache.MetaPath(a.cfg.CacheDir, key)
	if _, err := os.Lstat(meta); err == nil {
		if same(dst, sst) {
			a.res.Already++
			return a.removeXCache(name, src, cinfoPath)
		}
		return errors.New("hepcache already caches this path")
	}
	side := a.sidecar(key, ci, src)
	if err := a.mkdirAll(filepath.Dir(dst)); err != nil {
		return err
	}
	if err := os.Link(src, dst); err != nil {
		if !errors.Is(err, fs.ErrExist) || !same(dst, sst) {
			return fmt.Errorf("link into the hepcache data tree: %w", err)
		}
	}
	// hepcache's data files have the file's full size (XCache's grow as
	// blocks arrive): extend with a hole, which XCache never reads.
	if st.Size() < ci.FileSize {
		if err := os.Truncate(dst, ci.FileSize); err != nil {
			return err
		}
	}
	if err := a.chown(dst); err != nil {
		return err
	}
	if err := a.mkdirAll(filepath.Dir(meta)); err != nil {
		return err
	}
	if err := disk.WriteFileAtomic(disk.OS{}, meta, side.Marshal(), true); err != nil {
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
	return a.removeXCache(name, src, cinfoPath)
}

// sidecar maps XCache's blocks onto hepcache's: a hepcache block is present
// when every XCache block it overlaps is (the two sizes need not divide
// each other; a partly present block is fetched again).
func (a *adopter) sidecar(key cache.Key, ci *xrdpfc.Info, src string) *sidecar.Info {
	bs := a.cfg.BlockSize
	// The origin's modification time is unknown (XCache keeps none): a
	// partial copy is matched with the origin's file by size when resumed.
	side := sidecar.New(key.Origin, key.Path, ci.FileSize, bs, time.Time{}, "", ci.Created)
	side.LastAccess = ci.LastAccess()
	side.AccessCount = ci.AccessCount
	for _, r := range ci.Records {
		side.AddRecord(sidecar.Access{Open: r.Attach, Close: r.Detach, BytesHit: r.BytesHit, BytesMissed: r.BytesMissed, Bypass: r.Bypass})
	}
	tags := a.tags(key, ci)
	for b := range side.Durable.Len() {
		off := int64(b) * bs
		n := min(bs, ci.FileSize-off)
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
	return side
}

// tags reads the file's XrdOssCsi page CRCs, nil without them.
func (a *adopter) tags(key cache.Key, ci *xrdpfc.Info) *xrdpfc.Tags {
	if ci.CkSumState&xrdpfc.CkSumCache == 0 {
		return nil
	}
	p, err := a.resolve(filepath.Join(a.root, xrdpfc.TagDir, filepath.FromSlash(key.Path)) + xrdpfc.TagExt)
	if err != nil {
		return nil
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil
	}
	t, err := xrdpfc.ParseTags(b)
	if err != nil {
		a.cfg.Logger.Warn("ignoring the page checksums of an adopted file", "file", p, "err", err)
		return nil
	}
	return t
}

// removeXCache drops XCache's names of an adopted file (the data file's
// name and, behind a symbolic link, the link's target name; the .cinfo;
// the tag file), unless Keep.
func (a *adopter) removeXCache(name, src, cinfo string) error {
	if a.cfg.Keep {
		return nil
	}
	rel, _ := filepath.Rel(a.root, name)
	tag := filepath.Join(a.root, xrdpfc.TagDir, rel) + xrdpfc.TagExt
	var errs []error
	for _, p := range []string{name, src, name + xrdpfc.Ext, cinfo, tag} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// resolve follows p's symbolic links and returns the real path, which
// must lie in XCacheDir or one of the spaces: adoption never touches a
// file outside the directories it was given.
func (a *adopter) resolve(p string) (string, error) {
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", err
	}
	for _, d := range a.allowed {
		if r == d || strings.HasPrefix(r, d+string(filepath.Separator)) {
			return r, nil
		}
	}
	return "", fmt.Errorf("%s points to %s, outside the XCache directories given (add it with --space)", p, r)
}

// mkdirAll creates dir and its missing parents, owned as configured.
func (a *adopter) mkdirAll(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := a.mkdirAll(filepath.Dir(dir)); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return a.chown(dir)
}

func (a *adopter) chown(p string) error {
	if a.cfg.UID < 0 && a.cfg.GID < 0 {
		return nil
	}
	return os.Lchown(p, a.cfg.UID, a.cfg.GID)
}

// same reports whether p is the file st describes.
func same(p string, st *syscall.Stat_t) bool {
	var ds syscall.Stat_t
	return syscall.Stat(p, &ds) == nil && ds.Dev == st.Dev && ds.Ino == st.Ino
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

func deviceOf(dir string) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return 0, &fs.PathError{Op: "stat", Path: dir, Err: err}
	}
	return uint64(st.Dev), nil
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
