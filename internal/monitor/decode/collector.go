package decode

import (
	"bytes"
	"fmt"
	"sync"
)

// Collector joins the packets of one server as a monitoring collector
// does: user and file dictionary ids resolved, open and close records of a
// file joined into one File, g-stream records and summary reports kept in
// arrival order. Safe for concurrent use.
type Collector struct {
	mu        sync.Mutex
	idents    []string
	users     map[uint32]User
	files     map[uint32]*File
	order     []uint32
	discs     []uint32
	closes    []FileClose
	summaries []*Summary
	errs      []error
}

// File is one file access from the f-stream.
type File struct {
	ID     uint32
	LFN    string
	Size   int64
	User   User // zero if the user's mapping was not seen
	UserID uint32
	Opened bool
	Closed bool
	// Forced: the server closed the file when the client disconnected.
	Forced bool
	// Read, ReadV and Ops are the close record's (or the last transfer
	// record's while the file is open).
	Read, ReadV int64
	Ops         *Ops
	Xfrs        int // transfer records seen
}

// NewCollector returns an empty Collector.
func NewCollector() *Collector {
	return &Collector{users: map[uint32]User{}, files: map[uint32]*File{}}
}

// Add decodes one datagram: a summary report (XML), a binary packet or a
// JSON g-stream packet. Undecodable datagrams are kept as errors.
func (c *Collector) Add(b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := bytes.TrimLeft(b, " \n"); bytes.HasPrefix(t, []byte("<statistics")) {
		s, err := ParseSummary(b)
		if err != nil {
			c.errs = append(c.errs, err)
			return
		}
		c.summaries = append(c.summaries, s)
		return
	}
	p, err := Parse(b)
	if err != nil {
		c.errs = append(c.errs, err)
		return
	}
	switch {
	case p.Code == '=':
		c.idents = append(c.idents, p.Text)
	case p.Code == 'u':
		u, err := ParseUser(p.Text)
		if err != nil {
			c.errs = append(c.errs, err)
			return
		}
		c.users[p.DictID] = u
		for _, f := range c.files { // a mapping that arrived late
			if f.UserID == p.DictID {
				f.User = u
			}
		}
	case p.Code == 'f':
		for _, r := range p.Files {
			c.fileRecord(r)
		}
	case p.GStream != nil:
		fcs, err := p.GStream.FileCloses()
		if err != nil {
			c.errs = append(c.errs, err)
			return
		}
		c.closes = append(c.closes, fcs...)
	}
}

func (c *Collector) fileRecord(r FileRecord) {
	if r.Type == RecDisc {
		c.discs = append(c.discs, r.ID)
		return
	}
	f := c.files[r.ID]
	if f == nil {
		f = &File{ID: r.ID}
		c.files[r.ID] = f
		c.order = append(c.order, r.ID)
	}
	switch r.Type {
	case RecOpen:
		f.Opened, f.LFN, f.Size, f.UserID = true, r.LFN, r.FileSize, r.UserID
		f.User = c.users[r.UserID]
	case RecXfr:
		f.Xfrs++
		f.Read, f.ReadV = r.Read, r.ReadV
	case RecClose:
		f.Closed, f.Forced, f.Read, f.ReadV, f.Ops = true, r.Forced, r.Read, r.ReadV, r.Ops
	}
}

// Files returns the file accesses in the order they were first seen.
func (c *Collector) Files() []File {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]File, 0, len(c.order))
	for _, id := range c.order {
		out = append(out, *c.files[id])
	}
	return out
}

// Disconnects returns the users whose disc record arrived, in order.
func (c *Collector) Disconnects() []User {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]User, 0, len(c.discs))
	for _, id := range c.discs {
		out = append(out, c.users[id])
	}
	return out
}

// FileCloses returns the g-stream file_close records.
func (c *Collector) FileCloses() []FileClose {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]FileClose(nil), c.closes...)
}

// Summaries returns the summary reports.
func (c *Collector) Summaries() []*Summary {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Summary(nil), c.summaries...)
}

// Idents returns the server identification texts.
func (c *Collector) Idents() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.idents...)
}

// Users returns the user mappings by dictid.
func (c *Collector) Users() map[uint32]User {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[uint32]User, len(c.users))
	for k, v := range c.users {
		out[k] = v
	}
	return out
}

// Err returns the decoding errors, nil if there were none.
func (c *Collector) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.errs) == 0 {
		return nil
	}
	return fmt.Errorf("%d undecodable datagram(s), first: %w", len(c.errs), c.errs[0])
}
