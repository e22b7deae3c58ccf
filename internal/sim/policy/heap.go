package policy

// keyHeap is a binary min-heap of file ids ordered by (k1, k2), with each
// id's position kept in pos so that keys can change in O(log n).
type keyHeap struct {
	h   []heapEntry
	pos []int32 // per id: index in h, or -1
}

type heapEntry struct {
	k1 float64
	k2 int64
	id uint32
}

func newKeyHeap(numFiles int) keyHeap {
	pos := make([]int32, numFiles)
	for i := range pos {
		pos[i] = -1
	}
	return keyHeap{pos: pos}
}

func (e heapEntry) less(o heapEntry) bool {
	return e.k1 < o.k1 || (e.k1 == o.k1 && e.k2 < o.k2)
}

func (q *keyHeap) len() int { return len(q.h) }

// set inserts id or changes its key.
func (q *keyHeap) set(id uint32, k1 float64, k2 int64) {
	e := heapEntry{k1, k2, id}
	i := q.pos[id]
	if i < 0 {
		q.h = append(q.h, e)
		q.up(len(q.h) - 1)
		return
	}
	old := q.h[i]
	q.h[i] = e
	if e.less(old) {
		q.up(int(i))
	} else {
		q.down(int(i))
	}
}

// top returns the minimum entry; the heap must not be empty.
func (q *keyHeap) top() heapEntry { return q.h[0] }

// pop removes and returns the minimum entry.
func (q *keyHeap) pop() heapEntry {
	e := q.h[0]
	q.removeAt(0)
	return e
}

// remove deletes id if present.
func (q *keyHeap) remove(id uint32) {
	if i := q.pos[id]; i >= 0 {
		q.removeAt(int(i))
	}
}

func (q *keyHeap) removeAt(i int) {
	last := len(q.h) - 1
	q.pos[q.h[i].id] = -1
	if i != last {
		q.h[i] = q.h[last]
		q.pos[q.h[i].id] = int32(i)
	}
	q.h = q.h[:last]
	if i < last {
		q.down(i)
		q.up(i)
	}
}

func (q *keyHeap) up(i int) {
	e := q.h[i]
	for i > 0 {
		p := (i - 1) / 2
		if !e.less(q.h[p]) {
			break
		}
		q.h[i] = q.h[p]
		q.pos[q.h[i].id] = int32(i)
		i = p
	}
	q.h[i] = e
	q.pos[e.id] = int32(i)
}

func (q *keyHeap) down(i int) {
	n := len(q.h)
	e := q.h[i]
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && q.h[c+1].less(q.h[c]) {
			c++
		}
		if !q.h[c].less(e) {
			break
		}
		q.h[i] = q.h[c]
		q.pos[q.h[i].id] = int32(i)
		i = c
	}
	q.h[i] = e
	q.pos[e.id] = int32(i)
}
