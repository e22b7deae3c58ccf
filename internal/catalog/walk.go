package catalog

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hepcache/hepcache/disk"
	"github.com/hepcache/hepcache/internal/sidecar"
)

// The walk goes through the sidecar tree (Dir/meta) and the data trees of
// the disks in service together, one directory at a time, the sidecars
// listed before the data files (a data file is created before its
// sidecar, so a sidecar listed has its data file listed after, unless it
// was evicted in between). With the two listings of a directory side by
// side, and no stat or read of a file the catalogue knows:
//
//   - a sidecar the catalogue knows is marked seen; one it does not know
//     (no snapshot, files adopted or added while the cache was stopped,
//     files of the run that crashed) is read and its file added, on the
//     disk whose listing holds its data file (the newer copy if several
//     do; a sidecar whose data file no disk in service holds is removed,
//     kept while a disk is out);
//   - a data file without a sidecar (a crash before its first block was
//     durable, or between the sidecar's removal and its own) is removed,
//     unless the cache is writing it now (LoadConfig.RemoveData decides);
//   - at the end, files of a snapshot whose sidecars are gone (evicted
//     offline, removed by hand) leave the catalogue, unless opened since;
//   - after a snapshot that is an approximation (not written at a clean
//     shutdown), the sidecars changed since it was written (their mtime)
//     are read again, and their files' figures and places corrected.
//
// Listing a directory costs a few system calls for thousands of entries,
// so the walk of a catalogue loaded from a snapshot is quick next to
// reading every sidecar, which only a start without one needs.

// walkResult counts what the walk did.
type walkResult struct {
	complete                     bool
	sidecars, read, added        int
	refreshed                    int
	removedSidecars, removedData int
	// forgotten are the snapshot's files whose sidecars were gone.
	forgotten int
	errs      []error
}

func (r *walkResult) fail(err error) {
	r.complete = false
	if len(r.errs) < 5 {
		r.errs = append(r.errs, err)
	}
}

func (r *walkResult) log(l *slog.Logger, took time.Duration, fromSnapshot bool) {
	msg := "cache index checked against the cache's trees"
	if !fromSnapshot {
		msg = "cache index walk of the sidecars done"
	}
	args := []any{"sidecars", r.sidecars, "read", r.read, "added", r.added, "read_again", r.refreshed,
		"removed_sidecars", r.removedSidecars, "removed_data_files", r.removedData,
		"forgotten", r.forgotten, "took", took.Round(time.Millisecond)}
	if !r.complete {
		args = append(args, "incomplete", errors.Join(r.errs...))
	}
	l.Info(msg, args...)
}

type walker struct {
	c   *Catalog
	cfg *LoadConfig
	ctx context.Context
	// loaded: the catalogue is complete already (a snapshot); else the
	// walk counts the progress of the load.
	loaded bool
	// since: the sidecars changed since (not zero) are read again.
	since time.Time
	jobs  chan walkJob
	wg    sync.WaitGroup

	mu  sync.Mutex // protects res
	res walkResult
	// listed and done count sidecars for the progress.
	listed, done atomic.Int64
	last         atomic.Int64 // unix ns of the last progress line
}

// walkJob is a sidecar to read: one the catalogue does not know, or
// (refresh) one changed since an approximate snapshot was written.
type walkJob struct {
	meta, rel string
	refresh   bool
	// ds are the disks whose listing holds the data file; unsure: a disk
	// is out of service, or its listing failed.
	ds     []int
	unsure bool
}

func (c *Catalog) walk(ctx context.Context, cfg *LoadConfig, loaded bool, since time.Time) walkResult {
	w := &walker{c: c, cfg: cfg, ctx: ctx, loaded: loaded, since: since, jobs: make(chan walkJob, 256)}
	w.res.complete = true
	w.last.Store(time.Now().UnixNano())
	for i := 0; i < cfg.Workers; i++ {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for j := range w.jobs {
				w.read(j)
			}
		}()
	}
	w.dir("")
	close(w.jobs)
	w.wg.Wait()
	if ctx.Err() != nil {
		w.res.fail(ctx.Err())
	}
	if !loaded {
		c.load.total.Store(w.listed.Load())
	}
	return w.res
}

func (w *walker) count(f func(*walkResult)) {
	w.mu.Lock()
	f(&w.res)
	w.mu.Unlock()
}

// progress counts a sidecar dealt with.
func (w *walker) progress() {
	n := w.done.Add(1)
	if w.loaded {
		return
	}
	w.c.load.loaded.Store(n)
	now := time.Now().UnixNano()
	if last := w.last.Load(); now-last >= int64(progressEvery) && w.last.CompareAndSwap(last, now) {
		w.cfg.Logger.Info(fmt.Sprintf("cache index loading %d of %d found so far", n, w.listed.Load()))
	}
}

// dir walks directory rel (relative to the trees' roots, "/"-separated).
func (w *walker) dir(rel string) {
	cfg := w.cfg
	if w.ctx.Err() != nil {
		return
	}
	if cfg.Pace != nil {
		if err := cfg.Pace(w.ctx); err != nil {
			w.count(func(r *walkResult) { r.fail(err) })
			return
		}
	}
	metaDir := filepath.Join(cfg.Dir, "meta", filepath.FromSlash(rel))
	ments, err := cfg.FS.ReadDir(metaDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		w.count(func(r *walkResult) { r.fail(err) })
		return
	}
	subdirs := map[string]bool{}
	var sidecars []string
	metaSet := map[string]bool{}
	var changed map[string]bool // since w.since
	for _, e := range ments {
		switch name := e.Name(); {
		case e.IsDir():
			subdirs[name] = true
		case !e.Type().IsRegular():
		case strings.HasSuffix(name, sidecarSuffix+".tmp"):
			cfg.FS.Remove(filepath.Join(metaDir, name)) // a sidecar write of an old version interrupted
		case strings.HasSuffix(name, sidecarSuffix):
			base := strings.TrimSuffix(name, sidecarSuffix)
			sidecars = append(sidecars, base)
			metaSet[base] = true
			if !w.since.IsZero() {
				if changed == nil {
					changed = map[string]bool{}
				}
				// (Not e.Info(): a directory read through a confined
				// file system names no path to stat by.)
				if fi, err := cfg.FS.Stat(filepath.Join(metaDir, name)); err != nil || !fi.ModTime().Before(w.since) {
					changed[base] = true
				}
			}
		}
	}
	// The data files, listed after the sidecars.
	n := len(cfg.Disks)
	data := make([]map[string]bool, n)
	unsure := false // a disk out of service or unlisted: its files are unknown
	for d := 0; d < n; d++ {
		if !cfg.Up(d) {
			unsure = true
			continue
		}
		ents, err := cfg.FS.ReadDir(filepath.Join(cfg.Disks[d].Root, "data", filepath.FromSlash(rel)))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			unsure = true
			w.count(func(r *walkResult) { r.fail(err) })
			continue
		}
		data[d] = map[string]bool{}
		for _, e := range ents {
			if e.IsDir() {
				subdirs[e.Name()] = true
			} else if e.Type().IsRegular() {
				data[d][e.Name()] = true
			}
		}
	}
	w.listed.Add(int64(len(sidecars)))
	w.sidecars(rel, sidecars, changed, data, unsure)
	// Data files without a sidecar.
	for d := range data {
		for name := range data[d] {
			if !metaSet[name] {
				cfg.RemoveData(d, filepath.Join(cfg.Disks[d].Root, "data", filepath.FromSlash(rel), name), true)
				w.count(func(r *walkResult) { r.removedData++ })
			}
		}
	}
	names := make([]string, 0, len(subdirs))
	for s := range subdirs {
		names = append(names, s)
	}
	sort.Strings(names)
	for _, s := range names {
		w.dir(path.Join(rel, s))
	}
}

// sidecars deals with the sidecars of directory rel: those the catalogue
// knows are checked under one lock, the others (and those of an
// approximate snapshot changed since it was written) are read by the
// workers.
func (w *walker) sidecars(rel string, bases []string, changed map[string]bool, data []map[string]bool, unsure bool) {
	c, cfg := w.c, w.cfg
	var staleMeta []string
	type dup struct {
		d int
		p string
	}
	var dups []dup
	var unknown []walkJob
	c.mu.Lock()
	for _, base := range bases {
		relFile := path.Join(rel, base)
		var ds []int
		for d := range data {
			if data[d][base] {
				ds = append(ds, d)
			}
		}
		slot := none
		if odir, p := splitRel(relFile); odir != "" {
			for _, o := range c.originDirs[odir] {
				if slot = c.findIDLocked(o, p); slot != none {
					break
				}
			}
		}
		meta := filepath.Join(cfg.Dir, "meta", filepath.FromSlash(relFile)) + sidecarSuffix
		if slot == none {
			unknown = append(unknown, walkJob{meta: meta, rel: relFile, ds: ds, unsure: unsure})
			continue
		}
		it := c.at(slot)
		if it.flags&flagVerified != 0 {
			continue // the cache has used it since the start: it knows better
		}
		if changed[base] {
			unknown = append(unknown, walkJob{meta: meta, rel: relFile, ds: ds, unsure: unsure, refresh: true})
			continue
		}
		it.flags |= flagVerified
		on := -1
		for _, d := range ds {
			if d == int(it.disk) {
				on = d
			}
		}
		switch {
		case on >= 0:
			for _, d := range ds {
				if d != on { // a stale copy (placed again while a disk was out)
					dups = append(dups, dup{d, filepath.Join(cfg.Disks[d].Root, "data", filepath.FromSlash(relFile))})
				}
			}
		case len(ds) > 0:
			// The snapshot had it elsewhere: trust the trees.
			c.diskAddLocked(int(it.disk), -1, -it.bytes)
			it.disk = uint8(ds[0])
			c.diskAddLocked(ds[0], 1, it.bytes)
		case data[it.disk] == nil:
			// Its disk is out of service or unlisted: nothing to say.
		case it.open == 0:
			// Its data file is gone: so is the copy.
			c.load.removedLocked(c.keyOf(slot))
			c.removeLocked(slot)
			staleMeta = append(staleMeta, meta)
		}
	}
	c.mu.Unlock()
	for _, m := range staleMeta {
		cfg.FS.Remove(m)
	}
	for _, d := range dups {
		cfg.RemoveData(d.d, d.p, false)
	}
	w.count(func(r *walkResult) {
		r.sidecars += len(bases)
		r.removedSidecars += len(staleMeta)
		r.removedData += len(dups)
	})
	for range len(bases) - len(unknown) {
		w.progress()
	}
	for _, j := range unknown {
		select {
		case w.jobs <- j:
		case <-w.ctx.Done():
			return
		}
	}
}

// read reads a sidecar the catalogue does not know and adds its file.
func (w *walker) read(j walkJob) {
	c, cfg := w.c, w.cfg
	defer w.progress()
	if w.ctx.Err() != nil {
		return
	}
	b, err := readAll(cfg.FS, j.meta)
	if errors.Is(err, fs.ErrNotExist) {
		return // evicted meanwhile
	}
	if err != nil {
		cfg.Logger.Warn("index: cannot read sidecar", "path", j.meta, "err", err)
		return
	}
	w.count(func(r *walkResult) { r.read++ })
	if cfg.Note != nil {
		cfg.Note(j.meta)
	}
	dataPath := func(d int) string { return filepath.Join(cfg.Disks[d].Root, "data", filepath.FromSlash(j.rel)) }
	in, err := sidecar.Unmarshal(b)
	var k Key
	if err == nil {
		k = Key{Origin: in.Origin, Path: in.Path}
		if MetaPath(cfg.Dir, k) != j.meta {
			err = fmt.Errorf("sidecar names %s, which belongs elsewhere", k)
		}
	}
	if err == nil && len(j.ds) == 0 {
		if j.unsure {
			return // perhaps on a disk out of service: taken back with it
		}
		err = errors.New("no data disk holds its data file")
	}
	if err != nil {
		cfg.Logger.Warn("index: removing unusable cached file", "sidecar", j.meta, "err", err)
		cfg.FS.Remove(j.meta)
		for _, d := range j.ds {
			cfg.RemoveData(d, dataPath(d), false)
		}
		w.count(func(r *walkResult) { r.removedSidecars++; r.removedData += len(j.ds) })
		return
	}
	d := j.ds[0]
	if len(j.ds) > 1 {
		// A crash mid-placement, or a disk added back to data_dirs after
		// its file was fetched again elsewhere: the newer copy is the one
		// its sidecar describes.
		var newest time.Time
		for _, x := range j.ds {
			if st, err := cfg.FS.Stat(dataPath(x)); err == nil && st.ModTime().After(newest) {
				d, newest = x, st.ModTime()
			}
		}
		for _, x := range j.ds {
			if x != d {
				cfg.RemoveData(x, dataPath(x), false)
				w.count(func(r *walkResult) { r.removedData++ })
			}
		}
	}
	c.mu.Lock()
	added := false
	if i := c.findLocked(k); j.refresh && i != none {
		if it := c.at(i); it.flags&flagVerified == 0 { // else the cache has used it since: it knows better
			c.setFiguresLocked(i, DurableBytes(in), d)
			// Both times are at most the last access: the sidecar's is
			// written at closes, the snapshot's may be of an open since.
			c.reorderLocked(i, max(it.access, unixSeconds(in.LastAccess)))
		}
	} else {
		added = c.addLoadedLocked(k, DurableBytes(in), unixSeconds(in.LastAccess), d, true, true, cfg.Up)
	}
	c.mu.Unlock()
	if added {
		w.count(func(r *walkResult) { r.added++ })
	}
	if j.refresh {
		w.count(func(r *walkResult) { r.refreshed++ })
	}
}

// readAll reads the whole file name.
func readAll(fsys disk.FS, name string) ([]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, err
	}
	return b, nil
}
