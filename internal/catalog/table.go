package catalog

import "hash/maphash"

// table maps keys to item slots: open addressing with linear probing over
// a power-of-two array of uint32 (slot+1; 0 is empty), grown at three
// quarters full and shrunk by backward-shift deletion, so that it holds no
// tombstone. At 4 bytes a slot and a load between 3/8 and 3/4 it costs 5
// to 11 bytes a file, where a Go map of keys to pointers costs over 40.
type table struct {
	seed  maphash.Seed
	slots []uint32
	n     int
}

// minTable is the initial size.
const minTable = 1024

func (t *table) init(seed maphash.Seed) {
	t.seed = seed
	t.slots = make([]uint32, minTable)
}

// hash is the hash of origin o's path p.
func (t *table) hash(o uint32, p string) uint32 {
	h := maphash.String(t.seed, p) ^ (uint64(o)+1)*0x9e3779b97f4a7c15
	h ^= h >> 32
	return uint32(h)
}

// find returns the slot whose item eq accepts among those of hash h, or
// none.
func (t *table) find(h uint32, eq func(int32) bool) int32 {
	mask := uint32(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		v := t.slots[i]
		if v == 0 {
			return none
		}
		if eq(int32(v - 1)) {
			return int32(v - 1)
		}
	}
}

// insert adds slot s with hash h; hashOf gives any slot's hash (to grow).
func (t *table) insert(h uint32, s int32, hashOf func(int32) uint32) {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.grow(hashOf)
	}
	mask := uint32(len(t.slots) - 1)
	i := h & mask
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = uint32(s) + 1
	t.n++
}

func (t *table) grow(hashOf func(int32) uint32) {
	old := t.slots
	t.slots = make([]uint32, 2*len(old))
	mask := uint32(len(t.slots) - 1)
	for _, v := range old {
		if v == 0 {
			continue
		}
		i := hashOf(int32(v-1)) & mask
		for t.slots[i] != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = v
	}
}

// remove deletes slot s of hash h, shifting back the entries after it
// that would no longer be found.
func (t *table) remove(h uint32, s int32, hashOf func(int32) uint32) {
	mask := uint32(len(t.slots) - 1)
	i := h & mask
	for t.slots[i] != uint32(s)+1 {
		if t.slots[i] == 0 {
			panic("catalog: removing a slot the table does not hold")
		}
		i = (i + 1) & mask
	}
	for j := i; ; {
		j = (j + 1) & mask
		v := t.slots[j]
		if v == 0 {
			break
		}
		home := hashOf(int32(v-1)) & mask
		// The entry at j stays if its home lies cyclically in (i, j].
		if i <= j {
			if i < home && home <= j {
				continue
			}
		} else if i < home || home <= j {
			continue
		}
		t.slots[i] = v
		i = j
	}
	t.slots[i] = 0
	t.n--
}

// memory is the table's size in bytes.
func (t *table) memory() int64 { return int64(len(t.slots)) * 4 }
