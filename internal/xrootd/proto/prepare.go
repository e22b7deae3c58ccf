package proto

import (
	"fmt"
	"strings"
)

// PrepareOptions are the kXR_prepare option bits (XPrepRequestOption).
type PrepareOptions uint8

// kXR_prepare options.
const (
	PrepareCancel PrepareOptions = 1
	PrepareNotify PrepareOptions = 2
	PrepareNoErrs PrepareOptions = 4
	PrepareStage  PrepareOptions = 8
	PrepareWMode  PrepareOptions = 16
	PrepareColoc  PrepareOptions = 32
	PrepareFresh  PrepareOptions = 64
	PrepareUseTCP PrepareOptions = 128
)

// PrepareEvict is the kXR_prepare extended option (optionX) saying the
// files are no longer needed.
const PrepareEvict uint16 = 0x0001

// PrepareRequest is kXR_prepare: stage, cancel or hint a list of paths.
// The data is the paths separated by newlines; for a cancel its first line
// is the request id returned by the stage.
type PrepareRequest struct {
	Options  PrepareOptions
	Priority uint8
	Port     uint16
	OptionX  uint16
	Paths    []string
}

// Append appends the encoded request.
func (r *PrepareRequest) Append(dst []byte, sid StreamID) []byte {
	var b [16]byte
	b[0] = byte(r.Options)
	b[1] = r.Priority
	be.PutUint16(b[2:], r.Port)
	be.PutUint16(b[4:], r.OptionX)
	return appendReqString(dst, sid, ReqPrepare, &b, strings.Join(r.Paths, "\n"))
}

// Decode fills r from a request. Empty lines are dropped; a request
// without any path is malformed.
func (r *PrepareRequest) Decode(h *RequestHeader, data []byte) error {
	if err := checkReq(h, data, ReqPrepare); err != nil {
		return err
	}
	r.Options = PrepareOptions(h.Body[0])
	r.Priority = h.Body[1]
	r.Port = be.Uint16(h.Body[2:])
	r.OptionX = be.Uint16(h.Body[4:])
	r.Paths = r.Paths[:0]
	for _, line := range strings.Split(pathString(data), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			r.Paths = append(r.Paths, line)
		}
	}
	if len(r.Paths) == 0 {
		return fmt.Errorf("kXR_prepare without a path: %w", ErrMalformed)
	}
	return nil
}
