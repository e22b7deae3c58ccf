package cache

import "sync"

// diskQueue runs disk writes first in, first out, on at most max goroutines
// that exist only while there is work. A piece waiting for the disk then
// holds its buffer but no goroutine: when the disk is slower than the
// origins (at 32 cold clients over 150 ms here, a thousand pieces wait for
// it) their stacks were a third of the process's memory beyond the buffers.
type diskQueue struct {
	max int

	// mu protects jobs and running.
	mu      sync.Mutex
	jobs    []func()
	running int
}

func newDiskQueue(max int) *diskQueue { return &diskQueue{max: max} }

// do queues job; it runs once the writes queued before it have started.
func (q *diskQueue) do(job func()) {
	q.mu.Lock()
	q.jobs = append(q.jobs, job)
	if q.running >= q.max {
		q.mu.Unlock()
		return
	}
	q.running++
	q.mu.Unlock()
	go q.drain()
}

// drain runs queued jobs until there are none.
func (q *diskQueue) drain() {
	for {
		q.mu.Lock()
		if len(q.jobs) == 0 {
			q.jobs = q.jobs[:0:0] // drop the backing array of a past burst
			q.running--
			q.mu.Unlock()
			return
		}
		job := q.jobs[0]
		q.jobs[0] = nil
		q.jobs = q.jobs[1:]
		q.mu.Unlock()
		job()
	}
}
