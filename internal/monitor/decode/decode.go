// Package decode reads XRootD 5's monitoring packets as a collector does:
// the binary monitor packets (XrdXrootdMonData.hh: dictionary mappings and
// the f-stream), the g-stream (binary or JSON header, then JSON records)
// and the summary report XML. It is written from the format alone, apart
// from the encoders in package monitor, so that tests can decode what
// hepcache and what XRootD send with one decoder and compare them.
package decode

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Header is the 8-byte header of every binary packet.
type Header struct {
	Code byte   // '=', 'd', 'f', 'g', 'i', 'p', 'r', 't', 'u', 'U', 'x'
	Seq  uint8  // packet sequence
	Len  int    // packet length (plen)
	Stod uint32 // server start time (Unix seconds)
}

// Packet is one decoded datagram.
type Packet struct {
	Header
	// DictID and Text are a mapping packet's ('=', 'd', 'i', 'u', 'U'):
	// Text is "prot/user.pid:sid@host" with optional "\n"-separated info.
	DictID uint32
	Text   string
	// TOD and Files are an f-stream packet's.
	TOD   *TOD
	Files []FileRecord
	// GStream is a g-stream packet's (code 'g', or a JSON header line).
	GStream *GStream
}

// TOD is the time record that opens an f-stream packet.
type TOD struct {
	NXfr, NTotal int // transfer records and all records in the packet
	TBeg, TEnd   uint32
	SID          uint64 // server id (lower 48 bits)
}

// f-stream record types.
const (
	RecClose = 0
	RecOpen  = 1
	RecTime  = 2
	RecXfr   = 3
	RecDisc  = 4
)

// FileRecord is one f-stream record.
type FileRecord struct {
	Type byte
	Flag byte
	Size int
	// ID is the file's dictid (open, close, xfr) or the user's (disc).
	ID uint32
	// Open: FileSize, RW; with the lfn flag also UserID and LFN.
	FileSize int64
	RW       bool
	UserID   uint32
	LFN      string
	// Close and Xfr: the transfer counts; Close with the ops flag: Ops.
	Read, ReadV, Write int64
	Forced             bool
	Ops                *Ops
}

// Ops are the operation counts of a close record (XrdXrootdMonStatOPS).
type Ops struct {
	Read, ReadV, Write int32
	RsMin, RsMax       int16
	RSegs              int64
	RdMin, RdMax       int32
	RvMin, RvMax       int32
	WrMin, WrMax       int32
}

// ErrShort is returned (wrapped) for a truncated packet or record.
var ErrShort = errors.New("decode: truncated")

// Parse decodes one datagram: a binary monitor packet, or a g-stream
// packet with a JSON header line.
func Parse(b []byte) (*Packet, error) {
	if len(b) > 0 && b[0] == '{' {
		gs, err := parseGStreamJSON(b)
		if err != nil {
			return nil, err
		}
		return &Packet{Header: Header{Code: 'g', Seq: uint8(gs.Seq), Len: len(b), Stod: gs.Stod}, GStream: gs}, nil
	}
	if len(b) < 8 {
		return nil, fmt.Errorf("%w: %d bytes, want an 8-byte header", ErrShort, len(b))
	}
	p := &Packet{Header: Header{Code: b[0], Seq: b[1], Len: int(binary.BigEndian.Uint16(b[2:])), Stod: binary.BigEndian.Uint32(b[4:])}}
	if p.Len != len(b) {
		return nil, fmt.Errorf("decode: plen %d, datagram of %d bytes", p.Len, len(b))
	}
	body := b[8:]
	switch p.Code {
	case '=', 'd', 'i', 'u', 'U':
		if len(body) < 4 {
			return nil, fmt.Errorf("%w: mapping packet without dictid", ErrShort)
		}
		p.DictID = binary.BigEndian.Uint32(body)
		p.Text = string(bytes.TrimRight(body[4:], "\x00"))
	case 'f':
		if err := p.parseFStream(body); err != nil {
			return nil, err
		}
	case 'g':
		gs, err := parseGStreamBinary(body)
		if err != nil {
			return nil, err
		}
		gs.Seq, gs.Stod = int(p.Seq), p.Stod
		p.GStream = gs
	}
	return p, nil
}

func (p *Packet) parseFStream(b []byte) error {
	for len(b) > 0 {
		if len(b) < 8 {
			return fmt.Errorf("%w: f-stream record header", ErrShort)
		}
		r := FileRecord{Type: b[0], Flag: b[1], Size: int(binary.BigEndian.Uint16(b[2:]))}
		if r.Size < 8 || r.Size > len(b) {
			return fmt.Errorf("%w: f-stream record of %d bytes, %d left", ErrShort, r.Size, len(b))
		}
		rec := b[:r.Size]
		b = b[r.Size:]
		be := binary.BigEndian
		if r.Type == RecTime {
			if len(rec) < 16 {
				return fmt.Errorf("%w: time record", ErrShort)
			}
			t := &TOD{NXfr: int(be.Uint16(rec[4:])), NTotal: int(be.Uint16(rec[6:])), TBeg: be.Uint32(rec[8:]), TEnd: be.Uint32(rec[12:])}
			if r.Flag&0x01 != 0 && len(rec) >= 24 {
				t.SID = be.Uint64(rec[16:])
			}
			if p.TOD == nil {
				p.TOD = t
			}
			continue
		}
		r.ID = be.Uint32(rec[4:])
		body := rec[8:]
		switch r.Type {
		case RecOpen:
			if len(body) < 8 {
				return fmt.Errorf("%w: open record", ErrShort)
			}
			r.FileSize = int64(be.Uint64(body))
			r.RW = r.Flag&0x02 != 0
			if r.Flag&0x01 != 0 {
				if len(body) < 12 {
					return fmt.Errorf("%w: open record lfn", ErrShort)
				}
				r.UserID = be.Uint32(body[8:])
				lfn := body[12:]
				if i := bytes.IndexByte(lfn, 0); i >= 0 {
					lfn = lfn[:i]
				}
				r.LFN = string(lfn)
			}
		case RecClose, RecXfr:
			if len(body) < 24 {
				return fmt.Errorf("%w: transfer counts", ErrShort)
			}
			r.Read, r.ReadV, r.Write = int64(be.Uint64(body)), int64(be.Uint64(body[8:])), int64(be.Uint64(body[16:]))
			if r.Type == RecClose {
				r.Forced = r.Flag&0x01 != 0
				if r.Flag&0x02 != 0 {
					o := body[24:]
					if len(o) < 48 {
						return fmt.Errorf("%w: ops", ErrShort)
					}
					r.Ops = &Ops{Read: int32(be.Uint32(o)), ReadV: int32(be.Uint32(o[4:])), Write: int32(be.Uint32(o[8:])),
						RsMin: int16(be.Uint16(o[12:])), RsMax: int16(be.Uint16(o[14:])), RSegs: int64(be.Uint64(o[16:])),
						RdMin: int32(be.Uint32(o[24:])), RdMax: int32(be.Uint32(o[28:])),
						RvMin: int32(be.Uint32(o[32:])), RvMax: int32(be.Uint32(o[36:])),
						WrMin: int32(be.Uint32(o[40:])), WrMax: int32(be.Uint32(o[44:]))}
				}
			}
		}
		p.Files = append(p.Files, r)
	}
	return nil
}

// GStream is a g-stream packet: its header and its records, one JSON
// object each.
type GStream struct {
	Seq        int
	Stod       uint32
	TBeg, TEnd uint32
	// Type is the provider ('C' for the proxy file cache).
	Type byte
	SID  uint64
	// Records are the JSON lines, without the newline or final NUL.
	Records []json.RawMessage
}

func parseGStreamBinary(b []byte) (*GStream, error) {
	if len(b) < 16 {
		return nil, fmt.Errorf("%w: g-stream header", ErrShort)
	}
	be := binary.BigEndian
	sid := be.Uint64(b[8:])
	gs := &GStream{TBeg: be.Uint32(b), TEnd: be.Uint32(b[4:]), Type: byte(sid >> 56), SID: sid & (1<<48 - 1)}
	return gs, gs.addRecords(b[16:])
}

// jsonHeader is XRootD's g-stream header line (send json).
type jsonHeader struct {
	Code string `json:"code"`
	Pseq int    `json:"pseq"`
	Stod uint32 `json:"stod"`
	SID  uint64 `json:"sid"`
	GS   struct {
		Type string `json:"type"`
		TBeg uint32 `json:"tbeg"`
		TEnd uint32 `json:"tend"`
	} `json:"gs"`
}

func parseGStreamJSON(b []byte) (*GStream, error) {
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 {
		return nil, errors.New("decode: g-stream JSON header without a newline")
	}
	var h jsonHeader
	if err := json.Unmarshal(b[:nl], &h); err != nil {
		return nil, fmt.Errorf("decode: g-stream header: %w", err)
	}
	if h.Code != "g" {
		return nil, fmt.Errorf("decode: JSON packet of code %q, want g", h.Code)
	}
	gs := &GStream{Seq: h.Pseq, Stod: h.Stod, SID: h.SID, TBeg: h.GS.TBeg, TEnd: h.GS.TEnd}
	if h.GS.Type != "" {
		gs.Type = h.GS.Type[0]
	}
	return gs, gs.addRecords(b[nl+1:])
}

func (gs *GStream) addRecords(b []byte) error {
	b = bytes.TrimRight(b, "\x00")
	for _, line := range bytes.Split(b, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if !json.Valid(line) {
			return fmt.Errorf("decode: g-stream record is not JSON: %q", line)
		}
		gs.Records = append(gs.Records, json.RawMessage(bytes.Clone(line)))
	}
	return nil
}

// FileClose is XrdPfc's g-stream file_close record.
type FileClose struct {
	Event     string   `json:"event"`
	LFN       string   `json:"lfn"`
	Size      int64    `json:"size"`
	BlkSize   int64    `json:"blk_size"`
	NBlks     int64    `json:"n_blks"`
	NBlksDone int64    `json:"n_blks_done"`
	AccessCnt int64    `json:"access_cnt"`
	AttachT   int64    `json:"attach_t"`
	DetachT   int64    `json:"detach_t"`
	Remotes   []string `json:"remotes"`
	BHit      int64    `json:"b_hit"`
	BMiss     int64    `json:"b_miss"`
	BBypass   int64    `json:"b_bypass"`
	NCksErrs  int64    `json:"n_cks_errs"`
}

// FileCloses returns the packet's file_close records (other events are
// skipped).
func (gs *GStream) FileCloses() ([]FileClose, error) {
	var out []FileClose
	for _, r := range gs.Records {
		var fc FileClose
		if err := json.Unmarshal(r, &fc); err != nil {
			return nil, fmt.Errorf("decode: g-stream record %s: %w", r, err)
		}
		if fc.Event == "file_close" {
			out = append(out, fc)
		}
	}
	return out, nil
}

// User splits a 'u' mapping text "prot/user.pid:sid@host\n&p=..&n=.." into
// its parts; Info is the text after the newline.
type User struct {
	Prot, Name, Pid, SID, Host, Info string
}

// ParseUser reads a user mapping text.
func ParseUser(text string) (User, error) {
	var u User
	id, info, _ := strings.Cut(text, "\n")
	u.Info = info
	prot, rest, ok := strings.Cut(id, "/")
	if !ok {
		return u, fmt.Errorf("decode: user %q lacks prot/", text)
	}
	u.Prot = prot
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return u, fmt.Errorf("decode: user %q lacks @host", text)
	}
	u.Host = rest[at+1:]
	rest = rest[:at]
	if i := strings.LastIndexByte(rest, ':'); i >= 0 {
		u.SID = rest[i+1:]
		rest = rest[:i]
	}
	if i := strings.LastIndexByte(rest, '.'); i >= 0 {
		u.Pid = rest[i+1:]
		rest = rest[:i]
	}
	u.Name = rest
	return u, nil
}
