package catalog

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestDirOf(t *testing.T) {
	for _, tc := range []struct {
		p     string
		depth int
		want  string
	}{
		{"/store/mc/run/f.root", 2, "/store/mc"},
		{"/store/mc/f.root", 2, "/store/mc"},
		{"/store/f.root", 2, "/store"},
		{"/f.root", 2, "/"},
		{"/store/mc/run/f.root", 0, "/"},
		{"/store/mc/run/f.root", 3, "/store/mc/run"},
	} {
		if got := DirOf(tc.p, tc.depth); got != tc.want {
			t.Errorf("DirOf(%q, %d) = %q, want %q", tc.p, tc.depth, got, tc.want)
		}
	}
}

// model is the catalogue as a plain map and a list in LRU order (most
// recent first), against which random operations are checked.
type model struct {
	bytes map[Key]int64
	open  map[Key]int
	order []Key
}

func (m *model) touch(k Key) {
	m.order = slices.DeleteFunc(m.order, func(x Key) bool { return x == k })
	m.order = append([]Key{k}, m.order...)
}

func (m *model) remove(k Key) {
	delete(m.bytes, k)
	delete(m.open, k)
	m.order = slices.DeleteFunc(m.order, func(x Key) bool { return x == k })
}

// TestAgainstModel runs random opens, closes, growths, touches and
// removals, on many keys with paths long and short (so that the names
// arena is evacuated and the table shifts entries back), and checks
// every figure and the LRU order against the model.
func TestAgainstModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	c := New(Config{DirStatsDepth: 1, DirStatsMax: 10, Rules: Rules{
		Quotas: []Quota{{Prefix: "/d1", Size: 1 << 20, HighWatermark: 0.9, LowWatermark: 0.8}, {Prefix: "/d2", Share: 0.5, HighWatermark: 0.9, LowWatermark: 0.8}},
		Pins:   []string{"/d3"}, PinShare: 0.1}})
	c.SetCapacity(10 << 20)
	m := &model{bytes: map[Key]int64{}, open: map[Key]int{}}
	keys := make([]Key, 3000)
	for i := range keys {
		keys[i] = Key{Origin: fmt.Sprintf("root://o%d:1094", i%3), Path: fmt.Sprintf("/d%d/%s/f%d", i%7, strings.Repeat("x", r.IntN(300)), i)}
	}
	now := time.Unix(1_800_000_000, 0)
	for step := 0; step < 200_000; step++ {
		k := keys[r.IntN(len(keys))]
		now = now.Add(time.Second)
		switch op := r.IntN(10); {
		case op < 3:
			b := int64(r.IntN(1000))
			c.Opened(k, b, now, 0, false)
			if _, ok := m.bytes[k]; !ok {
				m.bytes[k] = b
			}
			m.open[k]++
			m.touch(k)
		case op < 5:
			if _, ok := m.bytes[k]; ok {
				c.Closed(k, now)
				if m.open[k] > 0 {
					m.open[k]--
				}
				m.touch(k)
			}
		case op < 6:
			if _, ok := m.bytes[k]; ok {
				n := int64(r.IntN(100))
				c.Grow(k, n)
				m.bytes[k] += n
			}
		case op < 7:
			if _, ok := m.bytes[k]; ok {
				c.Touch(k, now)
				m.touch(k)
			}
		default:
			want := m.bytes[k]
			if got := c.Remove(k); got != want {
				t.Fatalf("step %d: Remove(%s) = %d, want %d", step, k, got, want)
			}
			m.remove(k)
		}
		if step%20_000 == 0 {
			invariants(t, c)
		}
	}
	invariants(t, c)
	check(t, c, m)
}

// invariants checks the catalogue's structures against each other: the
// lists hold every item once, in both directions, the table finds each,
// and the quotas', pins', directories' and disks' sums are the items'.
func invariants(t *testing.T, c *Catalog) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[int32]bool{}
	walk := func(l list, next func(*item) int32, prev func(*item) int32) int {
		n, last := 0, none
		for i := l.head; i != none; i = next(c.at(i)) {
			if seen[i] {
				t.Fatalf("slot %d twice in the lists", i)
			}
			seen[i] = true
			if prev(c.at(i)) != last {
				t.Fatalf("slot %d: broken back link", i)
			}
			last, n = i, n+1
		}
		if last != l.tail {
			t.Fatal("tail is not the last item")
		}
		return n
	}
	n := walk(c.lru, func(it *item) int32 { return it.next }, func(it *item) int32 { return it.prev })
	n += walk(c.pending, func(it *item) int32 { return it.next }, func(it *item) int32 { return it.prev })
	if n != c.n || c.table.n != c.n {
		t.Fatalf("%d items in the lists, %d in the table, n %d", n, c.table.n, c.n)
	}
	var bytes, pinned int64
	gbytes := make([]int64, len(c.groups))
	gfiles := make([]int, len(c.groups))
	dfiles := make([]int, len(c.dirs.stats))
	for i := range seen {
		it := c.at(i)
		if c.findIDLocked(it.origin, c.pathOf(i)) != i {
			t.Fatalf("slot %d not found by its key", i)
		}
		bytes += it.bytes
		if it.flags&flagPinned != 0 {
			pinned += it.bytes
		}
		if it.group != 0 {
			gbytes[it.group-1] += it.bytes
			gfiles[it.group-1]++
		}
		dfiles[it.dir]++
	}
	if bytes != c.bytes || pinned != c.pinnedBytes {
		t.Fatalf("bytes %d (counted %d), pinned %d (counted %d)", bytes, c.bytes, pinned, c.pinnedBytes)
	}
	// A quota's list is the LRU order of its files, the pending ones last.
	var order []int32
	for _, l := range []list{c.lru, c.pending} {
		for i := l.head; i != none; i = c.at(i).next {
			order = append(order, i)
		}
	}
	for g := range c.groups {
		var want, got []int32
		for _, i := range order {
			if int(c.at(i).group) == g+1 {
				want = append(want, i)
			}
		}
		for i := c.groups[g].list.head; i != none; i = c.at(i).gnext {
			got = append(got, i)
		}
		if !slices.Equal(got, want) || c.groups[g].files != gfiles[g] || c.groups[g].bytes != gbytes[g] {
			t.Fatalf("quota %d: list of %d not in LRU order (%d files), files %d (counted %d), bytes %d (counted %d)",
				g, len(got), len(want), gfiles[g], c.groups[g].files, gbytes[g], c.groups[g].bytes)
		}
	}
	for d := range dfiles {
		if dfiles[d] != c.dirs.stats[d].Files {
			t.Fatalf("directory %s: %d files, counted %d", c.dirs.stats[d].Dir, dfiles[d], c.dirs.stats[d].Files)
		}
	}
}

func check(t *testing.T, c *Catalog, m *model) {
	t.Helper()
	files, bytes := c.Totals()
	var want int64
	for k, b := range m.bytes {
		want += b
		info, ok := c.Lookup(k)
		if !ok || info.Bytes != b || info.Open != m.open[k] {
			t.Fatalf("%s: %+v %v, want %d bytes, %d open", k, info, ok, b, m.open[k])
		}
	}
	if files != len(m.bytes) || bytes != want {
		t.Fatalf("totals %d files %d bytes, want %d, %d", files, bytes, len(m.bytes), want)
	}
	// Every closed file not pinned, least recently used first.
	var lru []Key
	for i := len(m.order) - 1; i >= 0; i-- {
		if info, _ := c.Lookup(m.order[i]); m.open[m.order[i]] == 0 && !info.Pinned {
			lru = append(lru, m.order[i])
		}
	}
	if got := c.Victims(1<<62, 0, time.Time{}); !slices.Equal(got, lru) {
		t.Fatalf("victims: %d keys, want %d (first %v, want %v)", len(got), len(lru), first(got), first(lru))
	}
	var dirFiles int
	for _, d := range c.DirStats() {
		dirFiles += d.Files
	}
	if dirFiles != files {
		t.Fatalf("directories count %d files, want %d", dirFiles, files)
	}
}

func first(k []Key) []Key { return k[:min(3, len(k))] }

// TestLongNames: a path too long for a record is kept aside, and found.
func TestLongNames(t *testing.T) {
	c := New(Config{DirStatsDepth: -1})
	long := Key{Origin: "root://o", Path: "/" + strings.Repeat("y", maxRecordName+10)}
	short := Key{Origin: "root://o", Path: "/s"}
	c.Opened(long, 5, time.Unix(10, 0), 0, false)
	c.Opened(short, 7, time.Unix(11, 0), 0, false)
	if info, ok := c.Lookup(long); !ok || info.Bytes != 5 {
		t.Fatalf("long name: %+v %v", info, ok)
	}
	c.Closed(long, time.Unix(12, 0))
	if v := c.Victims(1, 0, time.Time{}); len(v) != 1 || v[0] != long {
		t.Fatalf("victims %v", v)
	}
	if c.Remove(long) != 5 || c.Remove(short) != 7 {
		t.Fatal("remove")
	}
	if files, _ := c.Totals(); files != 0 || len(c.names.overflow) != 0 {
		t.Fatal("not empty")
	}
}

// TestVictimsByAge: files last accessed before the limit's second go,
// whatever the bytes asked for; files open or pinned never.
func TestVictimsByAge(t *testing.T) {
	c := New(Config{Rules: Rules{Pins: []string{"/pin"}}, DirStatsDepth: -1})
	at := func(s int64) time.Time { return time.Unix(1_800_000_000+s, 0) }
	for i, p := range []string{"/a", "/b", "/pin/c", "/d", "/e"} {
		k := Key{"root://o", p}
		c.Opened(k, 10, at(int64(i)), 0, false)
		if p != "/d" {
			c.Closed(k, at(int64(i)))
		}
	}
	got := c.Victims(0, 0, at(4).Add(500*time.Millisecond))
	want := []Key{{"root://o", "/a"}, {"root://o", "/b"}}
	if !slices.Equal(got, want) {
		t.Fatalf("victims %v, want %v", got, want)
	}
}
