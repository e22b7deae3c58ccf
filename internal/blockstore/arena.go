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
}

func newArena(slots, slotSize int) (*arena, error) {
	if slots <= 0 || slotSize <= 0 || slotSize%Align != 0 {
		return nil, fmt.Errorf("blockstore: arena of %d slots of %d bytes: slot size must be a positive multiple of %d", slots, slotSize, Align)
	}
	size := slots * slotSize
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err == nil {
		return &arena{mem: mem, slotSize: slotSize, mapped: true}, nil
	}
	// A heap block, aligned by hand: direct I/O needs aligned buffers.
	raw := make([]byte, size+Align)
	skip := (Align - int(uintptr(unsafe.Pointer(unsafe.SliceData(raw))))%Align) % Align
	return &arena{mem: raw[skip : skip+size : skip+size], slotSize: slotSize}, nil
}

// slot returns the memory of slot i.
func (a *arena) slot(i int) []byte {
	off := i * a.slotSize
	return a.mem[off : off+a.slotSize : off+a.slotSize]
}

// resident returns how many bytes of the arena are in memory (mincore):
// what the arena adds to the process's RSS. vec is scratch space of one
// byte per page, reused between calls.
func (a *arena) resident(vec []byte) (int64, []byte) {
	if !a.mapped || a.mem == nil {
		return int64(len(a.mem)), vec
	}
	pages := (len(a.mem) + pageSize - 1) / pageSize
	if cap(vec) < pages {
		vec = make([]byte, pages)
	}
	vec = vec[:pages]
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(a.mem))), uintptr(len(a.mem)), uintptr(unsafe.Pointer(unsafe.SliceData(vec)))); e != 0 {
		return -1, vec
	}
	var n int64
	for _, v := range vec {
		n += int64(v & 1)
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
