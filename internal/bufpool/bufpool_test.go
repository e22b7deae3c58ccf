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
