package client

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/xrdtest"
	"github.com/hepcache/hepcache/internal/xrootd/proto"
	"github.com/hepcache/hepcache/origin"
)

// trickler answers reads the way a slow or failing server does: whole,
// in two kXR_oksofar/kXR_ok parts, with a pause inside a payload, or cut
// mid-payload with the connection dropped. Its choices come from a seeded
// source so that a failure can be replayed.
type trickler struct {
	content []byte
	mu      sync.Mutex
	rng     *rand.Rand
}

func (tr *trickler) intn(n int) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.rng.Intn(n)
}

func (tr *trickler) pause() { time.Sleep(time.Duration(tr.intn(3000)) * time.Microsecond) }

func (tr *trickler) serve(w io.Writer, h proto.RequestHeader, data []byte) bool {
	if b := xrdtest.DefaultAnswer(h); b != nil {
		_, err := w.Write(b)
		return err != nil
	}
	ff := fakeFile{content: tr.content}
	var payload []byte
	switch h.RequestID {
	case proto.ReqRead:
		var r proto.ReadRequest
		r.Decode(&h, data)
		payload = tr.content[r.Offset:min(int64(len(tr.content)), r.Offset+int64(r.Length))]
	case proto.ReqReadV:
		for b := data; len(b) >= proto.ReadListItemLen; b = b[proto.ReadListItemLen:] {
			s, _ := proto.DecodeReadSeg(b)
			payload = proto.AppendReadSeg(payload, s)
			payload = append(payload, tr.content[s.Offset:s.Offset+int64(s.Length)]...)
		}
	default:
		resp, hangup := ff.handle(h, data)
		w.Write(resp)
		return hangup
	}
	var err error
	switch tr.intn(4) {
	case 0: // whole
		_, err = w.Write(proto.AppendOK(nil, h.StreamID, payload))
	case 1: // two parts with a pause between
		half := len(payload) / 2
		if _, err = w.Write(proto.AppendOKSoFar(nil, h.StreamID, payload[:half])); err == nil {
			tr.pause()
			_, err = w.Write(proto.AppendOK(nil, h.StreamID, payload[half:]))
		}
	case 2: // a pause inside the final chunk's payload
		b := proto.AppendOK(nil, h.StreamID, payload)
		cut := proto.ResponseHeaderLen + tr.intn(len(payload)+1)
		if _, err = w.Write(b[:cut]); err == nil {
			tr.pause()
			_, err = w.Write(b[cut:])
		}
	case 3: // cut inside the payload, then the connection goes
		b := proto.AppendOK(nil, h.StreamID, payload)
		w.Write(b[:proto.ResponseHeaderLen+tr.intn(len(payload)+1)])
		tr.pause()
		return true
	}
	return err != nil
}

// TestAbandonRace ends contexts at random points of responses that arrive
// whole, in parts, paused inside a payload or cut. Every call must return
// well within chunkGrace plus a reconnect (a lost wake-up in the abandon
// path once parked a read forever), give the right bytes when it succeeds,
// and never be written into after it returned (the race detector sees
// that: the test overwrites every buffer once the call is back).
func TestAbandonRace(t *testing.T) {
	content := make([]byte, 1<<20)
	rand.New(rand.NewSource(1)).Read(content)
	iters := 300
	if testing.Short() {
		iters = 60
	}
	// Widen the window in which an abandoning caller has not yet parked.
	testHookAbandonReceiving = func() { time.Sleep(time.Duration(rand.Intn(500)) * time.Microsecond) }
	defer func() { testHookAbandonReceiving = nil }()
	for _, seed := range []int64{1, 2, 3} {
		tr := &trickler{content: content, rng: rand.New(rand.NewSource(seed))}
		fake := xrdtest.StartFakeStream(t, tr.serve)
		c := newClient(t, func(c *Config) { c.ConnsPerHost = 2; c.StallTimeout = 5 * time.Second })
		f, err := c.Open(ctxT(t), fake.Addr, "/f")
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				rng := rand.New(rand.NewSource(seed*100 + int64(w)))
				for i := 0; i < iters; i++ {
					abandonOne(t, f, content, rng)
				}
			}(w)
		}
		wg.Wait()
	}
}

// abandonOne runs one read, alloc read or readv with a deadline that may
// end before, during or after the answer.
func abandonOne(t *testing.T, f *File, content []byte, rng *rand.Rand) {
	n := 1 + rng.Intn(64<<10)
	off := rng.Int63n(int64(len(content) - n))
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.Intn(4000))*time.Microsecond)
	defer cancel()
	// A hung read would hang the test until go test's timeout; crash with
	// every goroutine's stack instead.
	watchdog := time.AfterFunc(chunkGrace+10*time.Second, func() {
		debug.SetTraceback("all")
		panic(fmt.Sprintf("a read of %d@%d did not return", n, off))
	})
	defer watchdog.Stop()
	want := content[off : off+int64(n)]
	switch rng.Intn(3) {
	case 0:
		p := make([]byte, n)
		k, err := f.ReadAt(ctx, p, off)
		if err == nil && (k != n || !bytes.Equal(p, want)) {
			t.Errorf("ReadAt %d@%d: %d bytes, wrong content", n, off, k)
		}
		clear(p)
	case 1:
		p := make([]byte, n)
		last := 0
		k, err := f.ReadAtProgress(ctx, p, off, func(filled int) { last = filled })
		if err == nil && (k != n || last != n || !bytes.Equal(p, want)) {
			t.Errorf("ReadAtProgress %d@%d: %d bytes (last progress %d), wrong content", n, off, k, last)
		}
		clear(p)
	case 2:
		a := make([]byte, n/2)
		b := make([]byte, n-n/2)
		err := f.ReadV(ctx, []origin.Segment{{Offset: off, Buf: a}, {Offset: off + int64(len(a)), Buf: b}})
		if err == nil && (!bytes.Equal(a, want[:len(a)]) || !bytes.Equal(b, want[len(a):])) {
			t.Errorf("ReadV %d@%d: wrong content", n, off)
		}
		clear(a)
		clear(b)
	}
}
