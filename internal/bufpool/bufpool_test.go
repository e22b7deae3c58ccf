package bufpool

import "testing"

func TestReuseBoundAndTrim(t *testing.T) {
	p := New(1024, 3)
	var got []*[]byte
	for i := 0; i < 5; i++ {
		b := p.Get()
		if len(*b) != 1024 {
			t.Fatalf("len %d", len(*b))
		}
		got = append(got, b)
	}
	for _, b := range got {
		p.Put(b)
	}
	if p.Free() != 3 {
		t.Fatalf("kept %d free buffers, bound is 3", p.Free())
	}
	b := p.Get()
	if b != got[2] {
		t.Fatal("a free buffer was not reused")
	}
	// Since the last Trim (none yet) the free list went down to 0 while
	// Gets allocated, then up to 3, then 2: the low mark is 2.
	p.Trim() // starts a new window
	p.Put(b)
	p.Get() // 3 -> 2 free: one buffer was needed in this window
	if n := p.Trim(); n != 2 {
		t.Fatalf("trimmed %d, want the 2 never needed", n)
	}
	if p.Free() != 0 {
		t.Fatalf("%d free after trim", p.Free())
	}
	p.Put(&[]byte{1}) // too small: dropped
	if p.Free() != 0 {
		t.Fatal("kept a foreign small buffer")
	}
}

func TestMappedKeepsFewResident(t *testing.T) {
	p := NewMapped(64<<10, 2)
	var got []*[]byte
	for i := 0; i < 4; i++ {
		b := p.Get()
		if len(*b) != 64<<10 {
			t.Fatalf("len %d", len(*b))
		}
		(*b)[0] = byte(i + 1)
		got = append(got, b)
	}
	if n := p.Mapped(); n != 4 {
		t.Fatalf("mapped %d buffers, want 4", n)
	}
	for _, b := range got[:3] {
		p.Put(b)
	}
	if p.Resident() != 2 {
		t.Fatalf("%d resident free buffers, bound is 2", p.Resident())
	}
	// The third went beyond the bound: its pages were released (it reads
	// as zeroes) but it is reused before a new mapping is made.
	if (*got[2])[0] != 0 {
		t.Fatal("a buffer beyond the resident bound kept its pages")
	}
	b := p.Get()
	if b != got[1] {
		t.Fatal("the most recently freed resident buffer was not reused first")
	}
	// Freed buffers, resident or released, are reused before new ones
	// are mapped.
	p.Put(got[3])
	for i := 0; i < 3; i++ {
		p.Get()
	}
	if n := p.Mapped(); n != 4 {
		t.Fatalf("mapped %d buffers, want still 4", n)
	}
	heap := make([]byte, 64<<10)
	p.Put(&heap) // not the pool's: never released, never reused
	if heap2 := p.Get(); heap2 == &heap {
		t.Fatal("a heap buffer entered the pool")
	}
}

func TestMappedTrimReleasesIdleBuffers(t *testing.T) {
	p := NewMapped(4096, 4)
	a, b, c := p.Get(), p.Get(), p.Get()
	p.Put(a)
	p.Put(b)
	p.Put(c)
	p.Trim() // starts a window: 3 resident
	x := p.Get()
	p.Put(x) // the low mark is 2: two were never needed
	if n := p.Trim(); n != 2 {
		t.Fatalf("trimmed %d, want 2", n)
	}
	if p.Resident() != 1 {
		t.Fatalf("%d resident after trim, want 1", p.Resident())
	}
}
