package catalog

import (
	"sort"
	"strings"
)

// otherDir collects the directories beyond the table's bound.
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

// dirTable holds the per-directory statistics, at most max directories
// (then "(other)"); guarded by Catalog.mu.
type dirTable struct {
	depth, max int
	stats      []DirStat
	byName     map[string]int32
	// nameBytes is the length of the names, for the memory accounting.
	nameBytes int64
}

func (t *dirTable) init(depth, max int) {
	t.depth, t.max = depth, max
	t.byName = map[string]int32{}
}

// DirOf names the directory p counts under in the per-directory
// statistics: its first depth components, or its parent directory if it
// is not that deep.
func DirOf(p string, depth int) string { return dirOf(p, depth) }

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
// the limit); none when statistics are off. p may be transient (it is
// copied when kept).
func (t *dirTable) of(p string) int32 {
	if t.depth < 0 {
		return none
	}
	name := dirOf(p, t.depth)
	d, ok := t.byName[name]
	if ok {
		return d
	}
	if len(t.byName) >= t.max {
		name = otherDir
		if d, ok := t.byName[name]; ok {
			return d
		}
	}
	name = strings.Clone(name)
	d = int32(len(t.stats))
	t.stats = append(t.stats, DirStat{Dir: name})
	t.byName[name] = d
	t.nameBytes += int64(len(name))
	return d
}

func (t *dirTable) add(d int32, files int, bytes int64) {
	if d != none {
		t.stats[d].Files += files
		t.stats[d].Bytes += bytes
	}
}

// memory estimates the table's bytes: each directory's stat, name and map
// slot.
func (t *dirTable) memory() int64 {
	const perDir = int64(dirStatSize) + 16 + 4 + 16 // stat, map key and value, slot overhead
	return int64(cap(t.stats))*int64(dirStatSize) + int64(len(t.byName))*(perDir-int64(dirStatSize)) + t.nameBytes
}

// DirAccess records a closed access of k: how it opened (state: "hit",
// "partial", else a miss) and what it read.
func (c *Catalog) DirAccess(k Key, state string, hit, missed, bypassed int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := c.dirs.of(k.Path)
	if i == none {
		return
	}
	d := &c.dirs.stats[i]
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
func (c *Catalog) DirStats() []DirStat {
	c.mu.Lock()
	out := append([]DirStat(nil), c.dirs.stats...)
	c.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Dir < out[j].Dir })
	return out
}
