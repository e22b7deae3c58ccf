// Package fetchwindow sizes how many bytes the cache keeps requested from
// each origin at once, the way TCP congestion control and BBR size a
// sender's window: it measures each origin's delivery rate and round-trip
// time and keeps about two bandwidth-delay products in flight, growing the
// window while the rate still rises and backing off when it does not.
//
// A near origin (1 ms) delivering 1 GB/s needs a few MB in flight; one
// 150 ms away delivering the same needs 300 MB. A fixed bound either
// starves the far origin or lets a slow one hold memory that the others
// could use. Windows grow only with what they deliver, and Set shares the
// cache-wide cap between the origins that are busy.
package fetchwindow

import (
	"context"
	"sync"
	"time"
)

// Tuning. The controller acts once per period: the larger of minPeriod and
// the origin's round-trip time, so that each step sees its effect.
const (
	minPeriod = 20 * time.Millisecond
	// startGain is the growth per period while the rate still rises
	// (BBR's startup gain is 2/ln 2; doubling is enough at these rates).
	startGain = 2.0
	// riseFactor: a period whose rate is below this times the best so far
	// counts as "no longer rising"; after plateauPeriods of them the
	// window settles at headroom x bandwidth x RTT.
	riseFactor     = 1.25
	plateauPeriods = 3
	headroom       = 2.0
	// probeEvery periods at the plateau, the window grows by probeGain for
	// one period to find bandwidth that appeared.
	probeEvery = 8
	probeGain  = 1.25
	// rateWindow periods of delivery rate are kept: the bandwidth estimate
	// is their maximum, so one slow period does not shrink the window.
	rateWindow = 10
)

// Clock is time, a seam for tests.
type Clock interface{ Now() time.Time }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// Set holds the windows of all origins under one cap.
type Set struct {
	cap, min int64
	clock    Clock

	mu      sync.Mutex
	windows map[string]*Window
}

// NewSet returns windows capped at cap bytes in flight over all origins
// together, each starting at (and never below) min bytes. clock nil: real
// time.
func NewSet(cap, minWin int64, clock Clock) *Set {
	if clock == nil {
		clock = realClock{}
	}
	minWin = max(1, min(minWin, cap))
	return &Set{cap: cap, min: minWin, clock: clock, windows: map[string]*Window{}}
}

// Get returns the window of origin o, creating it.
func (s *Set) Get(o string) *Window {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.windows[o]
	if w == nil {
		w = &Window{set: s, name: o, size: s.min, start: s.clock.Now(), periodStart: s.clock.Now(), minRTT: -1}
		s.windows[o] = w
	}
	return w
}

// fairShare is what one busy origin may hold when the windows together
// want more than the cap: the cap split evenly between the busy origins.
// MUST NOT be called with a window's lock held.
func (s *Set) fairShare() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var want int64
	busy := 0
	for _, w := range s.windows {
		w.mu.Lock()
		if w.inflight > 0 || len(w.queue) > 0 {
			busy++
			want += w.size
		}
		w.mu.Unlock()
	}
	if want <= s.cap || busy == 0 {
		return s.cap
	}
	return s.cap / int64(busy)
}

// Waiting returns the bytes of the urgent requests (a client waits for
// them) queued in every window: fetches that the windows, full, have not
// admitted yet.
func (s *Set) Waiting() int64 {
	s.mu.Lock()
	ws := make([]*Window, 0, len(s.windows))
	for _, w := range s.windows {
		ws = append(ws, w)
	}
	s.mu.Unlock()
	var n int64
	for _, w := range ws {
		w.mu.Lock()
		for _, t := range w.queue {
			if !t.urgent {
				break // urgent ones come first
			}
			n += t.n
		}
		w.mu.Unlock()
	}
	return n
}

// Stat is a window's state, for metrics.
type Stat struct {
	Origin             string
	Window, InFlight   int64
	RateBps            float64 // delivery rate estimate (bytes/s)
	MinRTT             time.Duration
	Limited, Plateaued bool
}

// Stats returns every window's state.
func (s *Set) Stats() []Stat {
	s.mu.Lock()
	ws := make([]*Window, 0, len(s.windows))
	for _, w := range s.windows {
		ws = append(ws, w)
	}
	s.mu.Unlock()
	out := make([]Stat, len(ws))
	for i, w := range ws {
		w.mu.Lock()
		out[i] = Stat{Origin: w.name, Window: w.size, InFlight: w.inflight, RateBps: w.bestRate(), MinRTT: w.minRTT, Plateaued: w.plateau >= plateauPeriods}
		w.mu.Unlock()
	}
	return out
}

// Window is one origin's bytes in flight.
//
// Requests that do not fit wait in a queue, first come first served (those
// started with urgent ahead of the others), and Release admits from its
// head exactly those that fit now: a thousand queued requests cost a
// thousand small records, not a thousand goroutines woken at every
// Release.
type Window struct {
	set  *Set
	name string

	mu       sync.Mutex
	size     int64 // current window
	inflight int64
	limit    int64 // size, or less while the cap is shared
	// queue holds the requests waiting for room, urgent ones first.
	queue []*Ticket

	start                 time.Time
	periodStart           time.Time
	delivered             int64 // bytes completed this period
	limited               bool  // a request waited for the window this period
	rates                 []float64
	best                  float64 // best rate before this period
	plateau, sincePlateau int
	minRTT                time.Duration
}

// Ticket is a request waiting in a Window's queue.
type Ticket struct {
	w      *Window
	n      int64
	urgent bool
	// admit is called, outside the window's lock, with nil once the bytes
	// are taken, or with ctx's error if ctx ended first.
	admit func(error)
	// stop undoes the context.AfterFunc watching ctx; set before the
	// ticket can be admitted.
	stop func() bool
	// out is set, under the window's lock, once the ticket left the queue
	// (admitted or cancelled).
	out bool
}

// Acquire waits until n more bytes may be requested from the origin, or
// ctx ends.
func (w *Window) Acquire(ctx context.Context, n int64) error {
	ch := make(chan error, 1)
	w.Start(ctx, n, false, func(err error) { ch <- err })
	return <-ch
}

// Start takes n bytes of the window for a request and then calls admit
// with nil; if they do not fit now, the request waits in the queue
// without blocking the caller, and admit is called later from the
// goroutine of the Release that made room. If ctx ends first, admit gets
// its error instead. urgent requests (a client waits for them) go ahead of
// the others (read-ahead). admit is called exactly once, never with the
// window's lock held, and must not block; it may run before Start
// returns. The Ticket (nil if admitted at once) can Hurry the request.
func (w *Window) Start(ctx context.Context, n int64, urgent bool, admit func(error)) *Ticket {
	share := w.set.fairShare()
	w.mu.Lock()
	if len(w.queue) == 0 && w.admitLocked(n, share) {
		w.mu.Unlock()
		admit(nil)
		return nil
	}
	w.limited = true
	wt := &Ticket{w: w, n: n, urgent: urgent, admit: admit}
	w.enqueueLocked(wt)
	// Registered under the lock: no Release can admit wt before stop is
	// set. The function itself takes the lock, so it runs after.
	wt.stop = context.AfterFunc(ctx, func() { w.cancel(wt, ctx.Err()) })
	w.mu.Unlock()
	return wt
}

// enqueueLocked puts wt at the end of its class: urgent requests after
// the urgent ones, before read-ahead; read-ahead last.
// MUST be called with w.mu held.
func (w *Window) enqueueLocked(wt *Ticket) {
	i := len(w.queue)
	if wt.urgent {
		for i > 0 && !w.queue[i-1].urgent {
			i--
		}
	}
	w.queue = append(w.queue, nil)
	copy(w.queue[i+1:], w.queue[i:])
	w.queue[i] = wt
}

// dequeueLocked takes wt out of the queue.
// MUST be called with w.mu held.
func (w *Window) dequeueLocked(wt *Ticket) {
	for i, q := range w.queue {
		if q == wt {
			w.queue = append(w.queue[:i], w.queue[i+1:]...)
			w.queue[len(w.queue):cap(w.queue)][0] = nil
			return
		}
	}
}

// Hurry makes a queued read-ahead request urgent: a client now waits for
// its bytes, which would otherwise wait behind every read-ahead request
// queued before them (other clients' blocks far ahead of their readers).
// A no-op once the request left the queue, or on nil.
func (t *Ticket) Hurry() {
	if t == nil {
		return
	}
	w := t.w
	share := w.set.fairShare()
	w.mu.Lock()
	if t.out || t.urgent {
		w.mu.Unlock()
		return
	}
	w.dequeueLocked(t)
	t.urgent = true
	w.enqueueLocked(t)
	admitted := w.admitQueueLocked(share)
	w.mu.Unlock()
	w.notify(admitted)
}

// cancel takes wt out of the queue, unless it was admitted meanwhile, and
// tells it why.
func (w *Window) cancel(wt *Ticket, err error) {
	share := w.set.fairShare()
	w.mu.Lock()
	if wt.out {
		w.mu.Unlock()
		return
	}
	wt.out = true
	w.dequeueLocked(wt)
	// wt may have been what held the others back.
	admitted := w.admitQueueLocked(share)
	w.mu.Unlock()
	wt.admit(err)
	w.notify(admitted)
}

// admitQueueLocked takes the bytes of the queued requests that fit, in
// order, and returns them for notify.
// MUST be called with w.mu held.
func (w *Window) admitQueueLocked(share int64) []*Ticket {
	var admitted []*Ticket
	for len(w.queue) > 0 {
		wt := w.queue[0]
		if !w.admitLocked(wt.n, share) {
			break
		}
		wt.out = true
		w.queue[0] = nil
		w.queue = w.queue[1:]
		admitted = append(admitted, wt)
	}
	return admitted
}

// notify tells admitted waiters that their bytes are taken.
// MUST NOT be called with w.mu held.
func (w *Window) notify(admitted []*Ticket) {
	for _, wt := range admitted {
		wt.stop()
		wt.admit(nil)
	}
}

// TryAcquire takes n bytes if the window has room now and nobody waits.
func (w *Window) TryAcquire(n int64) bool {
	share := w.set.fairShare()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) > 0 {
		w.limited = true
		return false
	}
	return w.admitLocked(n, share)
}

// admitLocked sets the limit from the window and the cap's share and takes
// n bytes if they fit; if not, the period counts as window-limited.
func (w *Window) admitLocked(n, share int64) bool {
	w.limit = min(w.size, share)
	if w.fitsLocked(n) {
		w.inflight += n
		return true
	}
	w.limited = true
	return false
}

// fitsLocked: n more bytes fit under the limit (one request always fits
// an empty window, however large).
func (w *Window) fitsLocked(n int64) bool { return w.inflight == 0 || w.inflight+n <= w.limit }

// Release returns n bytes that were acquired and delivered in rtt (from the
// request to its last byte), or abandoned (delivered false), and admits
// the queued requests that now fit.
func (w *Window) Release(n int64, rtt time.Duration, delivered bool) {
	now := w.set.clock.Now()
	share := w.set.fairShare()
	w.mu.Lock()
	w.inflight -= n
	if delivered {
		w.delivered += n
		if rtt > 0 && (w.minRTT < 0 || rtt < w.minRTT) {
			w.minRTT = rtt
		}
	}
	w.stepLocked(now)
	admitted := w.admitQueueLocked(share)
	w.mu.Unlock()
	w.notify(admitted)
}

func (w *Window) bestRate() float64 {
	best := 0.0
	for _, r := range w.rates {
		best = max(best, r)
	}
	return best
}

// stepLocked ends the period if it has run its course and resizes the
// window.
func (w *Window) stepLocked(now time.Time) {
	period := minPeriod
	if w.minRTT > period {
		period = w.minRTT
	}
	el := now.Sub(w.periodStart)
	if el < period {
		return
	}
	rate := float64(w.delivered) / el.Seconds()
	limited := w.limited
	w.periodStart, w.delivered, w.limited = now, 0, false
	w.rates = append(w.rates, rate)
	if len(w.rates) > rateWindow {
		w.rates = w.rates[len(w.rates)-rateWindow:]
	}
	rising := rate >= riseFactor*w.best
	w.best = max(w.best, rate)
	if !limited {
		// The window was not what held the origin back (few requests):
		// nothing learnt about its capacity.
		return
	}
	switch {
	case rising && w.plateau < plateauPeriods:
		w.plateau = 0
		w.size = int64(float64(w.size) * startGain)
	default:
		w.plateau++
		if w.plateau < plateauPeriods {
			return
		}
		// Settled: about two bandwidth-delay products, probing now and
		// then for more.
		bdp := w.bestRate() * max(w.minRTT, minPeriod).Seconds()
		target := int64(headroom * bdp)
		w.sincePlateau++
		if w.sincePlateau%probeEvery == 0 {
			target = int64(float64(target) * probeGain)
			w.plateau = plateauPeriods - 1 // the probe's rate decides anew
		}
		w.size = target
	}
	w.size = min(max(w.size, w.set.min), w.set.cap)
}
