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

func (a *arena) close() {
	if a.mapped && a.mem != nil {
		unix.Munmap(a.mem)
	}
	a.mem = nil
}
