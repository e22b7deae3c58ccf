package catalog

import (
	"encoding/binary"
	"unsafe"
)

// The paths of the cached files live in an arena of large byte chunks
// rather than in one Go string each: an item then holds no pointer, so the
// garbage collector never scans the items (10^7 of them would be 10^7
// objects to mark every cycle), and a path costs its bytes and a 6-byte
// record header instead of a 16-byte string header and an allocation
// rounded up to its size class.
//
// A record is [slot uint32][len uint16][path]; the slot names the item
// that owns it, so that a chunk mostly freed can be evacuated: its live
// records are copied to the chunk being filled and their items' refs
// updated, in a few chunks' work per removal.

// chunkSize is the size of an arena chunk.
const chunkSize = 64 << 10

// recordHeader is the bytes before a path in a record.
const recordHeader = 6

// maxRecordName is the longest path a record holds; a longer one (no
// client path is: the cache refuses paths over 4 KiB) goes to the
// overflow map.
const maxRecordName = chunkSize - recordHeader

// overflowRef marks an item whose name is in names.overflow.
const overflowRef = ^uint64(0)

type names struct {
	// chunks are the arena; nil for a chunk freed (listed in spare).
	chunks [][]byte
	// live is the bytes of live records per chunk.
	live  []int32
	spare []int32
	// cur is the chunk being filled (-1: none yet).
	cur int32
	// garbage is the bytes of dead records in chunks other than cur.
	garbage int64
	// cursor is where the next evacuation scan starts.
	cursor int32
	// overflow holds the names too long for a record, by slot.
	overflow      map[int32]string
	overflowBytes int64
}

func (n *names) init() { n.cur = -1 }

// add stores s for slot and returns its ref.
func (n *names) add(slot int32, s string) uint64 {
	if len(s) > maxRecordName {
		if n.overflow == nil {
			n.overflow = map[int32]string{}
		}
		n.overflow[slot] = s
		n.overflowBytes += int64(len(s))
		return overflowRef
	}
	need := recordHeader + len(s)
	if n.cur < 0 || len(n.chunks[n.cur])+need > chunkSize {
		n.newChunk()
	}
	c := n.chunks[n.cur]
	off := len(c)
	c = binary.LittleEndian.AppendUint32(c, uint32(slot))
	c = binary.LittleEndian.AppendUint16(c, uint16(len(s)))
	c = append(c, s...)
	n.chunks[n.cur] = c
	n.live[n.cur] += int32(need)
	return uint64(n.cur)<<32 | uint64(off)
}

// newChunk starts filling a spare or new chunk; the garbage of the one
// filled so far starts counting.
func (n *names) newChunk() {
	if n.cur >= 0 {
		n.garbage += int64(len(n.chunks[n.cur])) - int64(n.live[n.cur])
	}
	if l := len(n.spare); l > 0 {
		n.cur = n.spare[l-1]
		n.spare = n.spare[:l-1]
		n.chunks[n.cur] = make([]byte, 0, chunkSize)
		return
	}
	n.chunks = append(n.chunks, make([]byte, 0, chunkSize))
	n.live = append(n.live, 0)
	n.cur = int32(len(n.chunks) - 1)
}

// get returns the name at ref for slot. The string shares the arena's
// memory: it is valid until the next change of the catalogue, and MUST
// NOT be kept (strings.Clone it).
func (n *names) get(slot int32, ref uint64) string {
	if ref == overflowRef {
		return n.overflow[slot]
	}
	c := n.chunks[ref>>32]
	off := int(uint32(ref))
	l := int(binary.LittleEndian.Uint16(c[off+4:]))
	b := c[off+recordHeader : off+recordHeader+l]
	return unsafe.String(unsafe.SliceData(b), l)
}

// free releases the name at ref for slot. A chunk left empty is freed.
func (n *names) free(slot int32, ref uint64) {
	if ref == overflowRef {
		n.overflowBytes -= int64(len(n.overflow[slot]))
		delete(n.overflow, slot)
		return
	}
	ci := int32(ref >> 32)
	c := n.chunks[ci]
	off := int(uint32(ref))
	size := int32(recordHeader + int(binary.LittleEndian.Uint16(c[off+4:])))
	n.live[ci] -= size
	if ci == n.cur {
		return
	}
	n.garbage += int64(size)
	if n.live[ci] == 0 {
		n.garbage -= int64(len(c))
		n.chunks[ci] = nil
		n.spare = append(n.spare, ci)
	}
}

// tooSparse reports whether dead records hold more than a quarter of the
// arena (and more than a few chunks): then removals evacuate chunks.
func (n *names) tooSparse() bool {
	return n.garbage > 4*chunkSize && n.garbage*4 > n.allocated()
}

// allocated is the arena's size in bytes.
func (n *names) allocated() int64 {
	return int64(len(n.chunks)-len(n.spare))*chunkSize + n.overflowBytes
}

// memory is the arena's size and its bookkeeping.
func (n *names) memory() int64 {
	return n.allocated() + int64(cap(n.chunks))*24 + int64(cap(n.live)+cap(n.spare))*4 +
		int64(len(n.overflow))*(4+16+16)
}

// evacuate copies the live records of sparse chunks to the chunk being
// filled, scanning at most two chunks from the cursor; move is called
// with each record's slot, old and new ref, and reports whether the slot
// still owns that record (else it is dead and dropped).
func (n *names) evacuate(owns func(slot int32, ref uint64) bool, moved func(slot int32, ref uint64)) {
	for scanned := 0; scanned < 2 && len(n.chunks) > 0; scanned++ {
		ci := n.cursor % int32(len(n.chunks))
		n.cursor = ci + 1
		c := n.chunks[ci]
		if c == nil || ci == n.cur || n.live[ci] > chunkSize/2 {
			continue
		}
		for off := 0; off < len(c); {
			slot := int32(binary.LittleEndian.Uint32(c[off:]))
			l := int(binary.LittleEndian.Uint16(c[off+4:]))
			ref := uint64(ci)<<32 | uint64(off)
			if owns(slot, ref) {
				s := unsafe.String(unsafe.SliceData(c[off+recordHeader:]), l)
				nref := n.add(slot, s) // never into ci: it is not cur
				moved(slot, nref)
			}
			off += recordHeader + l
		}
		// Every record is dead now.
		n.garbage -= int64(len(c)) - int64(n.live[ci])
		n.live[ci] = 0
		n.chunks[ci] = nil
		n.spare = append(n.spare, ci)
	}
}
