package xrootd

import (
	"encoding/binary"
	"sync"
	"sync/atomic"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/xrootd/proto"
)

// openFile is a file a client opened on one connection.
type openFile struct {
	f   backend.File
	req backend.Request
	fh  proto.FHandle
	// ops counts the operations in progress on the file; close waits for
	// them so that a read in flight never sees a closed backend file.
	ops sync.WaitGroup
	// authUntil is when the authorization reads of the file rest on ends
	// (Unix nanoseconds; 0: never): req.AuthUntil at open, moved on when
	// the authorizer, asked again, allows more (reads.go, authorizeRead).
	authUntil atomic.Int64
}

// fileTable maps the 4-byte handles of one connection to open files.
// Handles are small integers, reused after close like XRootD's.
type fileTable struct {
	max int

	// mu protects files and next.
	mu    sync.Mutex
	files map[uint32]*openFile
	next  uint32
}

func newFileTable(max int) *fileTable {
	return &fileTable{max: max, files: make(map[uint32]*openFile)}
}

// add registers f and returns its entry, or nil when the table is full.
func (t *fileTable) add(f backend.File, req backend.Request) *openFile {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.files) >= t.max {
		return nil
	}
	for {
		h := t.next
		t.next++
		if _, used := t.files[h]; !used {
			of := &openFile{f: f, req: req}
			if !req.AuthUntil.IsZero() {
				of.authUntil.Store(req.AuthUntil.UnixNano())
			}
			binary.BigEndian.PutUint32(of.fh[:], h)
			t.files[h] = of
			return of
		}
	}
}

// acquire returns the open file of handle fh and counts an operation on it
// (the caller must call of.ops.Done), or nil if fh is not open.
func (t *fileTable) acquire(fh proto.FHandle) *openFile {
	t.mu.Lock()
	defer t.mu.Unlock()
	of := t.files[binary.BigEndian.Uint32(fh[:])]
	if of != nil {
		of.ops.Add(1)
	}
	return of
}

// remove takes fh out of the table: later operations on it fail, and the
// caller closes the file once of.ops.Wait returns.
func (t *fileTable) remove(fh proto.FHandle) *openFile {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := binary.BigEndian.Uint32(fh[:])
	of := t.files[h]
	delete(t.files, h)
	return of
}

// removeAll empties the table and returns what it held.
func (t *fileTable) removeAll() []*openFile {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*openFile, 0, len(t.files))
	for h, of := range t.files {
		out = append(out, of)
		delete(t.files, h)
	}
	return out
}

// count returns the number of open files.
func (t *fileTable) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.files)
}
