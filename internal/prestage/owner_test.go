package prestage

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/origin"
)

// TestJobsBelongToTheirSubmitter (issue 21, item 1): only the submitter or
// the admin may query or cancel a job; ids are 128 random bits.
func TestJobsBelongToTheirSubmitter(t *testing.T) {
	m := origin.NewMem("mem://o")
	m.Put("/a", randomBytes(5, 64<<10), time.Now())
	release := m.Gate()
	defer release()
	s := New(newCache(t, m), Config{Workers: 1})
	defer s.Close()
	id, err := s.Stage(alice, []backend.Request{{Path: "/a"}})
	if err != nil {
		t.Fatal(err)
	}
	id2, _ := s.Stage(alice, []backend.Request{{Path: "/a"}})
	if !strings.HasPrefix(id, "hepcache-") || len(id) != len("hepcache-")+32 || id == id2 {
		t.Fatalf("ids %q and %q: want hepcache- and 32 random hex digits each", id, id2)
	}
	anon := backend.HostOwner("192.0.2.7:40000")
	for _, who := range []backend.Owner{bob, anon, backend.HostOwner("alice")} {
		if _, err := s.StageStatus(who, id); !errors.Is(err, backend.ErrForbidden) {
			t.Errorf("%s queries alice's job: %v", who.Name, err)
		}
		if err := s.CancelStage(who, id); !errors.Is(err, backend.ErrForbidden) {
			t.Errorf("%s cancels alice's job: %v", who.Name, err)
		}
	}
	if _, err := s.StageStatus(alice, id); err != nil {
		t.Fatalf("alice queries her job: %v", err)
	}
	if _, err := s.StageStatus(backend.AdminOwner, id); err != nil {
		t.Fatalf("the admin queries alice's job: %v", err)
	}
	if err := s.CancelStage(backend.AdminOwner, id2); err != nil {
		t.Fatalf("the admin cancels alice's job: %v", err)
	}
	if err := s.CancelStage(alice, id); err != nil {
		t.Fatalf("alice cancels her job: %v", err)
	}
	// An anonymous host owns its jobs, whatever port it comes from.
	aid, _ := s.Stage(anon, []backend.Request{{Path: "/a"}})
	if _, err := s.StageStatus(backend.HostOwner("192.0.2.7:40001"), aid); err != nil {
		t.Fatalf("same host, another connection: %v", err)
	}
}

// TestListMemoryBounded (issue 21, item 2): the lists of unfinished jobs
// stay within MaxListBytes (more is refused as busy), and finished jobs keep
// counts, not lists: their memory goes back.
func TestListMemoryBounded(t *testing.T) {
	m := origin.NewMem("mem://o")
	release := m.Gate()
	s := New(newCache(t, m), Config{Workers: 1, MaxListBytes: 16 << 20})
	defer s.Close()
	name := func(j, i int) string {
		// 200-byte names: a 2 MB list, as the 12 MB posts of the issue.
		return fmt.Sprintf("/store/%03d/%06d/%s", j, i, strings.Repeat("x", 180))
	}
	// The one worker waits at the gate in the first file while the heap
	// is measured: the files it would fail meanwhile are not the lists'.
	m.Put(name(0, 0), randomBytes(6, 64<<10), time.Now())
	list := func(j int) []backend.Request {
		reqs := make([]backend.Request, 10000)
		for i := range reqs {
			reqs[i] = backend.Request{Path: name(j, i)}
		}
		return reqs
	}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	base := heap()
	accepted := 0
	var ids []string
	for j := range 20 {
		id, err := s.Stage(alice, list(j))
		if errors.Is(err, backend.ErrBusy) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		accepted++
		ids = append(ids, id)
	}
	if accepted == 0 || accepted == 20 {
		t.Fatalf("%d of 20 lists of 10000 files accepted under 16 MiB", accepted)
	}
	held := int64(heap()) - int64(base) // may be negative: the heap also shrinks
	t.Logf("%d lists accepted: %d bytes accounted, heap +%d (%d bytes a file)", accepted, s.Stats().ListBytes.Load(), held, int(held)/(accepted*10000))
	// The accounting is of the heap without the race detector's extra
	// (about 150 bytes a file under -race).
	if st := s.Stats().ListBytes.Load(); st > 16<<20 || float64(held) > 1.3*float64(st) {
		t.Fatalf("lists of unfinished jobs: accounted %d bytes (bound %d), heap grew %d: fileOverhead too small?", st, 16<<20, held)
	}
	release()
	for _, id := range ids {
		eventually.True(t, func() bool { j, err := s.StageStatus(alice, id); return err == nil && j.Finished() }, "job %s finished", id)
	}
	// The last file's state is set just before its job is compacted.
	eventually.True(t, func() bool { return s.Stats().ListBytes.Load() == 0 }, "finished jobs to account no list")
	if after := heap(); after > base+2<<20 {
		t.Fatalf("%d finished jobs hold %d bytes: lists kept", accepted, after-base)
	}
	j, _ := s.StageStatus(alice, ids[0])
	if j.Files != nil || j.Total != 10000 || j.Counts[backend.StageFailed] != 9999 || j.Counts[backend.StageDone] != 1 || j.FirstError == "" {
		t.Fatalf("finished job: total %d, counts %v, %d files kept, first error %q", j.Total, j.Counts, len(j.Files), j.FirstError)
	}
}
