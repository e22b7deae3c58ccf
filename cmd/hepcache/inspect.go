package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/hepcache/hepcache/internal/admin"
	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/upstream"
)

func runInspect(ctx context.Context, args []string) error {
	fs := newFlagSet("inspect", "Shows what the cache holds for a file (size, blocks present, percent complete,\nchecksum state, recent accesses), or with --summary the whole cache. Safe while\nthe server runs (it only reads).", "hepcache inspect [--config FILE | --cache-dir DIR] [--origin URL] PATH", "hepcache inspect [--config FILE | --cache-dir DIR] --summary [--depth N]")
	target := targetFlags(fs, "only this origin (root://host:port); default: every origin holding the path")
	summary := fs.Bool("summary", false, "summarise the whole cache instead of one path")
	depth := fs.Int("depth", 2, "with --summary: group files by this many leading path components")
	if err := fs.Parse(args); err != nil {
		return err
	}
	d, o, err := target.resolve()
	if err != nil {
		return err
	}
	if *summary {
		s, err := cache.Summarize(d, *depth)
		if err != nil {
			return err
		}
		printSummary(d, s)
		// A running server adds what only it knows: quotas, opens and
		// bytes served per directory.
		if unlock, lerr := admin.Lock(d); lerr == nil {
			unlock()
		} else if errors.Is(lerr, admin.ErrLocked) {
			sp, err := admin.GetSpace(d)
			if err != nil {
				return err
			}
			printLiveSpace(sp)
		}
		return nil
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("inspect needs one PATH (or --summary)")
	}
	infos, err := cache.Inspect(d, o, fs.Arg(0))
	if err != nil {
		return err
	}
	for _, in := range infos {
		nb := in.Durable.Len()
		have := in.Durable.Count()
		pct := 100.0
		if nb > 0 {
			pct = 100 * float64(have) / float64(nb)
		}
		w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintf(w, "path\t%s\n", in.Path)
		fmt.Fprintf(w, "origin\t%s\n", in.Origin)
		fmt.Fprintf(w, "size\t%d (%s)\n", in.FileSize, config.Size(in.FileSize))
		fmt.Fprintf(w, "origin mtime\t%s\n", fmtTime(in.ModTime))
		if in.ETag != "" {
			fmt.Fprintf(w, "etag\t%s\n", in.ETag)
		}
		fmt.Fprintf(w, "block size\t%s\n", config.Size(in.BlockSize))
		fmt.Fprintf(w, "blocks\t%d of %d (%.1f%% complete)\n", have, nb, pct)
		fmt.Fprintf(w, "checksum\t%s", in.ChecksumState)
		if in.ChecksumState.String() != "none" {
			fmt.Fprintf(w, " adler32=%08x crc32c=%08x", in.Adler32, in.CRC32C)
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "cached since\t%s\n", fmtTime(in.Created))
		fmt.Fprintf(w, "last access\t%s\n", fmtTime(in.LastAccess))
		fmt.Fprintf(w, "accesses\t%d\n", in.AccessCount)
		fmt.Fprintf(w, "data file\t%s\n", cache.DataPath(d, cache.Key{Origin: in.Origin, Path: in.Path}))
		w.Flush()
		if len(in.Records) > 0 {
			fmt.Println("\nrecent accesses (newest last):")
			w = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(w, "opened\tduration\tbytes hit\tbytes missed\tbytes bypassed\t")
			for _, r := range in.Records {
				fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t\n", fmtTime(r.Open), r.Close.Sub(r.Open).Round(time.Millisecond), r.BytesHit, r.BytesMissed, r.Bypass)
			}
			w.Flush()
		}
		fmt.Println()
	}
	return nil
}

func printSummary(dir string, s cache.Summary) {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "cache dir\t%s\n", dir)
	fmt.Fprintf(w, "files\t%d (%d complete, %d partial, %d unreadable sidecars)\n", s.Files, s.Complete, s.Partial, s.Corrupt)
	fmt.Fprintf(w, "bytes cached\t%d (%.2f GiB)\n", s.Bytes, float64(s.Bytes)/(1<<30))
	fmt.Fprintf(w, "checksums\t%d verified against origin, %d computed only\n", s.ChecksumVerified, s.ChecksumOnly)
	fmt.Fprintf(w, "oldest access\t%s\n", fmtTime(s.OldestAccess))
	fmt.Fprintf(w, "newest access\t%s\n", fmtTime(s.NewestAccess))
	w.Flush()
	if len(s.ByOrigin) > 0 {
		fmt.Println()
		w = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "origin\tfiles\tbytes")
		for _, o := range s.Origins() {
			fmt.Fprintf(w, "%s\t%d\t%d\n", o, s.ByOrigin[o].Files, s.ByOrigin[o].Bytes)
		}
		w.Flush()
	}
	if len(s.ByDir) > 0 {
		fmt.Println()
		w = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "directory\tfiles\tbytes")
		for _, d := range s.Dirs() {
			fmt.Fprintf(w, "%s\t%d\t%d\n", d, s.ByDir[d].Files, s.ByDir[d].Bytes)
		}
		w.Flush()
	}
}

func printLiveSpace(sp admin.Space) {
	gib := func(b int64) string { return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30)) }
	fmt.Printf("\nrunning server: used %s of %s (high %s, low %s), pinned %s\n",
		gib(sp.Usage.Used), gib(sp.Usage.Total), gib(sp.Usage.High), gib(sp.Usage.Low), gib(sp.Usage.Pinned))
	if len(sp.Quotas) > 0 {
		fmt.Println()
		w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "quota	used	limit	high	low	files	evicted files	evicted bytes")
		for _, q := range sp.Quotas {
			fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", q.Prefix, q.Bytes, q.Limit, q.High, q.Low, q.Files, q.EvictedFiles, q.EvictedBytes)
		}
		w.Flush()
	}
	if len(sp.Dirs) > 0 {
		fmt.Println("\nsince the server started, by directory:")
		w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "directory	files	bytes cached	opens hit/partial/miss	bytes served hit	miss	bypass")
		for _, d := range sp.Dirs {
			fmt.Fprintf(w, "%s\t%d\t%d\t%d/%d/%d\t%d\t%d\t%d\n", d.Dir, d.Files, d.Bytes, d.Hits, d.Partial, d.Misses, d.BytesHit, d.BytesMissed, d.BytesBypassed)
		}
		w.Flush()
	}
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// cacheTarget holds the flags that name a cache directory and, optionally,
// one origin, for the offline commands (inspect, evict).
type cacheTarget struct {
	dir, cfgPath, origin *string
}

func targetFlags(fs *flag.FlagSet, originHelp string) cacheTarget {
	return cacheTarget{
		dir:     fs.String("cache-dir", "", "cache directory (or use --config)"),
		cfgPath: fs.String("config", "", "config file to take cache.dir from (default "+defaultConfigPath+")"),
		origin:  fs.String("origin", "", originHelp),
	}
}

// resolve returns the cache directory and the canonical origin ("" for all).
func (t cacheTarget) resolve() (dir, origin string, err error) {
	if dir, err = cacheDirFrom(*t.dir, *t.cfgPath); err != nil {
		return "", "", err
	}
	if *t.origin != "" {
		if origin, err = upstream.Canonical(*t.origin); err != nil {
			return "", "", err
		}
	}
	return dir, origin, nil
}

// cacheDirFrom takes the cache directory from a flag or a config file.
func cacheDirFrom(dir, cfgPath string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	p, err := configPath(cfgPath)
	if err != nil {
		return "", err
	}
	c, err := config.Load(p)
	if err != nil {
		return "", err
	}
	if c.Cache.Dir == "" {
		return "", fmt.Errorf("%s: cache.dir is empty: set it, or give --cache-dir DIR", p)
	}
	return c.Cache.Dir, nil
}
