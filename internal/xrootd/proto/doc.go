// Package proto is the XRootD protocol version 5 wire format: request and
// response headers, the bodies of the requests hepcache serves and sends, and
// the response bodies, encoded into caller buffers (AppendX(dst, ...) []byte)
// and decoded without retaining the input. It holds no I/O and no state, so
// both the server front end and the origin client build on it.
package proto
