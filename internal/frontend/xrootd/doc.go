// Package xrootd is hepcache's root:// front end: an XRootD protocol 5
// data server over a backend.Backend. It speaks what real clients send
// (handshake, kXR_protocol, login, open, read, pgread, readv, stat,
// dirlist, query, locate, ...) and holds no cache logic.
//
// # Design
//
// One connection has one reader goroutine. It reads a request header and
// body, handles the session-level requests (protocol, login, auth,
// endsess) itself, in order, and starts a goroutine for every other
// request, at most Config.MaxInFlight at a time: clients pipeline many
// reads on one connection (xrdcp keeps several chunks in flight, ROOT
// issues readv while reads are pending), and a slow request (a cache miss
// waiting for the origin) must not hold up the others. When the limit is
// reached the reader stops reading, which pushes back on the client
// through TCP instead of growing memory.
//
// Responses of concurrent requests share one respWriter, which writes
// every response message whole under a mutex. Large answers are split into
// messages of at most Config.MaxMessage bytes (kXR_oksofar parts for read
// and readv, kXR_status parts for pgread), so the writer is never held for
// long. Data comes from backend.File.Stream and is written while Stream
// holds the chunk: the bytes reach the client as soon as the backend has
// them (stream-through), and a message is sent with writev straight from
// the backend's buffer. pgread adds one CRC32C per 4 KiB page as separate
// iovec entries, so it copies nothing either; only a page split across two
// Stream chunks is copied into a 4 KiB carry buffer. Per client this keeps
// the memory at the pooled per-request state plus whatever buffers the
// backend uses.
//
// # Seams
//
// Security and clustering slot in without a rewrite: Config.TLS switches a
// connection to TLS after kXR_protocol (conn.startTLS); an Authenticator
// answers the security parameters at login and checks kXR_auth (ztn
// tokens); an Authorizer is asked before every path operation with the
// parsed backend.Request and the client's Identity; a backend that wants a
// client elsewhere returns backend.RedirectError (kXR_redirect) or
// backend.WaitError (kXR_wait), and kXR_locate names the node a
// RedirectError points to. A backend.File may offer
// ReadV(ctx, []origin.Segment) to serve kXR_readv in one call.
//
// # Paths
//
// A path whose first component is a URL ("/root://site:1094//store/f",
// what the XrdClProxyPlugin sends) names the origin in forwarding mode;
// the front end only parses it (backend.Request.Origin) and the backend
// decides whether forwarding there is allowed. Opaque data after '?' goes
// to Request.Opaque. See docs/xrootd-frontend.md for the protocol details
// learnt from the real clients.
package xrootd
