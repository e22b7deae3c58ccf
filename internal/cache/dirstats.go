package cache

import (
	"sort"
	"strings"
)

// otherDir collects the directories beyond DirStatsMax.
const otherDir = "(other)"

// DirStat is what the cache holds and serves for one directory (the first
// DirStatsDepth components of the cached paths under it), like XCache's
// pfc.dirstats. Cached figures are current; the rest count since start-up.
type DirStat struct {
	Dir string
	// Files and Bytes are cached now.
	Files int
	Bytes int64
	// Opens by what the cache held at open: Hits (complete), Partial,
	// Misses (nothing).
	Hits, Partial, Misses int64
	// Bytes served to clients, by source.
	BytesHit, BytesMissed, BytesBypassed int64
}

// dirStat is a DirStat; guarded by index.mu.
type dirStat struct{ DirStat }

// dirTable holds the per-directory statistics; guarded by index.mu.
type dirTable struct {
	depth, max int
	dirs       map[string]*dirStat
}

func (t *dirTable) init(depth, max int) {
	t.depth, t.max = depth, max
	t.dirs = map[string]*dirStat{}
}

// dirOf names the directory p counts under: its first depth components,
// or its parent directory if it is not that deep.
func dirOf(p string, depth int) string {
	i := 0
	for n := 0; n < depth; n++ {
		j := strings.IndexByte(p[i+1:], '/')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	if i == 0 {
		return "/"
	}
	return p[:i]
}

// of returns the entry for path p, creating it (or using "(other)" past
// the limit); nil when statistics are off.
func (t *dirTable) of(p string) *dirStat {
	if t.depth < 0 {
		return nil
	}
	name := dirOf(p, t.depth)
	d := t.dirs[name]
	if d == nil {
		if len(t.dirs) >= t.max {
			name = otherDir
			d = t.dirs[name]
		}
		if d == nil {
			d = &dirStat{DirStat{Dir: name}}
			t.dirs[name] = d
		}
	}
	return d
}

func (t *dirTable) add(d *dirStat, files int, bytes int64) {
	if d != nil {
		d.Files += files
		d.Bytes += bytes
	}
}

// dirAccess records a closed access of k: how it opened and what it read.
func (x *index) dirAccess(k Key, state string, hit, missed, bypassed int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	d := x.dirs.of(k.Path)
	if d == nil {
		return
	}
	switch state {
	case "hit":
		d.Hits++
	case "partial":
		d.Partial++
	default:
		d.Misses++
	}
	d.BytesHit += hit
	d.BytesMissed += missed
	d.BytesBypassed += bypassed
}

// DirStats returns the per-directory statistics, sorted by directory.
func (c *Cache) DirStats() []DirStat {
	x := c.index
	x.mu.Lock()
	out := make([]DirStat, 0, len(x.dirs.dirs))
	for _, d := range x.dirs.dirs {
		out = append(out, d.DirStat)
	}
	x.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Dir < out[j].Dir })
	return out
}
