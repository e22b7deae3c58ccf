package catalog

import "hash/maphash"

// table maps keys to item slots: open addressing with linear probing over
// a power-of-two array of uint64 entries, each the key's 32-bit hash and
// its slot+1 (0 is empty), grown at three quarters full and shrunk by
// backward-shift deletion, so that it holds no tombstone. A probe compares
// hashes in the table itself: only a probable match reads an item and its
// name. At 8 bytes an entry and a load between 3/8 and 3/4 it costs 11 to
// 21 bytes a file, where a Go map of keys to pointers costs over 40.
type table struct {
	seed    maphash.Seed
	entries []uint64
	n       int
}

// minTable is the initial size.
const minTable = 1024

func (t *table) init(seed maphash.Seed) {
	t.seed = seed
	t.entries = make([]uint64, minTable)
}

// hash is the hash of origin o's path p.
func (t *table) hash(o uint32, p string) uint32 {
	h := maphash.String(t.seed, p) ^ (uint64(o)+1)*0x9e3779b97f4a7c15
	h ^= h >> 32
	return uint32(h)
}

func entry(h uint32, s int32) uint64 { return uint64(h)<<32 | uint64(uint32(s)+1) }

func slotOf(v uint64) int32 { return int32(uint32(v) - 1) }

// find returns the slot whose item eq accepts among those of hash h, or
// none.
func (t *table) find(h uint32, eq func(int32) bool) int32 {
	mask := uint32(len(t.entries) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		v := t.entries[i]
		if v == 0 {
			return none
		}
		if uint32(v>>32) == h && eq(slotOf(v)) {
			return slotOf(v)
		}
	}
}

// insert adds slot s with hash h.
func (t *table) insert(h uint32, s int32) {
	if (t.n+1)*4 > len(t.entries)*3 {
		t.grow()
	}
	mask := uint32(len(t.entries) - 1)
	i := h & mask
	for t.entries[i] != 0 {
		i = (i + 1) & mask
	}
	t.entries[i] = entry(h, s)
	t.n++
}

func (t *table) grow() {
	old := t.entries
	t.entries = make([]uint64, 2*len(old))
	mask := uint32(len(t.entries) - 1)
	for _, v := range old {
		if v == 0 {
			continue
		}
		i := uint32(v>>32) & mask
		for t.entries[i] != 0 {
			i = (i + 1) & mask
		}
		t.entries[i] = v
	}
}

// remove deletes slot s of hash h, shifting back the entries after it
// that would no longer be found.
func (t *table) remove(h uint32, s int32) {
	mask := uint32(len(t.entries) - 1)
	want := entry(h, s)
	i := h & mask
	for t.entries[i] != want {
		if t.entries[i] == 0 {
			panic("catalog: removing a slot the table does not hold")
		}
		i = (i + 1) & mask
	}
	for j := i; ; {
		j = (j + 1) & mask
		v := t.entries[j]
		if v == 0 {
			break
		}
		home := uint32(v>>32) & mask
		// The entry at j stays if its home lies cyclically in (i, j].
		if i <= j {
			if i < home && home <= j {
				continue
			}
		} else if i < home || home <= j {
			continue
		}
		t.entries[i] = v
		i = j
	}
	t.entries[i] = 0
	t.n--
}

// memory is the table's size in bytes.
func (t *table) memory() int64 { return int64(len(t.entries)) * 8 }
