package fetchwindow

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time { return c.t }

// link is a model origin: it delivers bytes at rate bytes/s, one request
// after the other, each rtt after it was sent at the earliest.
type link struct {
	rtt    time.Duration
	rate   float64
	busy   time.Time // the link is busy sending until then
	queue  []req
	served int64
}

type req struct {
	n          int64
	sent, done time.Time
}

// simulate drives a client that keeps every request the window allows in
// flight, pieces of 128 KiB, for d, and returns the bytes delivered.
func simulate(clk *fakeClock, ws []*Window, links []*link, d time.Duration) []int64 {
	const piece = 128 << 10
	end := clk.t.Add(d)
	delivered := make([]int64, len(ws))
	for clk.t.Before(end) {
		for i, w := range ws {
			l := links[i]
			for w.TryAcquire(piece) {
				start := clk.t.Add(l.rtt / 2)
				if l.busy.After(start) {
					start = l.busy
				}
				l.busy = start.Add(time.Duration(float64(piece) / l.rate * 1e9))
				l.queue = append(l.queue, req{n: piece, sent: clk.t, done: l.busy.Add(l.rtt / 2)})
			}
		}
		clk.t = clk.t.Add(time.Millisecond)
		for i, w := range ws {
			l := links[i]
			kept := l.queue[:0]
			for _, r := range l.queue {
				if !r.done.After(clk.t) {
					w.Release(r.n, r.done.Sub(r.sent), true)
					delivered[i] += r.n
					continue
				}
				kept = append(kept, r)
			}
			l.queue = kept
		}
	}
	return delivered
}

// TestFindsTheBandwidthDelayProduct: a window starting at 4 MiB in front
// of an origin 150 ms away that can deliver 1 GB/s grows to fill the link;
// one 1 ms away stays small.
func TestFindsTheBandwidthDelayProduct(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rtt     time.Duration
		minRate float64 // fraction of the link's rate reached in the last second
		maxWin  int64
	}{
		{"far", 150 * time.Millisecond, 0.9, 1 << 30},
		{"near", time.Millisecond, 0.9, 64 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &fakeClock{t: time.Unix(0, 0)}
			s := NewSet(2<<30, 4<<20, clk)
			w := s.Get("o")
			l := &link{rtt: tc.rtt, rate: 1e9}
			simulate(clk, []*Window{w}, []*link{l}, 4*time.Second)
			got := simulate(clk, []*Window{w}, []*link{l}, time.Second)[0]
			st := s.Stats()[0]
			t.Logf("window %d MB, rate estimate %.0f MB/s, min RTT %v, delivered %d MB/s", st.Window>>20, st.RateBps/1e6, st.MinRTT, got>>20)
			if float64(got) < tc.minRate*l.rate {
				t.Errorf("delivered %d bytes in a second, want at least %.0f%% of %.0f", got, 100*tc.minRate, l.rate)
			}
			if st.Window > tc.maxWin {
				t.Errorf("window %d, want at most %d", st.Window, tc.maxWin)
			}
		})
	}
}

// TestCapSharedBetweenOrigins: two far origins under a cap smaller than
// both want each get about half of it; neither starves.
func TestCapSharedBetweenOrigins(t *testing.T) {
	clk := &fakeClock{t: time.Unix(0, 0)}
	s := NewSet(64<<20, 4<<20, clk)
	a, b := s.Get("a"), s.Get("b")
	la, lb := &link{rtt: 150 * time.Millisecond, rate: 1e9}, &link{rtt: 150 * time.Millisecond, rate: 1e9}
	simulate(clk, []*Window{a, b}, []*link{la, lb}, 3*time.Second)
	got := simulate(clk, []*Window{a, b}, []*link{la, lb}, 2*time.Second)
	t.Logf("delivered a %d MB, b %d MB", got[0]>>20, got[1]>>20)
	if got[0] == 0 || got[1] == 0 || float64(got[0]) < 0.6*float64(got[1]) || float64(got[1]) < 0.6*float64(got[0]) {
		t.Fatalf("unfair share: %d and %d bytes", got[0], got[1])
	}
	// 64 MiB per 150 ms is at most ~450 MB/s together.
	if total := got[0] + got[1]; float64(total) > 2*1.1*(64<<20)/0.15 {
		t.Fatalf("the cap was not respected: %d bytes in 2 s", total)
	}
}

// TestQueueAdmitsInOrderUrgentFirst: requests that do not fit wait without
// a goroutine each; Release admits from the head exactly those that fit,
// urgent ones (a client waits) before read-ahead; a cancelled request
// leaves the queue and gets its context's error.
func TestQueueAdmitsInOrderUrgentFirst(t *testing.T) {
	clk := &fakeClock{t: time.Unix(0, 0)}
	w := NewSet(1<<30, 4, clk).Get("o")
	var (
		mu    sync.Mutex // protects order
		order []string
	)
	cancelled := make(chan struct{})
	got := func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(order, ",")
	}
	start := func(ctx context.Context, name string, urgent bool) {
		w.Start(ctx, 2, urgent, func(err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				order = append(order, name+":"+err.Error())
				close(cancelled)
				return
			}
			order = append(order, name)
		})
	}
	ctx := context.Background()
	start(ctx, "a", false)
	start(ctx, "b", false) // 4 of 4 in flight
	cctx, cancel := context.WithCancel(ctx)
	start(ctx, "ahead1", false)
	start(cctx, "ahead2", false)
	start(ctx, "demand", true)
	if g := got(); g != "a,b" {
		t.Fatalf("admitted %s, want a,b", g)
	}
	w.Release(2, time.Millisecond, true)
	if g := got(); g != "a,b,demand" {
		t.Fatalf("admitted %s, want the urgent request first", g)
	}
	cancel()
	<-cancelled // AfterFunc runs in its own goroutine
	w.Release(2, time.Millisecond, true)
	if g := got(); g != "a,b,demand,ahead2:context canceled,ahead1" {
		t.Fatalf("order %s", g)
	}
}

// TestHurry: a read-ahead request a client now waits for goes ahead of the
// read-ahead queued before it, behind the urgent requests already there;
// Hurry after admission, or on a nil ticket, changes nothing.
func TestHurry(t *testing.T) {
	clk := &fakeClock{t: time.Unix(0, 0)}
	w := NewSet(1<<30, 2, clk).Get("o")
	var order []string // admit runs on this goroutine: Start or Release
	start := func(name string, urgent bool) *Ticket {
		return w.Start(context.Background(), 2, urgent, func(err error) {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			order = append(order, name)
		})
	}
	if tk := start("first", false); tk != nil {
		t.Fatal("a request admitted at once has a ticket")
	}
	var nilTicket *Ticket
	nilTicket.Hurry()
	ahead1 := start("ahead1", false)
	ahead2 := start("ahead2", false)
	start("demand", true)
	ahead2.Hurry()
	ahead2.Hurry() // already urgent: stays where it is
	for range 3 {
		w.Release(2, time.Millisecond, true)
	}
	if g := strings.Join(order, ","); g != "first,demand,ahead2,ahead1" {
		t.Fatalf("admitted %s, want first,demand,ahead2,ahead1", g)
	}
	ahead1.Hurry() // admitted: nothing to do
	if w.inflight != 2 || len(w.queue) != 0 {
		t.Fatalf("in flight %d, queued %d; want 2, 0", w.inflight, len(w.queue))
	}
}
