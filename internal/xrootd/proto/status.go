package proto

import (
	"fmt"
	"github.com/hepcache/hepcache/internal/checksum"
	"hash/crc32"
)

var castagnoli = checksum.Castagnoli // the tree's one CRC32C table

// CRC32C returns the CRC32C (Castagnoli, RFC 7143) of b, the checksum of
// kXR_status bodies and pgread/pgwrite pages.
func CRC32C(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// StatusBody is the 16-byte body that starts every kXR_status response.
// Info follows it (within the header's Dlen), then Dlen bytes of data
// (outside the header's Dlen).
type StatusBody struct {
	// CRC32C covers the body after this field plus the info.
	CRC32C   uint32
	StreamID StreamID
	// RequestID is the request the status answers.
	RequestID RequestID
	RespType  RespType
	// Dlen is the number of data bytes after the info.
	Dlen int32
}

// AppendStatusResponse appends a kXR_status response header, body and info
// for request req, announcing dataLen data bytes that the caller sends
// right after. The header's dlen is StatusBodyLen+len(info).
func AppendStatusResponse(dst []byte, sid StreamID, req RequestID, rt RespType, info []byte, dataLen int) []byte {
	dst = AppendResponseHeader(dst, sid, StatusStatus, StatusBodyLen+len(info))
	body := len(dst)
	dst = append(dst, 0, 0, 0, 0, sid[0], sid[1], byte(req-ReqAuth), byte(rt), 0, 0, 0, 0)
	dst = be.AppendUint32(dst, uint32(dataLen))
	dst = append(dst, info...)
	be.PutUint32(dst[body:], CRC32C(dst[body+4:]))
	return dst
}

// DecodeStatus decodes the body of a kXR_status response (the header's Dlen
// bytes: the status body and the info) and checks its CRC32C. info aliases
// b.
func DecodeStatus(b []byte) (s StatusBody, info []byte, err error) {
	if len(b) < StatusBodyLen {
		return s, nil, fmt.Errorf("kXR_status body of %d bytes: %w", len(b), ErrShort)
	}
	s.CRC32C = be.Uint32(b)
	s.StreamID = StreamID{b[4], b[5]}
	s.RequestID = RequestID(b[6]) + ReqAuth
	s.RespType = RespType(b[7])
	s.Dlen = int32(be.Uint32(b[12:]))
	if got := CRC32C(b[4:]); got != s.CRC32C {
		return s, nil, fmt.Errorf("kXR_status body crc32c %08x, computed %08x: %w", s.CRC32C, got, ErrMalformed)
	}
	if s.Dlen < 0 {
		return s, nil, fmt.Errorf("kXR_status data length %d: %w", s.Dlen, ErrMalformed)
	}
	return s, b[StatusBodyLen:], nil
}

// PgReadPages returns the number of pages (and so CRC32Cs) of n bytes at
// offset: the first page ends at the next PageSize boundary after offset.
func PgReadPages(offset int64, n int) int {
	if n <= 0 {
		return 0
	}
	first := PageSize - int(offset%PageSize)
	if n <= first {
		return 1
	}
	return 1 + (n-first+PageSize-1)/PageSize
}

// PgReadDataLen returns the pgread wire length of n file bytes at offset:
// the bytes plus one 4-byte CRC32C per page.
func PgReadDataLen(offset int64, n int) int { return n + 4*PgReadPages(offset, n) }

// AppendPgReadHeader appends the kXR_status header, body and info (the
// 8-byte offset) of one pgread response carrying n file bytes at offset.
// final marks the last response (kXR_FinalResult) of the request.
func AppendPgReadHeader(dst []byte, sid StreamID, final bool, offset int64, n int) []byte {
	var info [8]byte
	be.PutUint64(info[:], uint64(offset))
	rt := PartialResult
	if final {
		rt = FinalResult
	}
	return AppendStatusResponse(dst, sid, ReqPgRead, rt, info[:], PgReadDataLen(offset, n))
}

// AppendPgReadData appends data (file bytes at offset) in pgread form: per
// page a big-endian CRC32C then the page, the first page cut at the next
// PageSize boundary of offset.
func AppendPgReadData(dst []byte, offset int64, data []byte) []byte {
	first := PageSize - int(offset%PageSize)
	for len(data) > 0 {
		n := min(first, len(data))
		dst = be.AppendUint32(dst, CRC32C(data[:n]))
		dst = append(dst, data[:n]...)
		data = data[n:]
		first = PageSize
	}
	return dst
}

// AppendPgReadResponse appends a whole pgread response: header, status body,
// offset info and the data in pgread form.
func AppendPgReadResponse(dst []byte, sid StreamID, final bool, offset int64, data []byte) []byte {
	dst = AppendPgReadHeader(dst, sid, final, offset, len(data))
	return AppendPgReadData(dst, offset, data)
}

// PgReadOffset returns the file offset carried in a pgread status info.
func PgReadOffset(info []byte) (int64, error) {
	if len(info) < 8 {
		return 0, fmt.Errorf("pgread info of %d bytes: %w", len(info), ErrShort)
	}
	return int64(be.Uint64(info)), nil
}

// ErrPageCRC reports a pgread page whose CRC32C does not match.
type ErrPageCRC struct {
	Offset int64 // file offset of the page
	Want   uint32
	Got    uint32
}

func (e *ErrPageCRC) Error() string {
	return fmt.Sprintf("pgread page at %d: crc32c %08x, computed %08x", e.Offset, e.Want, e.Got)
}

// UnpackPgRead checks the CRC32C of every page of wire (pgread form, file
// bytes at offset) and copies the file bytes to dst, which must hold them.
// It returns the number of file bytes copied; on a bad page it stops there
// and returns an *ErrPageCRC.
func UnpackPgRead(dst []byte, wire []byte, offset int64) (int, error) {
	n := 0
	first := PageSize - int(offset%PageSize)
	for len(wire) > 0 {
		if len(wire) <= 4 {
			return n, fmt.Errorf("pgread data: %d trailing bytes: %w", len(wire), ErrMalformed)
		}
		k := min(first, len(wire)-4)
		page := wire[4 : 4+k]
		want := be.Uint32(wire)
		if got := CRC32C(page); got != want {
			return n, &ErrPageCRC{Offset: offset + int64(n), Want: want, Got: got}
		}
		if len(dst)-n < k {
			return n, fmt.Errorf("pgread data: %d bytes do not fit in %d: %w", n+k, len(dst), ErrShort)
		}
		n += copy(dst[n:], page)
		wire = wire[4+k:]
		first = PageSize
	}
	return n, nil
}
