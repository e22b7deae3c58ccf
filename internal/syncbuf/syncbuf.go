// Package syncbuf is a bytes.Buffer that goroutines may write while
// another reads it: the log of a server a test runs, the output of a
// process it started, read while they still write.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is safe for concurrent Write and String. The zero value is
// empty and ready.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
