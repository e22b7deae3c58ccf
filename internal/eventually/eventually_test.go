package eventually

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestWithin(t *testing.T) {
	var n atomic.Int32
	if err := Within(time.Minute, func() bool { return n.Add(1) >= 3 }); err != nil {
		t.Fatalf("condition reached on the third poll, got %v", err)
	}
	if n.Load() != 3 {
		t.Fatalf("polled %d times, want 3", n.Load())
	}
	if err := Within(20*time.Millisecond, func() bool { return false }); err == nil {
		t.Fatal("a condition that never holds must time out")
	}
}

func TestNoError(t *testing.T) {
	var n atomic.Int32
	NoError(t, func() error {
		if n.Add(1) < 2 {
			return errors.New("not yet")
		}
		return nil
	}, "second call")
	if n.Load() != 2 {
		t.Fatalf("called %d times, want 2", n.Load())
	}
}
