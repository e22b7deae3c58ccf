package proto

import (
	"encoding/binary"
	"errors"
	"fmt"
)

var be = binary.BigEndian

// ErrShort reports a buffer shorter than the structure it should hold.
var ErrShort = errors.New("proto: short buffer")

// ErrMalformed reports bytes that do not follow the protocol.
var ErrMalformed = errors.New("proto: malformed message")

// StreamID ties a response to its request on one connection.
type StreamID [2]byte

// FHandle is the server's 4-byte handle for an open file. Its content is
// opaque to the client.
type FHandle [4]byte

// RequestHeader is the 24-byte header of every client request. Body holds
// the request-specific parameters; Dlen bytes of data follow the header.
type RequestHeader struct {
	StreamID  StreamID
	RequestID RequestID
	Body      [16]byte
	Dlen      int32
}

// AppendRequestHeader appends the 24 encoded bytes of h to dst.
func AppendRequestHeader(dst []byte, h *RequestHeader) []byte {
	dst = append(dst, h.StreamID[0], h.StreamID[1])
	dst = be.AppendUint16(dst, uint16(h.RequestID))
	dst = append(dst, h.Body[:]...)
	return be.AppendUint32(dst, uint32(h.Dlen))
}

// DecodeRequestHeader decodes the first 24 bytes of b. It rejects a negative
// data length; the caller decides what length is too large.
func DecodeRequestHeader(b []byte) (RequestHeader, error) {
	var h RequestHeader
	if len(b) < RequestHeaderLen {
		return h, fmt.Errorf("request header: %d of %d bytes: %w", len(b), RequestHeaderLen, ErrShort)
	}
	h.StreamID = StreamID{b[0], b[1]}
	h.RequestID = RequestID(be.Uint16(b[2:4]))
	copy(h.Body[:], b[4:20])
	h.Dlen = int32(be.Uint32(b[20:24]))
	if h.Dlen < 0 {
		return h, fmt.Errorf("%v request with dlen %d: %w", h.RequestID, h.Dlen, ErrMalformed)
	}
	return h, nil
}

// ResponseHeader is the 8-byte header of every server response; Dlen bytes
// of body follow it.
type ResponseHeader struct {
	StreamID StreamID
	Status   Status
	Dlen     int32
}

// AppendResponseHeader appends the 8 encoded bytes of a response header.
func AppendResponseHeader(dst []byte, sid StreamID, status Status, dlen int) []byte {
	dst = append(dst, sid[0], sid[1])
	dst = be.AppendUint16(dst, uint16(status))
	return be.AppendUint32(dst, uint32(dlen))
}

// DecodeResponseHeader decodes the first 8 bytes of b.
func DecodeResponseHeader(b []byte) (ResponseHeader, error) {
	var h ResponseHeader
	if len(b) < ResponseHeaderLen {
		return h, fmt.Errorf("response header: %d of %d bytes: %w", len(b), ResponseHeaderLen, ErrShort)
	}
	h.StreamID = StreamID{b[0], b[1]}
	h.Status = Status(be.Uint16(b[2:4]))
	h.Dlen = int32(be.Uint32(b[4:8]))
	if h.Dlen < 0 {
		return h, fmt.Errorf("%v response with dlen %d: %w", h.Status, h.Dlen, ErrMalformed)
	}
	return h, nil
}

// AppendClientHandshake appends the client's 20-byte initial handshake
// (0, 0, 0, 4, 2012).
func AppendClientHandshake(dst []byte) []byte {
	dst = append(dst, make([]byte, 12)...)
	dst = be.AppendUint32(dst, 4)
	return be.AppendUint32(dst, HandshakeMagic)
}

// CheckClientHandshake reports whether b starts with a valid client
// handshake.
func CheckClientHandshake(b []byte) error {
	if len(b) < ClientHandshakeLen {
		return fmt.Errorf("handshake: %d of %d bytes: %w", len(b), ClientHandshakeLen, ErrShort)
	}
	if be.Uint32(b[0:]) != 0 || be.Uint32(b[4:]) != 0 || be.Uint32(b[8:]) != 0 ||
		be.Uint32(b[12:]) != 4 || be.Uint32(b[16:]) != HandshakeMagic {
		return fmt.Errorf("handshake % x: not an XRootD client: %w", b[:ClientHandshakeLen], ErrMalformed)
	}
	return nil
}

// AppendServerHandshake appends the server's 16-byte handshake reply: a
// response header (stream 0, kXR_ok, dlen 8), the protocol version and the
// server type (DataServer or LoadBalancer).
func AppendServerHandshake(dst []byte, protover, serverType int32) []byte {
	dst = AppendResponseHeader(dst, StreamID{}, StatusOK, 8)
	dst = be.AppendUint32(dst, uint32(protover))
	return be.AppendUint32(dst, uint32(serverType))
}

// DecodeServerHandshake decodes the 16-byte handshake reply.
func DecodeServerHandshake(b []byte) (protover, serverType int32, err error) {
	if len(b) < ServerHandshakeLen {
		return 0, 0, fmt.Errorf("handshake reply: %d of %d bytes: %w", len(b), ServerHandshakeLen, ErrShort)
	}
	h, _ := DecodeResponseHeader(b)
	if h.Status != StatusOK || h.Dlen != 8 {
		return 0, 0, fmt.Errorf("handshake reply % x: not an XRootD server: %w", b[:ServerHandshakeLen], ErrMalformed)
	}
	return int32(be.Uint32(b[8:])), int32(be.Uint32(b[12:])), nil
}
