package wan

import (
	"runtime"
	"time"
)

// Go's timers sleep at least about 1 ms (the runtime's netpoller waits in
// whole milliseconds) and overshoot by up to 1 ms or more under load, which
// would turn a 0.38 ms RTT into 2 ms. sleepUntil therefore waits in three
// stages: a Go timer until coarseGuard before the deadline (cheap,
// cancellable), a thread-blocking nanosleep until spinGuard before it
// (precise to about 100 µs, no CPU), and a yielding spin for the rest
// (spinGuard of CPU at most per wait).
const (
	coarseGuard = 4 * time.Millisecond
	spinGuard   = 150 * time.Microsecond
)

// sleepUntil waits until t or until done is closed; it reports whether t
// was reached. timer is the caller's reusable timer. With precise unset it
// only uses the Go timer (for pacing, where late wake-ups are absorbed by
// the token bucket).
func sleepUntil(t time.Time, done <-chan struct{}, timer *time.Timer, precise bool) bool {
	for {
		d := time.Until(t)
		if d <= 0 {
			return true
		}
		if !precise || d > coarseGuard {
			if precise {
				d -= coarseGuard
			}
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-done:
				timer.Stop()
				return false
			}
			if !precise {
				return true
			}
			continue
		}
		select {
		case <-done:
			return false
		default:
		}
		if d > spinGuard {
			nanosleep(d - spinGuard)
			continue
		}
		runtime.Gosched()
	}
}
