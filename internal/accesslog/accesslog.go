// Package accesslog writes the access log: one JSON line per closed file
// (docs/access-log.md), the trace format that `hepcache sim` replays. Records
// are queued and written by one goroutine, so a slow disk never blocks a
// client; if the queue is full a record is dropped and counted.
package accesslog

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hepcache/hepcache/internal/cache"
)

// queueLen bounds the records waiting to be written.
const queueLen = 4096

// Log is an access log. Safe for concurrent use.
type Log struct {
	path string
	ch   chan cache.AccessRecord
	// Written and Dropped count records.
	Written, Dropped atomic.Int64

	// mu protects w and f (swapped by Reopen).
	mu sync.Mutex
	w  *bufio.Writer
	f  *os.File // nil for stdout or a plain writer

	done      chan struct{}
	closeOnce sync.Once
}

// Open starts a log writing to path ("-" is stdout), appending.
func Open(path string) (*Log, error) {
	l := &Log{path: path, ch: make(chan cache.AccessRecord, queueLen), done: make(chan struct{})}
	if err := l.open(); err != nil {
		return nil, err
	}
	go l.run()
	return l, nil
}

// New starts a log writing to w (for tests and embedding).
func New(w io.Writer) *Log {
	l := &Log{ch: make(chan cache.AccessRecord, queueLen), done: make(chan struct{}), w: bufio.NewWriter(w)}
	go l.run()
	return l
}

func (l *Log) open() error {
	if l.path == "-" {
		l.w = bufio.NewWriter(os.Stdout)
		return nil
	}
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("access log: %w", err)
	}
	l.f, l.w = f, bufio.NewWriter(f)
	return nil
}

// Reopen opens the path anew and writes there from now on (logrotate moved
// the file and sent SIGHUP). If the path cannot be opened, the log goes on
// writing to the file it had, so no record is lost to a failed rotation.
func (l *Log) Reopen() error {
	if l.path == "" || l.path == "-" {
		return nil
	}
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("access log: reopen: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.w.Flush()
	old := l.f
	l.f, l.w = f, bufio.NewWriter(f)
	if old != nil {
		return old.Close()
	}
	return nil
}

// Record queues one record; it never blocks.
func (l *Log) Record(r cache.AccessRecord) {
	select {
	case l.ch <- r:
	default:
		l.Dropped.Add(1)
	}
}

func (l *Log) run() {
	defer close(l.done)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case r, ok := <-l.ch:
			if !ok {
				l.mu.Lock()
				l.w.Flush()
				l.mu.Unlock()
				return
			}
			b, err := json.Marshal(r)
			if err != nil {
				continue
			}
			l.mu.Lock()
			l.w.Write(b)
			l.w.WriteByte('\n')
			l.mu.Unlock()
			l.Written.Add(1)
		case <-tick.C:
			l.mu.Lock()
			l.w.Flush()
			l.mu.Unlock()
		}
	}
}

// Close writes what is queued and closes the file. Record must not be called
// after Close.
func (l *Log) Close() error {
	var err error
	l.closeOnce.Do(func() {
		close(l.ch)
		<-l.done
		if l.f != nil {
			err = l.f.Close()
		}
	})
	return err
}
