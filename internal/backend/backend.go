// Package backend is the seam between the protocol front ends (root://, HTTP)
// and what serves the files (the cache, or a plain directory in tests).
//
// Front ends translate protocol requests into calls on Backend and map its
// errors back to protocol codes; they hold no cache logic. The cache, the
// cluster layer and the authorizer all sit behind this one small interface.
package backend

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hepcache/hepcache/origin"
)

// Request identifies what a client asks for and who asks.
type Request struct {
	// Origin is the upstream URL named by the client in forwarding mode
	// ("root://site.example:1094"), or "" for the configured default origin.
	Origin string
	// Path is the cleaned absolute logical path, without opaque data.
	Path string
	// Opaque is the CGI after '?' as the client sent it, kept for forwarding.
	Opaque string
	// Client is the client's address ("ip:port").
	Client string
	// User is the authenticated identity, or the login name if anonymous.
	User string
	// Protocol is "root", "roots", "http" or "https".
	Protocol string
	// ClientPID and ClientLogin are what a root:// client said at login:
	// its process id and login CGI ("xrd.appname=xrdcp&xrd.rn=v5.5.3&...");
	// the monitoring f-stream names the client's session with them.
	ClientPID   int
	ClientLogin string
	// Auth is the security protocol that authenticated User on root://
	// ("ztn", "gsi"), "" if none.
	Auth string
	// VO, Role and Group are what User's credential says (the first VOMS
	// attribute's VO and its first FQAN's role and group; a token's first
	// wlcg.groups group and its VO); "" when it says nothing. Set by the
	// authorizer, for the monitoring f-stream's user records.
	VO, Role, Group string
	// NoFetch forbids contacting the origin for file data on this
	// request's behalf: the client may read what the cache already holds
	// (and join a download another client started) but not start one. The
	// authorizer sets it for clients that may read but not trigger a
	// download; a read that would need one fails with an error wrapping
	// ErrForbidden. Metadata (stat, list, checksum) is not affected.
	NoFetch bool
	// AuthUntil is when the authorization of this request ends: the
	// earliest expiry (clock skew added) of the credentials it rested on
	// (token, proxy chain, VOMS attributes); zero when it rested on none.
	// Set by the authorizer. The root:// front end keeps it with a file
	// opened by the request and asks the authorizer again (OpRead) about
	// reads of the file past it.
	AuthUntil time.Time
	// FollowsFileRedirect says the client can follow a redirect to a local
	// file (a RedirectError whose URL is file://localhost/...): XrdCl can,
	// HTTP clients cannot. The root:// front end sets it; the cache then
	// may send the client to a complete file in a cache space the client
	// mounts (seed 000's local redirect) instead of serving it.
	FollowsFileRedirect bool
	// OriginToken is a bearer token of the client that the authorizer
	// lets go on to the origin with this request's origin calls
	// (origin.WithClientToken), for federations whose origins authorize
	// each reader (Pelican). Empty: origins see the cache's own credential
	// only. Never logged.
	OriginToken string
}

// EachLister is a Backend whose listings can be handed over in parts, as
// they arrive from the origin (origin.ListEacher): a front end sends the
// entries as they come instead of holding the whole directory.
type EachLister interface {
	// ListEach calls fn with each entry of the directory req names, as
	// List would return them; it returns fn's first error, or the
	// listing's (after which the entries handed over are not all).
	ListEach(ctx context.Context, req Request, withStat bool, fn func(origin.FileInfo) error) error
}

// ListEach lists with b's ListEach, or with List when b has none.
func ListEach(ctx context.Context, b Backend, req Request, withStat bool, fn func(origin.FileInfo) error) error {
	if le, ok := b.(EachLister); ok {
		return le.ListEach(ctx, req, withStat, fn)
	}
	list, err := b.List(ctx, req, withStat)
	return origin.Each(list, err, fn)
}

// String renders the request for error messages.
func (r Request) String() string {
	if r.Origin != "" {
		return r.Origin + "/" + r.Path
	}
	return r.Path
}

// Backend serves files to the front ends. Implementations are safe for
// concurrent use; every method blocks until it has an answer or ctx ends.
type Backend interface {
	// Open opens a file for reading. The caller must Close the File.
	Open(ctx context.Context, req Request) (File, error)
	// Stat returns the metadata of a file or directory.
	Stat(ctx context.Context, req Request) (origin.FileInfo, error)
	// List returns the entries of a directory (withStat fills sizes and times).
	List(ctx context.Context, req Request, withStat bool) ([]origin.FileInfo, error)
	// Checksum returns the file's checksum with algorithm algo as lower-case
	// hex (adler32 as 8 hex digits).
	Checksum(ctx context.Context, req Request, algo string) (string, error)
}

// File is an open file. Methods are safe for concurrent use (a client may
// have several reads of one handle in flight).
type File interface {
	// Info returns the file's metadata as of open.
	Info() origin.FileInfo
	// ReadAt fills p with the bytes at off. It returns len(p) bytes or an
	// error; at end of file it returns the bytes up to the end and io.EOF.
	// The caller owns p.
	ReadAt(ctx context.Context, p []byte, off int64) (int, error)
	// Stream delivers the bytes [off, off+n) to fn in order, in chunks, each
	// as soon as it is available (stream-through: a client need not wait for
	// a whole block to arrive). The slice passed to fn is only valid during
	// the call. It returns the number of bytes delivered, fewer than n only
	// at end of file (with a nil error) or on error.
	Stream(ctx context.Context, off int64, n int64, fn func(p []byte) error) (int64, error)
	// Close ends the access. It is safe to call once; later calls return nil.
	Close() error
}

// Sentinel errors. Front ends map them to protocol codes with errors.Is;
// origin sentinels (origin.ErrNotFound, ...) are mapped the same way.
var (
	// ErrForbidden: policy denies the request (forwarding allow-list,
	// namespace rule, authorization). It is origin.ErrNotAllowed, so that
	// origin resolvers can refuse without importing this package.
	ErrForbidden = origin.ErrNotAllowed
	// ErrBusy: too many requests; the client should retry later.
	ErrBusy = errors.New("server busy")
	// ErrOverloaded: the server sheds the request rather than queue it
	// (its capacity for fetches is exhausted beyond a bound): the client
	// should go to another server, or come back after a while. Front ends
	// answer HTTP 429 with Retry-After (a Pelican client then tries the
	// next cache the director listed), root:// kXR_wait. It wraps ErrBusy;
	// an error wrapping it may carry a *WaitError with the wait.
	ErrOverloaded = fmt.Errorf("overloaded: %w", ErrBusy)
	// ErrInvalidPath: the path is malformed or escapes the namespace
	// (origin.ErrBadName).
	ErrInvalidPath = origin.ErrBadName
)

// RedirectError asks the front end to send the client elsewhere: kXR_redirect
// for root://, 307 for HTTP. It carries the target so the cluster layer can
// point a client at the node that owns a file, or at a local file.
type RedirectError struct {
	// URL is the full target ("root://host:port//path?opaque" or
	// "file://localhost/local/path", which XrdCl opens itself). Host and
	// Port are set for root:// targets.
	URL  string
	Host string
	Port int
}

func (e *RedirectError) Error() string { return fmt.Sprintf("redirect to %s", e.URL) }

// WaitError asks the client to retry after Seconds (kXR_wait, HTTP 503 with
// Retry-After; 429 when Err is ErrOverloaded).
type WaitError struct {
	Seconds int
	Reason  string
	// Err is the class of the wait for errors.Is (ErrOverloaded), or nil.
	Err error
}

// Unwrap returns Err.
func (e *WaitError) Unwrap() error { return e.Err }

func (e *WaitError) Error() string {
	return fmt.Sprintf("retry in %ds: %s", e.Seconds, e.Reason)
}

// VectorRead is one client's vector read (kXR_readv) that a front end
// answers in parts, calling the Files' ReadV once per part (and file):
// decorators that count requests (the monitoring f-stream) add up the
// parts in their own Tally and count one request at the Last part. A
// request is served by one goroutine: no locking.
type VectorRead struct {
	// Last marks the request's final part.
	Last    bool
	tallies map[any]*Tally
}

// Tally is what one decorator (key) has counted of a vector read so far.
type Tally struct {
	Bytes    int64
	Segments int
}

// Tally returns key's running count of the request.
func (vr *VectorRead) Tally(key any) *Tally {
	if vr.tallies == nil {
		vr.tallies = map[any]*Tally{}
	}
	t := vr.tallies[key]
	if t == nil {
		t = &Tally{}
		vr.tallies[key] = t
	}
	return t
}

type vectorReadKey struct{}

// WithVectorRead returns ctx carrying vr, for the ReadV calls of one part.
func WithVectorRead(ctx context.Context, vr *VectorRead) context.Context {
	return context.WithValue(ctx, vectorReadKey{}, vr)
}

// VectorReadOf returns the vector read ctx carries, or nil (a ReadV that is
// a whole request).
func VectorReadOf(ctx context.Context) *VectorRead {
	vr, _ := ctx.Value(vectorReadKey{}).(*VectorRead)
	return vr
}
