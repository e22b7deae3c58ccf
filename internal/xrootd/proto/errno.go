package proto

import (
	"errors"
	"fmt"
	"syscall"
)

// Error is a kXR_error answer as a Go error, so that callers can test the
// code with errors.As and map it (see Errno).
type Error struct {
	Code    ErrorCode
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code.String()
	}
	return fmt.Sprintf("%v: %s", e.Code, e.Message)
}

// Is lets errors.Is(err, syscall.ENOENT) and similar match the errno the
// code maps to.
func (e *Error) Is(target error) bool {
	var en syscall.Errno
	if errors.As(target, &en) {
		return e.Code.Errno() == en
	}
	return false
}

// Errno returns the errno the C++ client maps the code to
// (XProtocol::toErrno); ENOMSG for unknown codes.
func (e ErrorCode) Errno() syscall.Errno {
	switch e {
	case ErrArgInvalid, ErrArgMissing, ErrBadPayload:
		return syscall.EINVAL
	case ErrArgTooLong:
		return syscall.ENAMETOOLONG
	case ErrFileLocked:
		return syscall.EDEADLK
	case ErrFileNotOpen:
		return syscall.EBADF
	case ErrFSError:
		return syscall.ENODEV
	case ErrInvalidRequest:
		return syscall.EBADRQC
	case ErrIOError:
		return syscall.EIO
	case ErrNoMemory:
		return syscall.ENOMEM
	case ErrNoSpace:
		return syscall.ENOSPC
	case ErrNotAuthorized:
		return syscall.EACCES
	case ErrNotFound:
		return syscall.ENOENT
	case ErrServerError:
		return syscall.EFAULT
	case ErrUnsupported:
		return syscall.ENOTSUP
	case ErrNoServer:
		return syscall.EHOSTUNREACH
	case ErrNotFile:
		return syscall.ENOTBLK
	case ErrIsDirectory:
		return syscall.EISDIR
	case ErrCancelled:
		return syscall.ECANCELED
	case ErrItExists:
		return syscall.EEXIST
	case ErrChkSumErr:
		return syscall.EDOM
	case ErrInProgress:
		return syscall.EINPROGRESS
	case ErrOverQuota:
		return syscall.EDQUOT
	case ErrSigVerErr:
		return syscall.EILSEQ
	case ErrDecryptErr:
		return syscall.ERANGE
	case ErrOverloaded:
		return syscall.EUSERS
	case ErrFSReadOnly:
		return syscall.EROFS
	case ErrAttrNotFound:
		return syscall.ENODATA
	case ErrTLSRequired:
		return syscall.EPROTOTYPE
	case ErrNoReplicas:
		return syscall.EADDRNOTAVAIL
	case ErrAuthFailed:
		return syscall.EBADE
	case ErrImpossible:
		return syscall.EIDRM
	case ErrConflict:
		return syscall.ENOTTY
	case ErrTooManyErrs:
		return syscall.ETOOMANYREFS
	case ErrReqTimedOut:
		return syscall.ETIMEDOUT
	}
	return syscall.ENOMSG
}

// CodeFromErrno maps an errno to an error code the way the C++ server does
// (XProtocol::mapError); kXR_FSError for anything else.
func CodeFromErrno(en syscall.Errno) ErrorCode {
	switch en {
	case syscall.ENOENT:
		return ErrNotFound
	case syscall.EINVAL:
		return ErrArgInvalid
	case syscall.EPERM, syscall.EACCES:
		return ErrNotAuthorized
	case syscall.EIO:
		return ErrIOError
	case syscall.ENOMEM, syscall.ENOBUFS:
		return ErrNoMemory
	case syscall.ENOSPC:
		return ErrNoSpace
	case syscall.ENAMETOOLONG:
		return ErrArgTooLong
	case syscall.ENETUNREACH:
		return ErrNoServer
	case syscall.ENOTBLK:
		return ErrNotFile
	case syscall.ENOTSUP:
		return ErrUnsupported
	case syscall.EISDIR:
		return ErrIsDirectory
	case syscall.EEXIST:
		return ErrItExists
	case syscall.EBADRQC:
		return ErrInvalidRequest
	case syscall.ETXTBSY:
		return ErrInProgress
	case syscall.ENODEV:
		return ErrFSError
	case syscall.EFAULT:
		return ErrServerError
	case syscall.EDOM:
		return ErrChkSumErr
	case syscall.EDQUOT:
		return ErrOverQuota
	case syscall.EILSEQ:
		return ErrSigVerErr
	case syscall.ERANGE:
		return ErrDecryptErr
	case syscall.EUSERS:
		return ErrOverloaded
	case syscall.EROFS:
		return ErrFSReadOnly
	case syscall.ENODATA:
		return ErrAttrNotFound
	case syscall.EPROTOTYPE:
		return ErrTLSRequired
	case syscall.EADDRNOTAVAIL:
		return ErrNoReplicas
	case syscall.EBADE:
		return ErrAuthFailed
	case syscall.EIDRM:
		return ErrImpossible
	case syscall.ENOTTY:
		return ErrConflict
	case syscall.ETOOMANYREFS:
		return ErrTooManyErrs
	case syscall.ETIMEDOUT:
		return ErrReqTimedOut
	case syscall.EBADF:
		return ErrFileNotOpen
	case syscall.ECANCELED:
		return ErrCancelled
	}
	return ErrFSError
}
