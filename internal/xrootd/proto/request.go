package proto

import (
	"bytes"
	"fmt"
	"strings"
)

// Every request type below has Append, which appends the whole request
// (header and data) to dst, and Decode, which fills the request from a
// decoded header and its Dlen bytes of data. Decode copies what it keeps
// (strings), except where noted, so the caller may reuse data afterwards.

func checkReq(h *RequestHeader, data []byte, want RequestID) error {
	if h.RequestID != want {
		return fmt.Errorf("decode %v as %v: %w", h.RequestID, want, ErrMalformed)
	}
	if int(h.Dlen) != len(data) {
		return fmt.Errorf("%v: dlen %d but %d data bytes: %w", want, h.Dlen, len(data), ErrMalformed)
	}
	return nil
}

// pathString returns data as a path, without the trailing NUL bytes some
// clients send.
func pathString(data []byte) string {
	return string(bytes.TrimRight(data, "\x00"))
}

// SplitOpaque splits "path?opaque" into path and opaque (without '?').
func SplitOpaque(p string) (path, opaque string) {
	if i := strings.IndexByte(p, '?'); i >= 0 {
		return p[:i], p[i+1:]
	}
	return p, ""
}

func appendReq(dst []byte, sid StreamID, id RequestID, body *[16]byte, data ...[]byte) []byte {
	n := 0
	for _, d := range data {
		n += len(d)
	}
	h := RequestHeader{StreamID: sid, RequestID: id, Body: *body, Dlen: int32(n)}
	dst = AppendRequestHeader(dst, &h)
	for _, d := range data {
		dst = append(dst, d...)
	}
	return dst
}

func appendReqString(dst []byte, sid StreamID, id RequestID, body *[16]byte, s string) []byte {
	h := RequestHeader{StreamID: sid, RequestID: id, Body: *body, Dlen: int32(len(s))}
	dst = AppendRequestHeader(dst, &h)
	return append(dst, s...)
}

// ProtocolRequest is kXR_protocol: the client's version and what it wants.
type ProtocolRequest struct {
	ClientPV int32
	Flags    ProtocolFlags
	Expect   uint8
}

// Append appends the encoded request.
func (r *ProtocolRequest) Append(dst []byte, sid StreamID) []byte {
	var b [16]byte
	be.PutUint32(b[0:], uint32(r.ClientPV))
	b[4] = byte(r.Flags)
	b[5] = r.Expect
	return appendReq(dst, sid, ReqProtocol, &b)
}

// Decode fills r from a request.
func (r *ProtocolRequest) Decode(h *RequestHeader, data []byte) error {
	if err := checkReq(h, data, ReqProtocol); err != nil {
		return err
	}
	r.ClientPV = int32(be.Uint32(h.Body[0:]))
	r.Flags = ProtocolFlags(h.Body[4])
	r.Expect = h.Body[5]
	return nil
}

// LoginRequest is kXR_login.
type LoginRequest struct {
	PID int32
	// Username is at most 8 bytes; the NUL padding is removed on decode.
	Username string
	Ability2 uint8
	Ability  LoginAbility
	CapVer   uint8
	// Token is the login CGI ("&xrd.cc=..&xrd.tz=.."), often empty.
	Token string
}

// Append appends the encoded request. Username is cut to 8 bytes.
func (r *LoginRequest) Append(dst []byte, sid StreamID) []byte {
	var b [16]byte
	be.PutUint32(b[0:], uint32(r.PID))
	copy(b[4:12], r.Username)
	b[12] = r.Ability2
	b[13] = byte(r.Ability)
	b[14] = r.CapVer
	return appendReqString(dst, sid, ReqLogin, &b, r.Token)
}

// Decode fills r from a request.
func (r *LoginRequest) Decode(h *RequestHeader, data []byte) error {
	if err := checkReq(h, data, ReqLogin); err != nil {
		return err
	}
	r.PID = int32(be.Uint32(h.Body[0:]))
	u := h.Body[4:12]
	if i := bytes.IndexByte(u, 0); i >= 0 {
		u = u[:i]
	}
	r.Username = string(u)
	r.Ability2 = h.Body[12]
	r.Ability = LoginAbility(h.Body[13])
	r.CapVer = h.Body[14]
	r.Token = pathString(data)
	return nil
}

// AuthRequest is kXR_auth: a credential of the type named in CredType
// ("unix", "gsi", "ztn", NUL padded).
type AuthRequest struct {
	CredType [4]byte
	// Cred aliases the data passed to Decode.
	Cred []byte
}

// Append appends the encoded request.
func (r *AuthRequest) Append(dst []byte, sid StreamID) []byte {
	var b [16]byte
	copy(b[12:16], r.CredType[:])
	return appendReq(dst, sid, ReqAuth, &b, r.Cred)
}

// Decode fills r from a request. r.Cred aliases data.
func (r *AuthRequest) Decode(h *RequestHeader, data []byte) error {
	if err := checkReq(h, data, ReqAuth); err != nil {
		return err
	}
	copy(r.CredType[:], h.Body[12:16])
	r.Cred = data
	return nil
}

// OpenRequest is kXR_open.
type OpenRequest struct {
	Mode    OpenMode
	Options OpenOptions
	// Path includes "?opaque" if the client sent one (see SplitOpaque).
	Path string
}

// Append appends the encoded request.
func (r *OpenRequest) Append(dst []byte, sid StreamID) []byte {
	var b [16]byte
	be.PutUint16(b[0:], uint16(r.Mode))
	be.PutUint16(b[2:], uint16(r.Options))
	return appendReqString(dst, sid, ReqOpen, &b, r.Path)
}

// Decode fills r from a request.
func (r *OpenRequest) Decode(h *RequestHeader, data []byte) error {
	if err := checkReq(h, data, ReqOpen); err != nil {
		return err
	}
	r.Mode = OpenMode(be.Uint16(h.Body[0:]))
	r.Options = OpenOptions(be.Uint16(h.Body[2:]))
	r.Path = pathString(data)
	if r.Path == "" {
		return fmt.Errorf("kXR_open without a path: %w", ErrMalformed)
	}
	return nil
}

// ReadRequest is kXR_read. The optional read_args carry a path id (a bound
// secondary stream for the response); any readahead list after them is
// accepted and ignored (counted in ReadAhead).
type ReadRequest struct {
	FHandle FHandle
	Offset  int64
	Length  int32
	// HasArgs is set when read_args were sent; PathID is then valid.
	HasArgs   bool
	PathID    uint8
	ReadAhead int
}

// Append appends the encoded request (with read_args if HasArgs).
func (r *ReadRequest) Append(dst []byte, sid StreamID) []byte {
	var b [16]byte
	copy(b[0:4], r.FHandle[:])
	be.PutUint64(b[4:], uint64(r.Offset))
	be.PutUint32(b[12:], uint32(r.Length))
	if !r.HasArgs {
		return appendReq(dst, sid, ReqRead, &b)
	}
	args := [8]byte{r.PathID}
	return appendReq(dst, sid, ReqRead, &b, args[:])
}

// Decode fills r from a request.
func (r *ReadRequest) Decode(h *RequestHeader, data []byte) error {
	if err := checkReq(h, data, ReqRead); err != nil {
		return err
	}
	copy(r.FHandle[:], h.Body[0:4])
	r.Offset = int64(be.Uint64(h.Body[4:]))
	r.Length = int32(be.Uint32(h.Body[12:]))
	r.HasArgs, r.PathID, r.ReadAhead = false, 0, 0
	if len(data) > 0 {
		r.HasArgs, r.PathID = true, data[0]
		if len(data) > 8 {
			if (len(data)-8)%ReadListItemLen != 0 {
				return fmt.Errorf("kXR_read: readahead list of %d bytes: %w", len(data)-8, ErrMalformed)
			}
			r.ReadAhead = (len(data) - 8) / ReadListItemLen
		}
	}
	if r.Offset < 0 || r.Length < 0 {
		return fmt.Errorf("kXR_read %d@%d: %w", r.Length, r.Offset, ErrMalformed)
	}
	return nil
}

// ReadSeg is one element of a kXR_readv list, and also the 16-byte header
// of each segment in the readv response.
type ReadSeg struct {
	FHandle FHandle
	Length  int32
	Offset  int64
}

// AppendReadSeg appends the 16 encoded bytes of s.
func AppendReadSeg(dst []byte, s ReadSeg) []byte {
	dst = append(dst, s.FHandle[:]...)
	dst = be.AppendUint32(dst, uint32(s.Length))
	return be.AppendUint64(dst, uint64(s.Offset))
}

// DecodeReadSeg decodes the first 16 bytes of b.
func DecodeReadSeg(b []byte) (ReadSeg, error) {
	var s ReadSeg
	if len(b) < ReadListItemLen {
		return s, fmt.Errorf("readv element: %d of %d bytes: %w", len(b), ReadListItemLen, ErrShort)
	}
	copy(s.FHandle[:], b[0:4])
	s.Length = int32(be.Uint32(b[4:]))
	s.Offset = int64(be.Uint64(b[8:]))
	return s, nil
}

// ReadVRequest is kXR_readv.
type ReadVRequest struct {
	PathID uint8
	// Segs is reused by Decode (appended to Segs[:0]).
	Segs []ReadSeg
}

// Append appends the encoded request.
func (r *ReadVRequest) Append(dst []byte, sid StreamID) []byte {
	var b [16]byte
	b[15] = r.PathID
	h := RequestHeader{StreamID: sid, RequestID: ReqReadV, Body: b, Dlen: int32(len(r.Segs) * ReadListItemLen)}
	dst = AppendRequestHeader(dst, &h)
	for _, s := range r.Segs {
		dst = AppendReadSeg(dst, s)
	}
	return dst
}

// Decode fills r from a request. It rejects an empty list, a partial
// element, more than MaxReadVSegs elements and negative lengths or offsets.
func (r *ReadVRequest) Decode(h *RequestHeader, data []byte) error {
	if err := checkReq(h, data, ReqReadV); err != nil {
		return err
	}
	r.PathID = h.Body[15]
	r.Segs = r.Segs[:0]
	if len(data) == 0 || len(data)%ReadListItemLen != 0 {
		return fmt.Errorf("kXR_readv: read list of %d bytes: %w", len(data), ErrMalformed)
	}
	if n := len(data) / ReadListItemLen; n > MaxReadVSegs {
		return fmt.Errorf("kXR_readv: %d elements, at most %d: %w", n, MaxReadVSegs, ErrMalformed)
	}
	for off := 0; off < len(data); off += ReadListItemLen {
		s, _ := DecodeReadSeg(data[off:])
		if s.Length < 0 || s.Offset < 0 {
			return fmt.Errorf("kXR_readv element %d@%d: %w", s.Length, s.Offset, ErrMalformed)
		}
		r.Segs = append(r.Segs, s)
	}
	return nil
}

// PgReadRequest is kXR_pgread.
type PgReadRequest struct {
	FHandle FHandle
	Offset  int64
	Length  int32
	// NArgs is how many of PathID and ReqFlags were sent (0, 1 or 2).
	NArgs    int
	PathID   uint8
	ReqFlags uint8
}

// Append appends the encoded request.
func (r *PgReadRequest) Append(dst []byte, sid StreamID) []byte {
	var b [16]byte
	copy(b[0:4], r.FHandle[:])
	be.PutUint64(b[4:], uint64(r.Offset))
	be.PutUint32(b[12:], uint32(r.Length))
	args := [2]byte{r.PathID, r.ReqFlags}
	n := min(max(r.NArgs, 0), 2)
	return appendReq(dst, sid, ReqPgRead, &b, args[:n])
}

// Decode fills r from a request.
func (r *PgReadRequest) Decode(h *RequestHeader, data []byte) error {
	if err := checkReq(h, data, ReqPgRead); err != nil {
		return err
	}
	copy(r.FHandle[:], h.Body[0:4])
	r.Offset = int64(be.Uint64(h.Body[4:]))
	r.Length = int32(be.Uint32(h.Body[12:]))
	r.NArgs, r.PathID, r.ReqFlags = min(len(data), 2), 0, 0
	if len(data) > 0 {
		r.PathID = data[0]
	}
	if len(data) > 1 {
		r.ReqFlags = data[1]
	}
	if r.Offset < 0 || r.Length < 0 {
		return fmt.Errorf("kXR_pgread %d@%d: %w", r.Length, r.Offset, ErrMalformed)
	}
	return nil
}

// StatRequest is kXR_stat, of a path or (when Path is empty) of an open
// file.
type StatRequest struct {
	Options uint8 // StatVFS
	FHandle FHandle
	Path    string
}

// ByHandle reports whether the request names an open file.
func (r *StatRequest) ByHandle() bool { return r.Path == "" }

// Append appends the encoded request.
func (r *StatRequest) Append(dst []byte, sid StreamID) []byte {
	var b [16]byte
	b[0] = r.Options
	copy(b[12:16], r.FHandle[:])
	return appendReqString(dst, sid, ReqStat, &b, r.Path)
}

// Decode fills r from a request.
func (r *StatRequest) Decode(h *RequestHeader, data []byte) error {
	if err := checkReq(h, data, ReqStat); err != nil {
		return err
	}
	r.Options = h.Body[0]
	copy(r.FHandle[:], h.Body[12:16])
	r.Path = pathString(data)
	return nil
}

// CloseRequest is kXR_close.
type CloseRequest struct {
	FHandle FHandle
}

// Append appends the encoded request.
func (r *CloseRequest) Append(dst []byte, sid StreamID) []byte {
	var b [16]byte
	copy(b[0:4], r.FHandle[:])
	return appendReq(dst, sid, ReqClose, &b)
}

// Decode fills r from a request.
func (r *CloseRequest) Decode(h *RequestHeader, data []byte) error {
	if err := checkReq(h, data, ReqClose); err != nil {
		return err
	}
	copy(r.FHandle[:], h.Body[0:4])
	return nil
}

// DirlistRequest is kXR_dirlist.
type DirlistRequest struct {
	Options DirlistOptions
	Path    string
}

// WantStat reports whether the client asked for stat information.
func (r *DirlistRequest) WantStat() bool { return r.Options&(DirlistDStat|DirlistDCksm) != 0 }

// Append appends the encoded request.
func (r *DirlistRequest) Append(dst []byte, sid StreamID) []byte {
	var b [16]byte
	b[15] = byte(r.Options)
	return appendReqString(dst, sid, ReqDirlist, &b, r.Path)
}

// Decode fills r from a request.
func (r *DirlistRequest) Decode(h *RequestHeader, data []byte) error {
	if err := checkReq(h, data, ReqDirlist); err != nil {
		return err
	}
	r.Options = DirlistOptions(h.Body[15])
	r.Path = pathString(data)
	if r.Path == "" {
		return fmt.Errorf("kXR_dirlist without a path: %w", ErrMalformed)
	}
	return nil
}

// QueryRequest is kXR_query. For QueryChecksum Args is the path (with
// "?cks.type=adler32" style opaque to pick the algorithm); for QueryConfig
// it is a space-separated list of keys.
type QueryRequest struct {
	Type    QueryType
	FHandle FHandle
	Args    string
}

// Append appends the encoded request.
func (r *QueryRequest) Append(dst []byte, sid StreamID) []byte {
	var b [16]byte
	be.PutUint16(b[0:], uint16(r.Type))
	copy(b[4:8], r.FHandle[:])
	return appendReqString(dst, sid, ReqQuery, &b, r.Args)
}

// Decode fills r from a request.
func (r *QueryRequest) Decode(h *RequestHeader, data []byte) error {
	if err := checkReq(h, data, ReqQuery); err != nil {
		return err
	}
	r.Type = QueryType(be.Uint16(h.Body[0:]))
	copy(r.FHandle[:], h.Body[4:8])
	r.Args = pathString(data)
	return nil
}

// LocateRequest is kXR_locate. Path "*" or "*path" asks for any server.
type LocateRequest struct {
	Options OpenOptions
	Path    string
}

// Append appends the encoded request.
func (r *LocateRequest) Append(dst []byte, sid StreamID) []byte {
	var b [16]byte
	be.PutUint16(b[0:], uint16(r.Options))
	return appendReqString(dst, sid, ReqLocate, &b, r.Path)
}

// Decode fills r from a request.
func (r *LocateRequest) Decode(h *RequestHeader, data []byte) error {
	if err := checkReq(h, data, ReqLocate); err != nil {
		return err
	}
	r.Options = OpenOptions(be.Uint16(h.Body[0:]))
	r.Path = pathString(data)
	if r.Path == "" {
		return fmt.Errorf("kXR_locate without a path: %w", ErrMalformed)
	}
	return nil
}

// PingRequest is kXR_ping.
type PingRequest struct{}

// Append appends the encoded request.
func (r *PingRequest) Append(dst []byte, sid StreamID) []byte {
	var b [16]byte
	return appendReq(dst, sid, ReqPing, &b)
}

// Decode checks a ping request.
func (r *PingRequest) Decode(h *RequestHeader, data []byte) error {
	return checkReq(h, data, ReqPing)
}

// EndsessRequest is kXR_endsess: end the session with this id (from an
// earlier login on another connection).
type EndsessRequest struct {
	SessID [16]byte
}

// Append appends the encoded request.
func (r *EndsessRequest) Append(dst []byte, sid StreamID) []byte {
	return appendReq(dst, sid, ReqEndsess, &r.SessID)
}

// Decode fills r from a request.
func (r *EndsessRequest) Decode(h *RequestHeader, data []byte) error {
	if err := checkReq(h, data, ReqEndsess); err != nil {
		return err
	}
	r.SessID = h.Body
	return nil
}

// SetRequest is kXR_set ("appid ...", "monitor ...").
type SetRequest struct {
	Modifier uint8
	Data     string
}

// Append appends the encoded request.
func (r *SetRequest) Append(dst []byte, sid StreamID) []byte {
	var b [16]byte
	b[15] = r.Modifier
	return appendReqString(dst, sid, ReqSet, &b, r.Data)
}

// Decode fills r from a request.
func (r *SetRequest) Decode(h *RequestHeader, data []byte) error {
	if err := checkReq(h, data, ReqSet); err != nil {
		return err
	}
	r.Modifier = h.Body[15]
	r.Data = pathString(data)
	return nil
}
