package wan

import (
	"syscall"
	"time"
)

// nanosleep blocks the calling thread for d without the Go timer's
// millisecond granularity.
func nanosleep(d time.Duration) {
	ts := syscall.NsecToTimespec(d.Nanoseconds())
	syscall.Nanosleep(&ts, nil) // EINTR: the caller loops on the deadline
}
