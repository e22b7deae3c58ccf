package xrootd

import (
	"context"
	"errors"
	"syscall"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/xrootd/proto"
	"github.com/hepcache/hepcache/origin"
)

// errorCode maps an error from the backend (or the front end itself) to the
// XRootD error code the client sees. The message is err's text.
//
// kXR_ServerError is used for an unreachable origin because XrdCl retries
// it at the redirector that sent the client here (a cache cluster), while
// kXR_noserver is final unless the redirector is a metalink.
func errorCode(err error) proto.ErrorCode {
	var pe *codedError
	var xe *proto.Error
	var en syscall.Errno
	switch {
	case errors.As(err, &pe):
		return pe.code
	case errors.As(err, &xe):
		return xe.Code
	case errors.Is(err, backend.ErrForbidden), errors.Is(err, origin.ErrNotAuthorized):
		return proto.ErrNotAuthorized
	case errors.Is(err, origin.ErrNotFound):
		return proto.ErrNotFound
	case errors.Is(err, origin.ErrIsDir):
		return proto.ErrIsDirectory
	case errors.Is(err, backend.ErrInvalidPath), errors.Is(err, origin.ErrInvalid):
		return proto.ErrArgInvalid
	case errors.Is(err, backend.ErrBusy):
		return proto.ErrOverloaded
	case errors.Is(err, origin.ErrUnsupported):
		return proto.ErrUnsupported
	case errors.Is(err, origin.ErrUnavailable):
		return proto.ErrServerError
	case errors.Is(err, context.DeadlineExceeded):
		return proto.ErrReqTimedOut
	case errors.Is(err, context.Canceled):
		return proto.ErrCancelled
	case errors.As(err, &en):
		return proto.CodeFromErrno(en)
	}
	return proto.ErrServerError
}

// errorMessage is the text sent with a kXR_error for err.
func errorMessage(err error) string {
	if errors.Is(err, origin.ErrUnavailable) {
		return "origin unreachable: " + err.Error()
	}
	return err.Error()
}

// Unwrap returns the backend or origin sentinel of the error's class, so
// that errors the front end detects itself are classified (metrics.Outcome,
// errors.Is) like the backend's. Codes of no class unwrap to nil.
func (e *codedError) Unwrap() error {
	switch e.code {
	case proto.ErrNotFound:
		return origin.ErrNotFound
	case proto.ErrNotAuthorized, proto.ErrFSReadOnly:
		return backend.ErrForbidden
	case proto.ErrArgInvalid, proto.ErrArgMissing, proto.ErrArgTooLong, proto.ErrFileNotOpen, proto.ErrInvalidRequest:
		return backend.ErrInvalidPath
	case proto.ErrOverloaded:
		return backend.ErrBusy
	case proto.ErrUnsupported:
		return origin.ErrUnsupported
	case proto.ErrIsDirectory:
		return origin.ErrIsDir
	}
	return nil
}

// appendBusy appends a kXR_wait of secs (at least 1) with reason: how a
// root:// client is told to come back, XrdCl waits that long and sends the
// request again. Every busy answer goes out through here (a request the
// cache sheds for overload, a backend's wait, a bound on connections);
// XrdCl takes no kXR_wait to kXR_protocol or kXR_login, so a connection
// over a bound is logged in first, and one draining before its login is
// closed instead.
func appendBusy(dst []byte, sid proto.StreamID, secs int, reason string) []byte {
	return proto.AppendWait(dst, sid, int32(max(secs, 1)), reason)
}
