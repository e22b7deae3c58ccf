//go:build !linux

package wan

import (
	"runtime"
	"time"
)

// nanosleep yields until d has passed: without a precise sleep on this
// platform the last few milliseconds are spun.
func nanosleep(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
		runtime.Gosched()
	}
}
