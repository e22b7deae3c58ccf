package policy

// absent marks a file that is not in the cache (node.size).
const absent = -1

// node is one file's slot: list links and the bytes held (absent if none).
// Links point toward newer (prev) and older (next) files.
type node struct {
	prev, next uint32
	size       int64
}

// lists is a set of intrusive doubly-linked lists over file ids. List k's
// sentinel is node n+k; sentinel.next is the newest file, sentinel.prev the
// oldest. A file is in at most one list at a time.
type lists struct {
	n    []node
	base uint32 // id of the first sentinel
}

func newLists(numFiles, numLists int) lists {
	l := lists{n: make([]node, numFiles+numLists), base: uint32(numFiles)}
	for i := range l.n {
		l.n[i].size = absent
	}
	for k := range numLists {
		s := l.base + uint32(k)
		l.n[s].prev, l.n[s].next = s, s
	}
	return l
}

func (l *lists) sentinel(k int) uint32 { return l.base + uint32(k) }

// pushFront makes id the newest file of list k.
func (l *lists) pushFront(k int, id uint32) {
	s := l.base + uint32(k)
	first := l.n[s].next
	l.n[id].prev, l.n[id].next = s, first
	l.n[first].prev = id
	l.n[s].next = id
}

// remove unlinks id from its list.
func (l *lists) remove(id uint32) {
	p, nx := l.n[id].prev, l.n[id].next
	l.n[p].next = nx
	l.n[nx].prev = p
}

// moveFront makes id, already in list k, its newest file.
func (l *lists) moveFront(k int, id uint32) {
	s := l.base + uint32(k)
	if l.n[s].next == id {
		return
	}
	l.remove(id)
	l.pushFront(k, id)
}

// oldest returns the oldest file of list k other than skip, or false.
func (l *lists) oldest(k int, skip uint32) (uint32, bool) {
	s := l.base + uint32(k)
	v := l.n[s].prev
	if v == skip {
		v = l.n[v].prev
	}
	return v, v != s
}

// empty reports whether list k has no file.
func (l *lists) empty(k int) bool {
	s := l.base + uint32(k)
	return l.n[s].next == s
}

// noPin is a pinned id that matches no file.
const noPin = ^uint32(0)
