// Package procstat samples a process's resident memory and CPU time from
// /proc, for the benchmarks that compare hepcache's footprint with XCache's.
package procstat

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// clockTicks is USER_HZ, the unit of utime/stime in /proc/PID/stat (100 on
// every Linux platform Go runs on).
const clockTicks = 100

// RSS returns the resident set size of pid in bytes.
func RSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				kb, err := strconv.ParseInt(f[1], 10, 64)
				return kb << 10, err
			}
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}

// CPU returns the user+system CPU time pid has used.
func CPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the parenthesised command name; utime and stime are
	// fields 14 and 15 of the whole line.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("bad /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("bad /proc/%d/stat", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad /proc/%d/stat", pid)
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// Sampler records the peak RSS and the CPU time of a process between Start
// and Stop.
type Sampler struct {
	pid      int
	interval time.Duration

	mu               sync.Mutex
	peak             int64
	startCPU, endCPU time.Duration
	start            time.Time
	wall             time.Duration
	stop             chan struct{}
	done             chan struct{}
}

// Start begins sampling pid every interval.
func Start(pid int, interval time.Duration) *Sampler {
	s := &Sampler{pid: pid, interval: interval, stop: make(chan struct{}), done: make(chan struct{})}
	s.startCPU, _ = CPU(pid)
	s.start = time.Now()
	s.sample()
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.sample()
			}
		}
	}()
	return s
}

func (s *Sampler) sample() {
	if r, err := RSS(s.pid); err == nil {
		s.mu.Lock()
		if r > s.peak {
			s.peak = r
		}
		s.mu.Unlock()
	}
}

// Stop ends sampling and returns the peak RSS, the CPU time used and the wall
// time elapsed.
func (s *Sampler) Stop() (peakRSS int64, cpu, wall time.Duration) {
	close(s.stop)
	<-s.done
	s.sample()
	s.endCPU, _ = CPU(s.pid)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak, s.endCPU - s.startCPU, time.Since(s.start)
}
