package monitor

import "encoding/binary"

// The wire format of XRootD 5's monitoring packets (XrdXrootdMonData.hh),
// all integers big-endian.
const (
	hdrLen = 8 // code, pseq, plen (2), stod (4)

	codeIdent   = '=' // server identification
	codeUser    = 'u' // user login: dictid + "prot/user.pid:sid@host\nauth-info"
	codeFStream = 'f' // file stream
	codeGStream = 'g' // g-stream with the binary header

	// f-stream record types (XrdXrootdMonFileHdr::recType).
	recClose = 0
	recOpen  = 1
	recTime  = 2
	recXfr   = 3
	recDisc  = 4

	// f-stream record flags.
	flagForced = 0x01 // close: the client disconnected without closing
	flagHasOPS = 0x02 // close: ops follow the transfer counts
	flagHasLFN = 0x01 // open: user dictid and path follow the size
	flagHasSID = 0x01 // time: the server id is present

	todLen   = 24          // time record: header, tBeg, tEnd, sID
	xfrLen   = 8 + 24      // header + read, readv, write
	closeLen = 8 + 24 + 48 // header + transfer counts + ops
	maxLFN   = 1024        // XrdXrootdMonFileLFN holds at most this path
	maxFPkt  = 65472       // XRootD's default f-stream buffer (fbsz)
	maxGPkt  = 32 << 10    // XRootD's default g-stream buffer (gbuff)
	gsHdrLen = hdrLen + 4 + 4 + 8

	// gsTypePFC is the g-stream provider of the proxy file cache; it is the
	// top byte of the sID in the binary g-stream header.
	gsTypePFC = 'C'
)

// putHeader writes the 8-byte packet header at b[0:8].
func putHeader(b []byte, code byte, seq uint8, plen int, stod uint32) {
	b[0] = code
	b[1] = seq
	binary.BigEndian.PutUint16(b[2:], uint16(plen))
	binary.BigEndian.PutUint32(b[4:], stod)
}

// mapPacket is a dictionary mapping packet ('=' or 'u'): header, dictid,
// then text.
func mapPacket(code byte, seq uint8, stod, dictid uint32, text string) []byte {
	b := make([]byte, hdrLen+4+len(text))
	putHeader(b, code, seq, len(b), stod)
	binary.BigEndian.PutUint32(b[hdrLen:], dictid)
	copy(b[hdrLen+4:], text)
	return b
}

// appendRecHdr appends an f-stream record header: type, flag, size, id.
func appendRecHdr(b []byte, typ, flag byte, size int, id uint32) []byte {
	b = append(b, typ, flag)
	b = binary.BigEndian.AppendUint16(b, uint16(size))
	return binary.BigEndian.AppendUint32(b, id)
}

// openRecLen is the size of an open record with path: the path is padded
// with NULs to a 4-byte boundary, with room for at least one NUL.
func openRecLen(path string) int {
	n := 8 + 8 + 4 + len(path)
	return (n + 8) &^ 3
}

func appendOpen(b []byte, fileID, userID uint32, size int64, path string) []byte {
	n := openRecLen(path)
	b = appendRecHdr(b, recOpen, flagHasLFN, n, fileID)
	b = binary.BigEndian.AppendUint64(b, uint64(size))
	b = binary.BigEndian.AppendUint32(b, userID)
	b = append(b, path...)
	for i := 8 + 8 + 4 + len(path); i < n; i++ {
		b = append(b, 0)
	}
	return b
}

// xfr are a file's transfer counts.
type xfr struct{ read, readv, write int64 }

func appendXfrCounts(b []byte, x xfr) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(x.read))
	b = binary.BigEndian.AppendUint64(b, uint64(x.readv))
	return binary.BigEndian.AppendUint64(b, uint64(x.write))
}

func appendXfr(b []byte, fileID uint32, x xfr) []byte {
	b = appendRecHdr(b, recXfr, 0, xfrLen, fileID)
	return appendXfrCounts(b, x)
}

// ops are a file's operation counts (XrdXrootdMonStatOPS); the minima and
// maxima are zero when there was no such operation.
type ops struct {
	read, readv, write int32
	rsMin, rsMax       int16
	rsegs              int64
	rdMin, rdMax       int32
	rvMin, rvMax       int32
	wrMin, wrMax       int32
}

func appendClose(b []byte, fileID uint32, x xfr, o ops, forced bool) []byte {
	flag := byte(flagHasOPS)
	if forced {
		flag |= flagForced
	}
	b = appendRecHdr(b, recClose, flag, closeLen, fileID)
	b = appendXfrCounts(b, x)
	for _, v := range []int32{o.read, o.readv, o.write} {
		b = binary.BigEndian.AppendUint32(b, uint32(v))
	}
	b = binary.BigEndian.AppendUint16(b, uint16(o.rsMin))
	b = binary.BigEndian.AppendUint16(b, uint16(o.rsMax))
	b = binary.BigEndian.AppendUint64(b, uint64(o.rsegs))
	for _, v := range []int32{o.rdMin, o.rdMax, o.rvMin, o.rvMax, o.wrMin, o.wrMax} {
		b = binary.BigEndian.AppendUint32(b, uint32(v))
	}
	return b
}

// putTOD writes the time record that opens every f-stream packet.
func putTOD(b []byte, nXfr, nTotal int, tBeg, tEnd uint32, sid uint64) {
	b[0], b[1] = recTime, flagHasSID
	binary.BigEndian.PutUint16(b[2:], todLen)
	binary.BigEndian.PutUint16(b[4:], uint16(nXfr))
	binary.BigEndian.PutUint16(b[6:], uint16(nTotal))
	binary.BigEndian.PutUint32(b[8:], tBeg)
	binary.BigEndian.PutUint32(b[12:], tEnd)
	binary.BigEndian.PutUint64(b[16:], sid)
}
