// Package logfile is the server log's file (log.file): appended to, and
// reopened at the same path when logrotate has moved it (SIGHUP), so no
// line is written to the rotated file afterwards nor lost in between.
package logfile

import (
	"fmt"
	"os"
	"sync"
)

// File is an append-only log file. Safe for concurrent use.
type File struct {
	path string
	// mu protects f: a line is written whole to one file.
	mu sync.Mutex
	f  *os.File
}

// Open opens path for appending, creating it (mode 0640).
func Open(path string) (*File, error) {
	f, err := open(path)
	if err != nil {
		return nil, err
	}
	return &File{path: path, f: f}, nil
}

func open(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return nil, fmt.Errorf("log.file: %w", err)
	}
	return f, nil
}

// Write writes p (one log line) to the file open now.
func (l *File) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Write(p)
}

// Reopen opens the path anew and writes there from now on. If it cannot
// be opened, the log goes on in the file it had.
func (l *File) Reopen() error {
	f, err := open(l.path)
	if err != nil {
		return fmt.Errorf("reopen: %w", err)
	}
	l.mu.Lock()
	old := l.f
	l.f = f
	l.mu.Unlock()
	return old.Close()
}

// Close closes the file.
func (l *File) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}
