// Package eventually waits in tests for a condition that another goroutine or
// process makes true, with a deadline, so that no test polls forever and no
// test encodes a guess about how long something takes.
package eventually

import (
	"fmt"
	"testing"
	"time"
)

// Timeout is how long True waits before failing. It is generous on purpose:
// the deadline exists to end a hung test, not to measure speed, and test
// machines are shared and noisy.
const Timeout = 60 * time.Second

// poll is the interval between checks of the condition.
const poll = 10 * time.Millisecond

// True waits until cond returns true and fails the test with what (formatted
// with args) if it does not within Timeout.
func True(tb testing.TB, cond func() bool, what string, args ...any) {
	tb.Helper()
	if err := Within(Timeout, cond); err != nil {
		tb.Fatalf("waited %v for %s: %v", Timeout, fmt.Sprintf(what, args...), err)
	}
}

// NoError waits until fn returns nil and fails the test with the last error
// if it does not within Timeout.
func NoError(tb testing.TB, fn func() error, what string, args ...any) {
	tb.Helper()
	var last error
	if err := Within(Timeout, func() bool { last = fn(); return last == nil }); err != nil {
		tb.Fatalf("waited %v for %s: last error: %v", Timeout, fmt.Sprintf(what, args...), last)
	}
}

// Within polls cond until it returns true or d has passed; it returns an
// error in the second case. It is for helpers that report failure
// themselves (test mains, setup code without a testing.TB).
func Within(d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("condition not reached within %v", d)
		}
		time.Sleep(poll)
	}
	return nil
}
