package bench

import (
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/sidecar"
	"github.com/hepcache/hepcache/origin"
)

// PurgeConfig configures the space-management benchmark.
type PurgeConfig struct {
	// Dir is the cache directory to fill. Required.
	Dir string
	// Files is the number of cached files. Default 100 000.
	Files int
	// FileSize is the size each sidecar records (the data files are
	// sparse, so the disk holds none of it). Default 1 MiB.
	FileSize int64
	// Out receives the report, Progress the progress lines.
	Out, Progress io.Writer
}

// PurgeResult holds the figures.
type PurgeResult struct {
	Files          int           `json:"files"`
	Rebuild        time.Duration `json:"rebuild_ns"`
	Purge          time.Duration `json:"purge_ns"`
	Evicted        int           `json:"evicted_files"`
	Select         time.Duration `json:"select_ns"`
	TreeWalk       time.Duration `json:"tree_walk_ns"`
	PurgePerFile   time.Duration `json:"purge_per_evicted_file_ns"`
	WalkOverPurge  float64       `json:"walk_over_purge"`
	RebuildPerFile time.Duration `json:"rebuild_per_file_ns"`
}

// Purge fills a cache directory with Files cached files, then measures the
// index load from the sidecars (no snapshot), one purge from above the high watermark to the low
// one, and, as the anchor, one walk of the whole tree reading every sidecar:
// the work a purge that scans the cache (XCache's) does on every pass.
func Purge(cfg PurgeConfig) (*PurgeResult, error) {
	if cfg.Dir == "" {
		return nil, fmt.Errorf("bench purge: a directory is required")
	}
	if cfg.Files == 0 {
		cfg.Files = 100_000
	}
	if cfg.FileSize == 0 {
		cfg.FileSize = 1 << 20
	}
	if cfg.Out == nil {
		cfg.Out = os.Stdout
	}
	if cfg.Progress == nil {
		cfg.Progress = os.Stderr
	}
	os.RemoveAll(cfg.Dir)
	fmt.Fprintf(cfg.Progress, "bench purge: writing %d cached files under %s\n", cfg.Files, cfg.Dir)
	if err := fillCache(cfg.Dir, cfg.Files, cfg.FileSize); err != nil {
		return nil, err
	}
	total := int64(cfg.Files) * cfg.FileSize
	quiet := slog.New(slog.DiscardHandler)
	// Usage sits at 96 % of the capacity: above the 95 % high watermark, so
	// one purge evicts down to 90 %.
	cc := &cache.Config{
		Dir:           cfg.Dir,
		Origins:       origin.ResolverFunc(nil),
		Capacity:      total * 100 / 96,
		PurgeInterval: time.Hour,
		SyncInterval:  time.Hour,
		Logger:        quiet,
	}
	dropCaches()
	start := time.Now()
	c, err := cache.New(cc)
	if err != nil {
		return nil, err
	}
	// The index loads in the background (no snapshot here: from the
	// sidecars); the cache serves meanwhile.
	<-c.IndexLoaded()
	res := &PurgeResult{Files: cfg.Files, Rebuild: time.Since(start)}
	// The cache purges at start-up by itself, being over its high
	// watermark; wait for that purge and read its figures.
	st := c.Stats()
	for deadline := time.Now().Add(5 * time.Minute); st.PurgeRuns.Load() == 0; {
		if time.Now().After(deadline) {
			c.Close()
			return nil, fmt.Errorf("no purge within 5 minutes")
		}
		time.Sleep(time.Millisecond)
	}
	res.Purge = time.Duration(st.LastPurgeNanos.Load())
	res.Select = time.Duration(st.LastPurgeSelectNanos.Load())
	res.Evicted = int(st.LastPurgeFiles.Load())
	u, _ := c.Usage()
	c.Close()
	if u.Files+res.Evicted != cfg.Files {
		return nil, fmt.Errorf("index holds %d files after evicting %d of %d", u.Files, res.Evicted, cfg.Files)
	}
	if u.Used > u.Low {
		return nil, fmt.Errorf("after purge usage %d is above the low watermark %d", u.Used, u.Low)
	}

	dropCaches()
	start = time.Now()
	walked, err := walkSidecars(filepath.Join(cfg.Dir, "meta"))
	if err != nil {
		return nil, err
	}
	res.TreeWalk = time.Since(start)
	if walked < cfg.Files-res.Evicted {
		return nil, fmt.Errorf("walk found %d sidecars", walked)
	}
	if res.Evicted > 0 {
		res.PurgePerFile = res.Purge / time.Duration(res.Evicted)
	}
	res.RebuildPerFile = res.Rebuild / time.Duration(cfg.Files)
	res.WalkOverPurge = float64(res.TreeWalk) / float64(max(res.Select, 1))

	tw := tabwriter.NewWriter(cfg.Out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(cfg.Out, "\nSpace management with %d cached files (index in memory, LRU order):\n\n", cfg.Files)
	fmt.Fprintln(tw, "step\ttime\tper file\t")
	fmt.Fprintf(tw, "index load without a snapshot (read every sidecar, while serving)\t%v\t%v\t\n", res.Rebuild.Round(time.Millisecond), res.RebuildPerFile)
	fmt.Fprintf(tw, "purge 96%% -> 90%%: %d files evicted\t%v\t%v\t\n", res.Evicted, res.Purge.Round(time.Microsecond), res.PurgePerFile)
	fmt.Fprintf(tw, "  of which choosing the victims (index)\t%v\t\t\n", res.Select.Round(time.Microsecond))
	fmt.Fprintf(tw, "anchor: choosing by a walk of the whole tree (XCache, every purge pass)\t%v\t\t\n", res.TreeWalk.Round(time.Millisecond))
	tw.Flush()
	fmt.Fprintf(cfg.Out, "\nChoosing what to evict costs O(files evicted) from the index: %.0fx less than one scan of the\ntree, which a scanning purge repeats every pass; deleting costs the same either way (unlinks).\n", res.WalkOverPurge)
	return res, nil
}

// fillCache writes n sidecars and sparse data files as the cache lays them
// out, with distinct last-access times.
func fillCache(dir string, n int, size int64) error {
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	base := time.Now().Add(-time.Duration(n) * time.Second)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += 4 {
				k := cache.Key{Origin: "root://origin.example:1094", Path: fmt.Sprintf("/store/bench/d%03d/f%06d.root", i%1000, i)}
				in := sidecar.New(k.Origin, k.Path, size, 1<<20, base, "", base)
				for b := 0; b < in.Durable.Len(); b++ {
					in.Durable.Set(b)
				}
				in.LastAccess = base.Add(time.Duration(i) * time.Second)
				mp, dp := cache.MetaPath(dir, k), cache.DataPath(dir, k)
				if i < 4000 { // the first files of each directory create it
					os.MkdirAll(filepath.Dir(mp), 0o755)
					os.MkdirAll(filepath.Dir(dp), 0o755)
				}
				if err := os.WriteFile(mp, in.Marshal(), 0o644); err != nil {
					errs <- err
					return
				}
				f, err := os.Create(dp)
				if err == nil {
					err = f.Truncate(size)
					f.Close()
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// walkSidecars reads and decodes every sidecar under root.
func walkSidecars(root string) (int, error) {
	n := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".hcinfo") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if _, err := sidecar.Unmarshal(b); err == nil {
			n++
		}
		return nil
	})
	return n, err
}

// dropCaches asks the kernel to drop clean page-cache pages so that both the
// rebuild and the walk read from disk; it silently does nothing without
// permission.
func dropCaches() {
	os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0o200)
}
