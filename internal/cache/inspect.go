package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hepcache/hepcache/disk"
	"github.com/hepcache/hepcache/internal/catalog"
	"github.com/hepcache/hepcache/internal/sidecar"
)

// Inspect reads what the cache directory dir holds for a path: the sidecars
// of every origin that has it (or only origin, if given). It only reads, so
// it is safe while a server runs. Like XCache's xrdpfc_print.
func Inspect(dir, originURL, p string) ([]*sidecar.Info, error) {
	cp, err := cleanPath(p)
	if err != nil {
		return nil, err
	}
	var keys []Key
	if originURL != "" {
		keys = append(keys, Key{Origin: originURL, Path: cp})
	} else {
		// Every origin directory: meta/<scheme>/<host>.
		schemes, err := disk.OS{}.ReadDir(filepath.Join(dir, "meta"))
		if err != nil {
			return nil, fmt.Errorf("inspect %s: %w", dir, err)
		}
		for _, s := range schemes {
			hosts, _ := disk.OS{}.ReadDir(filepath.Join(dir, "meta", s.Name()))
			for _, h := range hosts {
				mp := filepath.Join(dir, "meta", s.Name(), h.Name(), filepath.FromSlash(cp)) + ".hcinfo"
				if in := readSidecarAt(mp); in != nil {
					keys = append(keys, Key{Origin: in.Origin, Path: in.Path})
				}
			}
		}
	}
	var out []*sidecar.Info
	for _, k := range keys {
		if in := readSidecarAt(MetaPath(dir, k)); in != nil && in.Path == k.Path {
			out = append(out, in)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("inspect %s: not in the cache: %w", cp, fs.ErrNotExist)
	}
	return out, nil
}

func readSidecarAt(p string) *sidecar.Info {
	b, _, err := readAll(disk.OS{}, p)
	if err != nil {
		return nil
	}
	in, err := sidecar.Unmarshal(b)
	if err != nil {
		return nil
	}
	return in
}

// Summary describes a whole cache directory.
type Summary struct {
	Files, Complete, Partial, Corrupt int
	Bytes                             int64
	ByOrigin                          map[string]OriginSummary
	// ByDir groups the files by their first DirDepth path components
	// (DirDepth 0: not grouped).
	ByDir                          map[string]OriginSummary
	DirDepth                       int
	OldestAccess, NewestAccess     time.Time
	ChecksumVerified, ChecksumOnly int
}

// OriginSummary is the part of a Summary for one origin.
type OriginSummary struct {
	Files int
	Bytes int64
}

// Summarize walks the sidecars of dir (read-only, safe while serving),
// grouping files by their first dirDepth path components as well (0: not).
func Summarize(dir string, dirDepth int) (Summary, error) {
	s := Summary{ByOrigin: map[string]OriginSummary{}, ByDir: map[string]OriginSummary{}, DirDepth: dirDepth}
	err := walkSidecars(dir, func(in *sidecar.Info) {
		if in == nil {
			s.Corrupt++
			return
		}
		s.Files++
		b := durableBytes(in)
		s.Bytes += b
		if in.Complete() {
			s.Complete++
		} else {
			s.Partial++
		}
		switch in.ChecksumState {
		case sidecar.ChecksumVerified:
			s.ChecksumVerified++
		case sidecar.ChecksumComputed:
			s.ChecksumOnly++
		}
		o := s.ByOrigin[in.Origin]
		o.Files++
		o.Bytes += b
		s.ByOrigin[in.Origin] = o
		if dirDepth > 0 {
			d := catalog.DirOf(in.Path, dirDepth)
			ds := s.ByDir[d]
			ds.Files++
			ds.Bytes += b
			s.ByDir[d] = ds
		}
		if s.OldestAccess.IsZero() || in.LastAccess.Before(s.OldestAccess) {
			s.OldestAccess = in.LastAccess
		}
		if in.LastAccess.After(s.NewestAccess) {
			s.NewestAccess = in.LastAccess
		}
	})
	return s, err
}

// Origins returns the origins of a summary, sorted.
func (s Summary) Origins() []string { return sortedKeys(s.ByOrigin) }

// Dirs returns the directories of a summary, sorted.
func (s Summary) Dirs() []string { return sortedKeys(s.ByDir) }

func sortedKeys(m map[string]OriginSummary) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// EvictOffline removes a cached file while no server uses dir (the caller
// holds the directory lock).
func EvictOffline(dir, originURL, p string) error {
	cp, err := cleanPath(p)
	if err != nil {
		return err
	}
	k := Key{Origin: originURL, Path: cp}
	var errs []error
	for _, name := range []string{MetaPath(dir, k), DataPath(dir, k)} {
		if err := (disk.OS{}).Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// walkSidecars calls fn with every sidecar under dir's meta tree (nil for
// one that cannot be read or decoded). Read-only: safe while serving.
func walkSidecars(dir string, fn func(*sidecar.Info)) error {
	root := filepath.Join(dir, "meta")
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == root {
				return fs.SkipAll
			}
			return err
		}
		if d.Type().IsRegular() && strings.HasSuffix(p, ".hcinfo") {
			fn(readSidecarAt(p))
		}
		return nil
	})
}
