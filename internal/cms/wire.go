package cms

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// protocolVersion is kYR_Version, the cmsd protocol version of XRootD 5.
const protocolVersion = 3

// Request and response codes (YProtocol.hh, CmsReqCode) that a data
// server sees or sends.
const (
	codeLogin  = 0
	codeError  = 1 // as a response code (kYR_error)
	codeAvail  = 12
	codeDisc   = 13
	codeGone   = 14
	codeHave   = 15
	codeLoad   = 16
	codePing   = 17
	codePong   = 18
	codeSpace  = 19
	codeState  = 20
	codeStatus = 22
	codeTry    = 24
	codeUpdate = 25
	codeUsage  = 26
	codeXauth  = 27
)

// Modifiers.
const (
	modRaw        = 0x20 // kYR_raw: the data is a bare path, not packed
	modHaveOnline = 0x01 // CmsHaveRequest::Online
	modStateNoRsp = 0x02 // CmsStateRequest::kYR_noresp

	statusNoStage = 0x02 // CmsStatusRequest::kYR_noStage
	statusResume  = 0x04 // CmsStatusRequest::kYR_Resume
)

// Login modes (CmsLoginData::LoginMode).
const (
	modeServer  = 0x00000008
	modeBlRedir = 0x00000040 // accepts permanent redirects
	modeNoStage = 0x00000200
)

// maxData bounds what we accept in one message; cmsd's own limit for
// request arguments is of the same order (maxReqSize).
const maxData = 16 << 10

// header is CmsRRHdr: every message starts with it.
type header struct {
	StreamID uint32
	Code     byte
	Modifier byte
	DataLen  uint16
}

const headerLen = 8

func (h header) append(b []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, h.StreamID)
	b = append(b, h.Code, h.Modifier)
	return binary.BigEndian.AppendUint16(b, h.DataLen)
}

// message encodes a header with its data.
func message(h header, data []byte) []byte {
	h.DataLen = uint16(len(data))
	return append(h.append(make([]byte, 0, headerLen+len(data))), data...)
}

// readMessage reads one message.
func readMessage(r io.Reader) (header, []byte, error) {
	var hb [headerLen]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return header{}, nil, err
	}
	h := header{
		StreamID: binary.BigEndian.Uint32(hb[0:]),
		Code:     hb[4],
		Modifier: hb[5],
		DataLen:  binary.BigEndian.Uint16(hb[6:]),
	}
	if int(h.DataLen) > maxData {
		return h, nil, fmt.Errorf("cms: message code %d with %d bytes of data (limit %d)", h.Code, h.DataLen, maxData)
	}
	data := make([]byte, h.DataLen)
	if _, err := io.ReadFull(r, data); err != nil {
		return h, nil, err
	}
	return h, data, nil
}

// loginData is CmsLoginData, sent by both sides of a login.
type loginData struct {
	Version  uint16
	Mode     uint32
	HoldTime uint32 // servers send their pid
	TSpace   uint32 // total space, GB
	FSpace   uint32 // free space, MB
	MSpace   uint32 // minimum free space, MB
	FSNum    uint16
	FSUtil   uint16 // percent
	DPort    uint16 // data (xrootd) port
	SPort    uint16 // subscription port (managers)
	SID      string
	Paths    string // "r /path" lines
	IfList   string
	EnvCGI   string // "myHN=host&site=name"
}

// marshal packs the login data as cmsd's parser expects it (logArgs).
func (d *loginData) marshal() []byte {
	var p packer
	p.short(d.Version)
	p.int(d.Mode)
	p.int(d.HoldTime)
	p.int(d.TSpace)
	p.int(d.FSpace)
	p.int(d.MSpace)
	p.short(d.FSNum)
	p.short(d.FSUtil)
	p.short(d.DPort)
	p.short(d.SPort)
	p.optString(d.SID)
	p.optString(d.Paths)
	p.optString(d.IfList)
	p.optString(d.EnvCGI)
	return p.b
}

// unmarshalLogin decodes login data; the strings after the numbers are
// optional, as in cmsd (they follow its PT_Fence).
func unmarshalLogin(b []byte) (*loginData, error) {
	u := unpacker{b: b}
	d := &loginData{
		Version:  u.short(),
		Mode:     u.int(),
		HoldTime: u.int(),
		TSpace:   u.int(),
		FSpace:   u.int(),
		MSpace:   u.int(),
		FSNum:    u.short(),
		FSUtil:   u.short(),
		DPort:    u.short(),
		SPort:    u.short(),
	}
	for _, s := range []*string{&d.SID, &d.Paths, &d.IfList, &d.EnvCGI} {
		if u.err != nil || u.done() {
			break
		}
		*s = u.string()
	}
	if u.err != nil {
		return nil, fmt.Errorf("cms: login data: %w", u.err)
	}
	return d, nil
}

// ErrMalformed marks data that does not follow XrdOucPup's packing.
var ErrMalformed = errors.New("malformed packed data")

// Pup type bytes (XrdOucPupType).
const (
	pupShort  = 0x80
	pupInt    = 0xa0
	pupLong   = 0xc0
	pupInline = 0x10
	pupMaskT  = 0xe0
	pupMaskB  = 0x60
)

// packer writes XrdOucPup's packed form: numbers as a type byte and the
// big-endian value, strings and byte strings as a 16-bit length and the
// bytes (strings with their NUL).
type packer struct{ b []byte }

func (p *packer) short(v uint16) {
	p.b = binary.BigEndian.AppendUint16(append(p.b, pupShort), v)
}

func (p *packer) int(v uint32) {
	p.b = binary.BigEndian.AppendUint32(append(p.b, pupInt), v)
}

// inlineInt is XrdOucPup::Pack(char**, unsigned int): an int whose top
// nibble is zero travels in 4 bytes with the type in that nibble.
func (p *packer) inlineInt(v uint32) {
	if v&0xf0000000 != 0 {
		p.int(v)
		return
	}
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	b[0] |= pupInt | pupInline
	p.b = append(p.b, b[:]...)
}

// optString packs s with its NUL, or an empty string as length zero (a
// null pointer in cmsd).
func (p *packer) optString(s string) {
	if s == "" {
		p.b = append(p.b, 0, 0)
		return
	}
	p.bytes(append([]byte(s), 0))
}

func (p *packer) bytes(v []byte) {
	p.b = append(binary.BigEndian.AppendUint16(p.b, uint16(len(v))), v...)
}

// unpacker reads XrdOucPup's packed form. The first error sticks; reads
// after it return zero values.
type unpacker struct {
	b   []byte
	err error
}

func (u *unpacker) done() bool { return len(u.b) == 0 }

func (u *unpacker) fail(what string) {
	if u.err == nil {
		u.err = fmt.Errorf("%s: %w", what, ErrMalformed)
	}
}

// number reads a number of the given type, inline or not.
func (u *unpacker) number(typ byte) uint64 {
	if u.err != nil {
		return 0
	}
	if len(u.b) < 2 {
		u.fail("number truncated")
		return 0
	}
	t := u.b[0]
	if t&pupMaskT != typ {
		u.fail(fmt.Sprintf("type byte %#x where %#x was expected", t, typ))
		return 0
	}
	n := int(t&pupMaskB) >> 3
	if n == 0 {
		n = 2
	}
	inline := t&pupInline != 0
	start := 1
	if inline {
		start = 0
	}
	if len(u.b) < start+n {
		u.fail("number truncated")
		return 0
	}
	var buf [8]byte
	copy(buf[8-n:], u.b[start:start+n])
	if inline {
		buf[8-n] &= 0x0f
	}
	u.b = u.b[start+n:]
	return binary.BigEndian.Uint64(buf[:])
}

func (u *unpacker) short() uint16 { return uint16(u.number(pupShort)) }
func (u *unpacker) int() uint32   { return uint32(u.number(pupInt)) }

// raw reads a length-prefixed byte string.
func (u *unpacker) raw() []byte {
	if u.err != nil {
		return nil
	}
	if len(u.b) < 2 {
		u.fail("string length truncated")
		return nil
	}
	n := int(binary.BigEndian.Uint16(u.b))
	if n&0x8000 != 0 || len(u.b) < 2+n {
		u.fail("string longer than the data")
		return nil
	}
	v := u.b[2 : 2+n]
	u.b = u.b[2+n:]
	return v
}

// string reads a packed string, dropping its NUL.
func (u *unpacker) string() string {
	v := u.raw()
	if i := indexNUL(v); i >= 0 {
		v = v[:i]
	}
	return string(v)
}

func indexNUL(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return -1
}

// pathOf returns the path a state request names: raw (the bytes with a
// trailing NUL) or packed (pthArgs).
func pathOf(h header, data []byte) (string, error) {
	if h.Modifier&modRaw == 0 {
		u := unpacker{b: data}
		p := u.string()
		if u.err != nil {
			return "", u.err
		}
		data = []byte(p)
	} else if i := indexNUL(data); i >= 0 {
		data = data[:i]
	}
	if len(data) == 0 || data[0] != '/' {
		return "", fmt.Errorf("path %q is not absolute: %w", data, ErrMalformed)
	}
	return string(data), nil
}
