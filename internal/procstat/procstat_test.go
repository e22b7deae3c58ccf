package procstat

import (
	"os"
	"testing"
	"time"
)

func TestOwnProcess(t *testing.T) {
	pid := os.Getpid()
	s := Start(pid, time.Millisecond)
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	deadline := time.Now().Add(200 * time.Millisecond)
	x := 0
	for time.Now().Before(deadline) {
		x++
	}
	peak, cpu, wall := s.Stop()
	if peak < 64<<20 {
		t.Fatalf("peak RSS %d after touching 64 MiB", peak)
	}
	if cpu <= 0 || wall <= 0 {
		t.Fatalf("cpu %v wall %v", cpu, wall)
	}
	_ = buf[x%len(buf)]
}
