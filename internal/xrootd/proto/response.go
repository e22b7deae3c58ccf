package proto

import (
	"bytes"
	"fmt"
)

// Response encoders append a whole response (header and body) to dst.
// Decoders take the body (the Dlen bytes after the header); returned byte
// slices alias it, strings are copies.

// AppendOK appends a kXR_ok response carrying data (which may be empty).
func AppendOK(dst []byte, sid StreamID, data []byte) []byte {
	dst = AppendResponseHeader(dst, sid, StatusOK, len(data))
	return append(dst, data...)
}

// AppendOKString appends a kXR_ok response carrying s and a NUL, the way
// the C++ server sends text answers (query, checksum, locate).
func AppendOKString(dst []byte, sid StreamID, s string) []byte {
	dst = AppendResponseHeader(dst, sid, StatusOK, len(s)+1)
	dst = append(dst, s...)
	return append(dst, 0)
}

// AppendOKSoFar appends a kXR_oksofar response: one part of an answer that
// continues in later responses of the same stream.
func AppendOKSoFar(dst []byte, sid StreamID, data []byte) []byte {
	dst = AppendResponseHeader(dst, sid, StatusOKSoFar, len(data))
	return append(dst, data...)
}

// ProtocolResponse is the body of the kXR_protocol answer.
type ProtocolResponse struct {
	PVal  int32
	Flags ServerFlags
	// Rest holds the optional bind ('B') and security ('S') requirement
	// structures, raw.
	Rest []byte
}

// SecReqs returns the security requirements ('S' structure) of the answer,
// if any: security level and the number of signing requirements.
func (r *ProtocolResponse) SecReqs() (level uint8, nvec int, ok bool) {
	b := r.Rest
	for len(b) >= 4 {
		switch b[0] {
		case 'S':
			if len(b) < 6 {
				return 0, 0, false
			}
			return b[4], int(b[5]), true
		case 'B':
			// theTag, rsvd, bifILen(2), bifInfo[bifILen]
			n := 4 + int(be.Uint16(b[2:]))
			if n > len(b) {
				return 0, 0, false
			}
			b = b[n:]
		default:
			return 0, 0, false
		}
	}
	return 0, 0, false
}

// AppendProtocolResponse appends the kXR_protocol answer.
func AppendProtocolResponse(dst []byte, sid StreamID, r *ProtocolResponse) []byte {
	dst = AppendResponseHeader(dst, sid, StatusOK, 8+len(r.Rest))
	dst = be.AppendUint32(dst, uint32(r.PVal))
	dst = be.AppendUint32(dst, uint32(r.Flags))
	return append(dst, r.Rest...)
}

// DecodeProtocolResponse decodes the kXR_protocol answer body.
func DecodeProtocolResponse(body []byte) (ProtocolResponse, error) {
	var r ProtocolResponse
	if len(body) < 8 {
		// Very old servers answer with the version only.
		if len(body) >= 4 {
			r.PVal = int32(be.Uint32(body))
			return r, nil
		}
		return r, fmt.Errorf("kXR_protocol answer of %d bytes: %w", len(body), ErrShort)
	}
	r.PVal = int32(be.Uint32(body))
	r.Flags = ServerFlags(be.Uint32(body[4:]))
	r.Rest = body[8:]
	return r, nil
}

// LoginResponse is the body of the kXR_login answer.
type LoginResponse struct {
	SessID [16]byte
	// Sec is the security parameters ("&P=gsi,..."); non-empty means the
	// server requires kXR_auth before anything else.
	Sec []byte
}

// AppendLoginResponse appends the kXR_login answer.
func AppendLoginResponse(dst []byte, sid StreamID, r *LoginResponse) []byte {
	dst = AppendResponseHeader(dst, sid, StatusOK, 16+len(r.Sec))
	dst = append(dst, r.SessID[:]...)
	return append(dst, r.Sec...)
}

// DecodeLoginResponse decodes the kXR_login answer body.
func DecodeLoginResponse(body []byte) (LoginResponse, error) {
	var r LoginResponse
	if len(body) == 0 {
		return r, nil // protocol version 0 clients get no session id
	}
	if len(body) < 16 {
		return r, fmt.Errorf("kXR_login answer of %d bytes: %w", len(body), ErrShort)
	}
	copy(r.SessID[:], body)
	r.Sec = bytes.TrimRight(body[16:], "\x00")
	return r, nil
}

// AppendOpenResponse appends the kXR_open answer: the file handle and, when
// st is not nil (kXR_retstat), the compression info (zero) and the stat
// text.
func AppendOpenResponse(dst []byte, sid StreamID, fh FHandle, st *StatInfo) []byte {
	if st == nil {
		dst = AppendResponseHeader(dst, sid, StatusOK, 4)
		return append(dst, fh[:]...)
	}
	hdr := len(dst)
	dst = AppendResponseHeader(dst, sid, StatusOK, 0)
	dst = append(dst, fh[:]...)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0) // cpsize, cptype
	dst = AppendStatInfo(dst, st)
	dst = append(dst, 0)
	be.PutUint32(dst[hdr+4:], uint32(len(dst)-hdr-ResponseHeaderLen))
	return dst
}

// DecodeOpenResponse decodes the kXR_open answer body. hasStat reports
// whether stat information (kXR_retstat) was present and parsed into st.
func DecodeOpenResponse(body []byte) (fh FHandle, st StatInfo, hasStat bool, err error) {
	if len(body) < 4 {
		return fh, st, false, fmt.Errorf("kXR_open answer of %d bytes: %w", len(body), ErrShort)
	}
	copy(fh[:], body)
	if len(body) <= 12 {
		return fh, st, false, nil
	}
	st, err = ParseStatInfo(body[12:])
	if err != nil {
		return fh, st, false, fmt.Errorf("kXR_open answer: %w", err)
	}
	return fh, st, true, nil
}

// AppendStatResponse appends a kXR_stat answer (stat text and a NUL).
func AppendStatResponse(dst []byte, sid StreamID, st *StatInfo) []byte {
	hdr := len(dst)
	dst = AppendResponseHeader(dst, sid, StatusOK, 0)
	dst = AppendStatInfo(dst, st)
	dst = append(dst, 0)
	be.PutUint32(dst[hdr+4:], uint32(len(dst)-hdr-ResponseHeaderLen))
	return dst
}

// LocateEntry is one location in a kXR_locate answer.
type LocateEntry struct {
	// Type is 'S' (server, online), 's' (server, pending), 'M' (manager,
	// online) or 'm' (manager, pending).
	Type byte
	// Access is 'r' (read) or 'w' (read/write).
	Access byte
	// Addr is "host:port" or "[ipv6]:port".
	Addr string
}

// AppendLocateResponse appends a kXR_locate answer: the entries as
// "Sr127.0.0.1:1094", separated by spaces, NUL terminated.
func AppendLocateResponse(dst []byte, sid StreamID, entries []LocateEntry) []byte {
	hdr := len(dst)
	dst = AppendResponseHeader(dst, sid, StatusOK, 0)
	for i, e := range entries {
		if i > 0 {
			dst = append(dst, ' ')
		}
		dst = append(dst, e.Type, e.Access)
		dst = append(dst, e.Addr...)
	}
	dst = append(dst, 0)
	be.PutUint32(dst[hdr+4:], uint32(len(dst)-hdr-ResponseHeaderLen))
	return dst
}

// ParseLocateResponse parses a kXR_locate answer body.
func ParseLocateResponse(body []byte) ([]LocateEntry, error) {
	var out []LocateEntry
	for _, f := range bytes.Fields(bytes.TrimRight(body, "\x00")) {
		if len(f) < 3 || bytes.IndexByte([]byte("SsMm"), f[0]) < 0 || (f[1] != 'r' && f[1] != 'w') {
			return out, fmt.Errorf("kXR_locate answer entry %q: %w", f, ErrMalformed)
		}
		out = append(out, LocateEntry{Type: f[0], Access: f[1], Addr: string(f[2:])})
	}
	return out, nil
}

// AppendError appends a kXR_error response: the error code and the
// NUL-terminated message.
func AppendError(dst []byte, sid StreamID, code ErrorCode, msg string) []byte {
	dst = AppendResponseHeader(dst, sid, StatusError, 4+len(msg)+1)
	dst = be.AppendUint32(dst, uint32(code))
	dst = append(dst, msg...)
	return append(dst, 0)
}

// DecodeError decodes a kXR_error body.
func DecodeError(body []byte) (ErrorCode, string, error) {
	if len(body) < 4 {
		return 0, "", fmt.Errorf("kXR_error body of %d bytes: %w", len(body), ErrShort)
	}
	return ErrorCode(be.Uint32(body)), string(bytes.TrimRight(body[4:], "\x00")), nil
}

// AppendRedirect appends a kXR_redirect response. host is "host" or
// "host?opaque" (the opaque is added to the path on the new server); a port
// of -1 or less carries ServerFlags negated and host may be a URL.
func AppendRedirect(dst []byte, sid StreamID, port int32, host string) []byte {
	dst = AppendResponseHeader(dst, sid, StatusRedirect, 4+len(host))
	dst = be.AppendUint32(dst, uint32(port))
	return append(dst, host...)
}

// DecodeRedirect decodes a kXR_redirect body into the port and the
// "host[?opaque]" string.
func DecodeRedirect(body []byte) (port int32, host string, err error) {
	if len(body) <= 4 {
		return 0, "", fmt.Errorf("kXR_redirect body of %d bytes: %w", len(body), ErrShort)
	}
	return int32(be.Uint32(body)), string(bytes.TrimRight(body[4:], "\x00")), nil
}

// AppendWait appends a kXR_wait response: retry the request after seconds.
func AppendWait(dst []byte, sid StreamID, seconds int32, msg string) []byte {
	dst = AppendResponseHeader(dst, sid, StatusWait, 4+len(msg))
	dst = be.AppendUint32(dst, uint32(seconds))
	return append(dst, msg...)
}

// DecodeWait decodes a kXR_wait body.
func DecodeWait(body []byte) (seconds int32, msg string, err error) {
	if len(body) < 4 {
		return 0, "", fmt.Errorf("kXR_wait body of %d bytes: %w", len(body), ErrShort)
	}
	return int32(be.Uint32(body)), string(bytes.TrimRight(body[4:], "\x00")), nil
}

// AppendWaitResp appends a kXR_waitresp response: the answer will come as
// an asynchronous kXR_attn/kXR_asynresp within about seconds.
func AppendWaitResp(dst []byte, sid StreamID, seconds int32) []byte {
	dst = AppendResponseHeader(dst, sid, StatusWaitResp, 4)
	return be.AppendUint32(dst, uint32(seconds))
}

// DecodeWaitResp decodes a kXR_waitresp body.
func DecodeWaitResp(body []byte) (seconds int32, err error) {
	if len(body) < 4 {
		return 0, fmt.Errorf("kXR_waitresp body of %d bytes: %w", len(body), ErrShort)
	}
	return int32(be.Uint32(body)), nil
}

// AsynRespOverhead is the number of bytes an asynchronous response adds in
// front of the embedded response body: outer header, action, reserved and
// the embedded response header.
const AsynRespOverhead = ResponseHeaderLen + 8 + ResponseHeaderLen

// AppendAsynResp appends a kXR_attn response with action kXR_asynresp that
// delivers the answer (status and data) to the request on stream sid that
// earlier got kXR_waitresp. The outer header has stream id 0.
func AppendAsynResp(dst []byte, sid StreamID, status Status, data []byte) []byte {
	dst = AppendResponseHeader(dst, StreamID{}, StatusAttn, 8+ResponseHeaderLen+len(data))
	dst = be.AppendUint32(dst, uint32(AttnAsynResp))
	dst = append(dst, 0, 0, 0, 0)
	dst = AppendResponseHeader(dst, sid, status, len(data))
	return append(dst, data...)
}

// DecodeAttn decodes a kXR_attn body. For AttnAsynResp, inner is the
// embedded response header and data its body; for AttnAsyncMsg, data is
// the message.
func DecodeAttn(body []byte) (action AttnAction, inner ResponseHeader, data []byte, err error) {
	if len(body) < 4 {
		return 0, inner, nil, fmt.Errorf("kXR_attn body of %d bytes: %w", len(body), ErrShort)
	}
	action = AttnAction(be.Uint32(body))
	switch action {
	case AttnAsynResp:
		if len(body) < 8+ResponseHeaderLen {
			return action, inner, nil, fmt.Errorf("kXR_asynresp body of %d bytes: %w", len(body), ErrShort)
		}
		inner, err = DecodeResponseHeader(body[8:])
		if err != nil {
			return action, inner, nil, err
		}
		data = body[8+ResponseHeaderLen:]
		if int(inner.Dlen) != len(data) {
			return action, inner, nil, fmt.Errorf("kXR_asynresp: embedded dlen %d, %d bytes: %w", inner.Dlen, len(data), ErrMalformed)
		}
		return action, inner, data, nil
	case AttnAsyncMsg:
		if len(body) < 8 {
			return action, inner, nil, nil
		}
		return action, inner, body[8:], nil
	}
	return action, inner, body[4:], nil
}
