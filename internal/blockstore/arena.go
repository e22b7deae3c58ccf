package blockstore

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Align is the alignment of direct I/O: buffers, offsets and lengths are
// multiples of it (the page size, a multiple of every device's logical
// block size).
const Align = 4096

// arena is one anonymous mapping cut into equal slots. The mapping is
// made once and never unmapped while the store lives: its pages are
// faulted in when a slot is first used and stay.
type arena struct {
	mem      []byte
	slotSize int
	mapped   bool // false: a heap fallback (the kernel refused the mapping)
	huge     bool // transparent huge pages asked for and accepted
	// smallFrom is the first slot of the arena's tail that is kept off
	// huge pages (smallRegion): small blocks take their first slots
	// there, so that a 4 KiB block touches a 4 KiB page, not a 2 MiB one
	// the kernel must zero.
	smallFrom int
}

// smallRegion is the share of the slots, at the arena's end, kept off
// transparent huge pages for small blocks (a file's short last block, a
// small file's only one).
const smallRegion = 8 // one eighth

// hugePage is the size of a transparent huge page (x86-64, arm64 with 4
// KiB pages): the arena starts on such a boundary so that the kernel can
// back it with huge pages.
const hugePage = 2 << 20

// newArena maps slots slots of slotSize bytes. With huge, it asks for
// transparent huge pages (madvise MADV_HUGEPAGE, where the kernel offers
// them "madvise" or "always"): a first touch then costs one fault per
// 2 MiB instead of per 4 KiB. The mapping reserves no swap
// (MAP_NORESERVE): its pages are taken only when used.
func newArena(slots, slotSize int, huge bool) (*arena, error) {
	if slots <= 0 || slotSize <= 0 || slotSize%Align != 0 {
		return nil, fmt.Errorf("blockstore: arena of %d slots of %d bytes: slot size must be a positive multiple of %d", slots, slotSize, Align)
	}
	size := slots * slotSize
	raw, err := unix.Mmap(-1, 0, size+hugePage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE|unix.MAP_NORESERVE)
	if err == nil {
		// Keep the huge-page-aligned part; give back the slack around it.
		start := uintptr(unsafe.Pointer(unsafe.SliceData(raw)))
		skip := int((hugePage - start%hugePage) % hugePage)
		if skip > 0 {
			unix.Munmap(raw[:skip])
		}
		if tail := raw[skip+size:]; len(tail) > 0 {
			unix.Munmap(tail)
		}
		mem := raw[skip : skip+size : skip+size]
		a := &arena{mem: mem, slotSize: slotSize, mapped: true, smallFrom: slots}
		if huge {
			// Huge pages up to a huge page boundary about an eighth from
			// the end; the rest stays on small pages.
			cut := (size - size/smallRegion) / hugePage * hugePage
			if a.huge = unix.Madvise(mem[:cut], unix.MADV_HUGEPAGE) == nil && cut < size; a.huge {
				unix.Madvise(mem[cut:], unix.MADV_NOHUGEPAGE)
				a.smallFrom = (cut + slotSize - 1) / slotSize
			}
		}
		return a, nil
	}
	// A heap block, aligned by hand: direct I/O needs aligned buffers.
	heap := make([]byte, size+Align)
	skip := (Align - int(uintptr(unsafe.Pointer(unsafe.SliceData(heap))))%Align) % Align
	return &arena{mem: heap[skip : skip+size : skip+size], slotSize: slotSize, smallFrom: slots}, nil
}

// slot returns the memory of slot i.
func (a *arena) slot(i int) []byte {
	off := i * a.slotSize
	return a.mem[off : off+a.slotSize : off+a.slotSize]
}

// handBack gives slot i's memory back to the kernel (its pages are
// faulted in again, zeroed, when the slot is next used). A heap fallback
// keeps its memory.
func (a *arena) handBack(i int) {
	if a.mapped && a.mem != nil {
		unix.Madvise(a.slot(i), unix.MADV_DONTNEED)
	}
}

// resident returns how many bytes of the arena are in memory (mincore):
// what the arena adds to the process's RSS. vec is scratch space, reused
// between calls; the arena is asked about a window at a time, so that vec
// stays small however large the arena (a byte per page of 22 GiB would be
// 5.6 MB).
func (a *arena) resident(vec []byte) (int64, []byte) {
	if !a.mapped || a.mem == nil {
		return int64(len(a.mem)), vec
	}
	const window = 256 << 20
	if cap(vec) < window/pageSize {
		vec = make([]byte, window/pageSize)
	}
	var n int64
	for off := 0; off < len(a.mem); off += window {
		part := a.mem[off:min(off+window, len(a.mem))]
		v := vec[:(len(part)+pageSize-1)/pageSize]
		if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(part))), uintptr(len(part)), uintptr(unsafe.Pointer(unsafe.SliceData(v)))); e != 0 {
			return -1, vec
		}
		for _, b := range v {
			n += int64(b & 1)
		}
	}
	return n * pageSize, vec
}

// pageSize is the unit of residency (mincore).
const pageSize = 4096

func (a *arena) close() {
	if a.mapped && a.mem != nil {
		unix.Munmap(a.mem)
	}
	a.mem = nil
}
