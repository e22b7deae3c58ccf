package backend

import (
	"context"
	"os"
)

// OSFiler is an optional interface of File for data kept in a local file.
// OSFile returns the *os.File that holds the bytes [off, off+n) of the File
// at the same offsets, when they are all present there, so that a front end
// can send them with sendfile(2) instead of copying them through user
// space. It does not block. The *os.File stays owned by the File: the
// caller uses it only until File.Close, reads it only with positioned
// calls (pread, sendfile with an offset) and never changes its offset.
type OSFiler interface {
	OSFile(off, n int64) (*os.File, bool)
}

// FileStreamer is an optional interface of File: StreamFile is Stream,
// except that bytes already in a local file may be handed to file as a
// range of that file instead of to bytes, for the front end to send with
// sendfile(2). A cold read's bytes then pass through user space once (from
// the origin), not three times (origin, disk write, disk read). f follows
// OSFiler's rules. The ranges come in order and together with the bytes
// cover the read; an error from either callback ends it.
type FileStreamer interface {
	StreamFile(ctx context.Context, off, n int64, bytes func([]byte) error, file func(f *os.File, off, n int64) error) (int64, error)
}

var _ OSFiler = (*originFile)(nil)

// OSFile implements OSFiler for an origin whose files are local
// (origin/posix): their bytes can go out with sendfile.
func (f *originFile) OSFile(off, n int64) (*os.File, bool) {
	if of, ok := f.f.(OSFiler); ok {
		return of.OSFile(off, n)
	}
	return nil, false
}

// DisconnectCloser is an optional interface of File: CloseAtDisconnect
// ends an access the client left open when it went away (the monitoring
// f-stream marks its close record "forced", as XRootD does).
type DisconnectCloser interface {
	CloseAtDisconnect() error
}

// CloseAtDisconnect closes f for a client that disconnected without
// closing it.
func CloseAtDisconnect(f File) error {
	if dc, ok := f.(DisconnectCloser); ok {
		return dc.CloseAtDisconnect()
	}
	return f.Close()
}
