package prestage

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/origin"
)

func newCache(t *testing.T, m *origin.Mem) *cache.Cache {
	t.Helper()
	c, err := cache.New(&cache.Config{Dir: t.TempDir(), BlockSize: 64 << 10, PieceSize: 16 << 10,
		Origins: origin.ResolverFunc(func(context.Context, string) (origin.Origin, error) { return m, nil })})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// alice and bob are two authenticated submitters.
var alice, bob = backend.UserOwner("alice"), backend.UserOwner("bob")

func waitFinished(t *testing.T, s *Stager, id string) backend.StageJob {
	t.Helper()
	var j backend.StageJob
	eventually.True(t, func() bool {
		var err error
		j, err = s.StageStatus(alice, id)
		return err == nil && j.Finished()
	}, "job %s finishes", id)
	return j
}

// Staged files end up complete in the cache, a missing file fails with the
// origin's reason, and staging a complete file again reads nothing from
// the origin.
func TestStageFetchesWholeFiles(t *testing.T) {
	m := origin.NewMem("mem://o")
	a, b := randomBytes(1, 1<<20+17), randomBytes(2, 300<<10)
	m.Put("/d/a", a, time.Now())
	m.Put("/d/b", b, time.Now())
	c := newCache(t, m)
	s := New(c, Config{Workers: 2})
	defer s.Close()

	id, err := s.Stage(alice, []backend.Request{{Path: "/d/a"}, {Path: "/d/b"}, {Path: "/d/missing"}})
	if err != nil {
		t.Fatal(err)
	}
	j := waitFinished(t, s, id)
	if j.Total != 3 || j.Counts[backend.StageDone] != 2 || j.Counts[backend.StageFailed] != 1 || j.Files != nil {
		t.Errorf("finished job: %+v", j)
	}
	if j.Bytes != int64(len(a)+len(b)) || j.Size != j.Bytes {
		t.Errorf("finished job: %d of %d bytes, want %d", j.Bytes, j.Size, len(a)+len(b))
	}
	if !strings.Contains(j.FirstError, "/d/missing") {
		t.Errorf("first error %q", j.FirstError)
	}
	if got := s.Stats().Done.Load(); got != 2 {
		t.Errorf("done counter %d", got)
	}
	if got := s.Stats().Failed.Load(); got != 1 {
		t.Errorf("failed counter %d", got)
	}
	if got := m.BytesRead.Load(); got != int64(len(a)+len(b)) {
		t.Errorf("origin sent %d bytes for %d", got, len(a)+len(b))
	}

	// The cache holds both complete: NoFetch readers get every byte.
	for p, data := range map[string][]byte{"/d/a": a, "/d/b": b} {
		f, err := c.Open(context.Background(), backend.Request{Path: p, NoFetch: true})
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(data))
		if _, err := f.ReadAt(context.Background(), got, 0); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s after staging: %v", p, err)
		}
		f.Close()
	}

	before := m.BytesRead.Load()
	id, err = s.Stage(alice, []backend.Request{{Path: "/d/a"}})
	if err != nil {
		t.Fatal(err)
	}
	if j := waitFinished(t, s, id); j.Counts[backend.StageDone] != 1 {
		t.Fatalf("second stage: %+v", j)
	}
	if m.BytesRead.Load() != before {
		t.Fatal("staging a complete file read from the origin")
	}
	if txt := j.Text(); !bytes.Contains([]byte(txt), []byte("failed")) || !bytes.Contains([]byte(txt), []byte("/d/missing")) {
		t.Fatalf("text: %q", txt)
	}
}

// A cancelled job stops its files, a full queue refuses with ErrBusy and
// Close ends everything.
func TestCancelBusyClose(t *testing.T) {
	m := origin.NewMem("mem://o")
	for _, p := range []string{"/a", "/b", "/c"} {
		m.Put(p, randomBytes(3, 256<<10), time.Now())
	}
	release := m.Gate()
	defer release()
	c := newCache(t, m)
	s := New(c, Config{Workers: 1, MaxQueued: 2})

	id, err := s.Stage(alice, []backend.Request{{Path: "/a"}, {Path: "/b"}})
	if err != nil {
		t.Fatal(err)
	}
	// The worker holds /a (blocked at the gate), /b waits: one free slot.
	eventually.True(t, func() bool { return s.Stats().Running.Load() == 1 }, "a file is staging")
	if _, err := s.Stage(alice, []backend.Request{{Path: "/b"}, {Path: "/c"}}); !errors.Is(err, backend.ErrBusy) {
		t.Fatalf("over the queue bound: %v", err)
	}
	if err := s.CancelStage(alice, id); err != nil {
		t.Fatalf("cancel of a known job: %v", err)
	}
	if err := s.CancelStage(alice, "nope"); !errors.Is(err, backend.ErrUnknownJob) {
		t.Fatalf("cancel of an unknown job: %v", err)
	}
	j := waitFinished(t, s, id)
	if j.Counts[backend.StageCancelled] != 2 {
		t.Errorf("after cancel: %+v", j)
	}
	if len(s.Jobs(0)) != 1 {
		t.Fatalf("jobs: %v", s.Jobs(0))
	}
	s.Close()
	if _, err := s.Stage(alice, []backend.Request{{Path: "/c"}}); !errors.Is(err, ErrClosed) {
		t.Fatalf("stage after close: %v", err)
	}
}
