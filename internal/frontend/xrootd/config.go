package xrootd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os/user"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/connlimit"
	"github.com/hepcache/hepcache/internal/metrics"
)

// Defaults. A zero Config field means "use the default".
const (
	// defaultMaxInFlight bounds the requests one connection has in progress:
	// xrdcp keeps 4-8 reads in flight, ROOT's TTreeCache a few readv.
	defaultMaxInFlight = 64
	// defaultMaxMessage is the most data bytes in one response message, so
	// that one big read does not hold the connection for long while other
	// responses wait. XRootD's own unit is 2 MiB.
	defaultMaxMessage = 1 << 20
	// defaultMaxRequestBody bounds a request's data (paths with opaque and
	// tokens, readv lists of at most 16 KiB). Write payloads are discarded
	// as they arrive and are not bounded by it.
	defaultMaxRequestBody = 64 << 10
	// defaultMaxPathLength is PATH_MAX.
	defaultMaxPathLength = 4096
	// defaultMaxReadVSegments is XrdProto::maxRvecsz (readv_iov_max).
	defaultMaxReadVSegments = 1024
	// defaultMaxReadVSegmentSize is XRootD's readv_ior_max: its 2 MiB
	// transfer buffer less one 16-byte segment header.
	defaultMaxReadVSegmentSize = 2<<20 - 16
	// defaultMaxOpenFiles bounds the handles one connection holds.
	defaultMaxOpenFiles = 4096
	// defaultHandshakeTimeout bounds the time from accept to a completed
	// login, so that silent connections do not tie up the server.
	defaultHandshakeTimeout = 30 * time.Second
	// defaultRequestTimeout bounds reading one request body once its header
	// arrived, and writing one response message.
	defaultRequestTimeout = 2 * time.Minute
	// defaultIdleTimeout closes a connection that has no open file and sent
	// nothing for this long (XrdCl reconnects transparently).
	defaultIdleTimeout = 30 * time.Minute
	// defaultChecksumWait is how long a checksum query may take before the
	// client gets kXR_waitresp and the answer later (kXR_attn/asynresp).
	defaultChecksumWait = time.Second
	// defaultChecksumAlgorithm is what XRootD sites use (xrootd.chksum).
	defaultChecksumAlgorithm = "adler32"
)

// Config configures a Server. Use DefaultConfig and change what you need.
type Config struct {
	// Backend serves the files. Required.
	Backend backend.Backend
	// Logger receives connection and error events. Default: discard.
	Logger *slog.Logger

	// Metrics receives a count per request (protocol "root" or "roots",
	// the operation, its outcome) and the connected clients, from login to
	// disconnect. Default nil: none.
	Metrics *metrics.Registry

	// Stager stages whole files for kXR_prepare (and answers query
	// prepare). Default nil: kXR_prepare is refused as unsupported.
	Stager backend.Stager

	// Authorizer is called before every operation on a path (see Op).
	// Default nil: everything is allowed (the backend still applies its own
	// policy, such as the forwarding allow-list).
	Authorizer Authorizer
	// Authenticator demands and checks credentials after kXR_login (the
	// security layer: ztn tokens, gsi). Default nil: no authentication, as
	// XRootD without a sec.protocol.
	Authenticator Authenticator
	// TLS enables TLS: the server announces kXR_haveTLS and switches a
	// connection to TLS after kXR_protocol when the client asks for it
	// (roots://, kXR_wantTLS). Default nil: no TLS.
	TLS *tls.Config
	// RequireTLS refuses kXR_login on a connection that is not TLS
	// (kXR_TLSRequired), and asks TLS-capable clients to upgrade. Needs TLS.
	// Default false.
	RequireTLS bool

	// MaxInFlight bounds the requests in progress on one connection; the
	// connection stops reading requests until one finishes. Default 64.
	// More allows deeper pipelining at the expense of memory per client.
	MaxInFlight int
	// MaxMessage is the most data bytes in one response message (a read or
	// pgread part, a readv part). Default 1 MiB. Smaller interleaves the
	// responses of one connection more finely at the expense of more
	// messages and system calls.
	MaxMessage int
	// MaxRequestBody bounds the data of a request other than a write, in
	// bytes; longer requests get kXR_ArgTooLong. Default 64 KiB.
	MaxRequestBody int
	// MaxPathLength bounds a path (without opaque data), in bytes; longer
	// paths get kXR_ArgTooLong. Default 4096.
	MaxPathLength int
	// MaxReadVSegments bounds the segments of one kXR_readv (readv_iov_max).
	// Default 1024, the protocol's limit.
	MaxReadVSegments int
	// MaxReadVSegmentSize bounds one readv segment, in bytes
	// (readv_ior_max). Default 2097136, as XRootD. Larger segments cost a
	// buffer of that size per request in flight.
	MaxReadVSegmentSize int
	// MaxOpenFiles bounds the files one connection has open. Default 4096.
	MaxOpenFiles int
	// MaxConnections bounds concurrent client connections when Limits is
	// nil. A connection over it is served until its login, then each of
	// its requests is told to come back (kXR_wait, "server busy") until a
	// place is free; beyond a small waiting room it is closed at once.
	// Default 0: no limit.
	MaxConnections int
	// Limits, if set, are the bounds this front end shares with others
	// (every client connection of the process against one descriptor
	// budget); MaxConnections is then not used. Default nil.
	Limits *connlimit.Limits
	// MaxConnectionsPerClient bounds the connections one client (an IPv4
	// address, an IPv6 prefix: connlimit.Key) holds at once; further ones
	// are told "server busy" (kXR_wait) as over MaxConnections. Default 0:
	// 1024; negative: no bound. A site whose worker nodes reach the cache
	// through one NAT address raises it.
	MaxConnectionsPerClient int

	// HandshakeTimeout bounds the time from accept to a completed login.
	// Default 30 s.
	HandshakeTimeout time.Duration
	// RequestTimeout bounds reading one request body and writing one
	// response message (a stuck or very slow client). Default 2 min.
	RequestTimeout time.Duration
	// IdleTimeout closes a connection without open files that sent no
	// request for this long. Default 30 min.
	IdleTimeout time.Duration
	// ChecksumWait is how long a checksum query may run before the client
	// is told to wait (kXR_waitresp) and gets the answer asynchronously.
	// Default 1 s.
	ChecksumWait time.Duration
	// ChecksumAlgorithms are the algorithms offered (query config chksum);
	// the first is the default for a checksum query without cks.type.
	// Default ["adler32"].
	ChecksumAlgorithms []string

	// SiteName answers "query config sitename". Default "" (answers
	// "sitename", as XRootD without all.sitename).
	SiteName string
	// AdvertiseHost is the host name given to clients that ask kXR_locate
	// for names (kXR_prefname). Default "": the address the client
	// connected to.
	AdvertiseHost string
	// Owner and Group are the names in extended stat answers (xrdfs ls -l).
	// Default: the user and group running the server.
	Owner, Group string
	// Version answers "query config version". Default "hepcache".
	Version string
	// Manager announces the server as a manager (kXR_isManager), as a
	// cluster node that redirects is: XrdCl then comes back to it with
	// tried=<host> after failing at the node it was sent to, instead of
	// retrying that node. Default false (a data server).
	Manager bool
}

// DefaultConfig returns a Config with every field set to its default except
// Backend, which the caller must set.
func DefaultConfig() *Config {
	c := &Config{}
	c.EnsureDefaults()
	return c
}

// EnsureDefaults fills every zero field with its default.
// DefaultMaxConnectionsPerClient is the default bound on the connections
// of one client address (root:// and HTTP): far above what one host's jobs
// open (XrdCl keeps one connection per server and process), far below a
// server's descriptors.
const DefaultMaxConnectionsPerClient = 1024

func (c *Config) EnsureDefaults() {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = defaultMaxInFlight
	}
	if c.MaxConnectionsPerClient == 0 {
		c.MaxConnectionsPerClient = DefaultMaxConnectionsPerClient
	}
	if c.MaxMessage == 0 {
		c.MaxMessage = defaultMaxMessage
	}
	if c.MaxRequestBody == 0 {
		c.MaxRequestBody = defaultMaxRequestBody
	}
	if c.MaxPathLength == 0 {
		c.MaxPathLength = defaultMaxPathLength
	}
	if c.MaxReadVSegments == 0 {
		c.MaxReadVSegments = defaultMaxReadVSegments
	}
	if c.MaxReadVSegmentSize == 0 {
		c.MaxReadVSegmentSize = defaultMaxReadVSegmentSize
	}
	if c.MaxOpenFiles == 0 {
		c.MaxOpenFiles = defaultMaxOpenFiles
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = defaultHandshakeTimeout
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = defaultRequestTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = defaultIdleTimeout
	}
	if c.ChecksumWait == 0 {
		c.ChecksumWait = defaultChecksumWait
	}
	if len(c.ChecksumAlgorithms) == 0 {
		c.ChecksumAlgorithms = []string{defaultChecksumAlgorithm}
	}
	if c.Owner == "" || c.Group == "" {
		owner, group := processOwner()
		if c.Owner == "" {
			c.Owner = owner
		}
		if c.Group == "" {
			c.Group = group
		}
	}
	if c.Version == "" {
		c.Version = "hepcache"
	}
}

// processOwner returns the names of the user and group running the server.
func processOwner() (owner, group string) {
	owner, group = "hepcache", "hepcache"
	u, err := user.Current()
	if err != nil {
		return owner, group
	}
	owner = u.Username
	if g, err := user.LookupGroupId(u.Gid); err == nil {
		group = g.Name
	}
	return owner, group
}

// Validate reports every problem of the configuration in one error.
func (c *Config) Validate() error {
	var errs []error
	if c.Backend == nil {
		errs = append(errs, errors.New("Backend is required"))
	}
	if c.RequireTLS && c.TLS == nil {
		errs = append(errs, errors.New("RequireTLS needs TLS"))
	}
	positive := []struct {
		name string
		v    int64
	}{
		{"MaxInFlight", int64(c.MaxInFlight)},
		{"MaxMessage", int64(c.MaxMessage)},
		{"MaxRequestBody", int64(c.MaxRequestBody)},
		{"MaxPathLength", int64(c.MaxPathLength)},
		{"MaxReadVSegments", int64(c.MaxReadVSegments)},
		{"MaxReadVSegmentSize", int64(c.MaxReadVSegmentSize)},
		{"MaxOpenFiles", int64(c.MaxOpenFiles)},
		{"HandshakeTimeout", int64(c.HandshakeTimeout)},
		{"RequestTimeout", int64(c.RequestTimeout)},
		{"IdleTimeout", int64(c.IdleTimeout)},
		{"ChecksumWait", int64(c.ChecksumWait)},
	}
	for _, p := range positive {
		if p.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %d", p.name, p.v))
		}
	}
	if c.MaxConnections < 0 {
		errs = append(errs, fmt.Errorf("MaxConnections must not be negative, got %d", c.MaxConnections))
	}
	if c.MaxMessage > 0 && c.MaxMessage < 2*pageSize {
		errs = append(errs, fmt.Errorf("MaxMessage must be at least %d, got %d", 2*pageSize, c.MaxMessage))
	}
	if c.MaxReadVSegments > maxReadVSegs {
		errs = append(errs, fmt.Errorf("MaxReadVSegments must be at most %d (the protocol's limit), got %d", maxReadVSegs, c.MaxReadVSegments))
	}
	if c.MaxRequestBody > 0 && c.MaxRequestBody < maxReadVSegs*16 {
		errs = append(errs, fmt.Errorf("MaxRequestBody must be at least %d (a full readv list), got %d", maxReadVSegs*16, c.MaxRequestBody))
	}
	if len(errs) > 0 {
		return fmt.Errorf("xrootd front end config: %w", errors.Join(errs...))
	}
	return nil
}

// Op names the operation an Authorizer is asked about.
type Op string

// Operations on paths.
const (
	OpOpen     Op = "open"     // open for reading
	OpStat     Op = "stat"     // stat of a path
	OpList     Op = "list"     // directory listing
	OpChecksum Op = "checksum" // checksum query
	OpLocate   Op = "locate"   // locate
	// OpRead: a read (kXR_read, kXR_pgread, kXR_readv) of a file opened
	// before, asked about only once the authorization of its open has
	// ended (backend.Request.AuthUntil); the request is the open's.
	OpRead Op = "read"
)

// Authorizer decides whether a client may perform an operation. It is
// called before each path operation, after the path is parsed; the client's
// Identity is in ctx (IdentityFrom). Implementations must be safe for
// concurrent use and should return an error wrapping backend.ErrForbidden
// with the reason, which the client sees as kXR_NotAuthorized.
type Authorizer interface {
	Authorize(ctx context.Context, op Op, req backend.Request) error
}

// RequestAuthorizer is an Authorizer that may also adjust the request it
// allows, e.g. set backend.Request.NoFetch for a client that may read only
// what is cached, or User. When the Config's Authorizer implements it,
// AuthorizeRequest is called instead of Authorize.
type RequestAuthorizer interface {
	Authorizer
	AuthorizeRequest(ctx context.Context, op Op, req *backend.Request) error
}

// AuthorizerFunc adapts a function to Authorizer.
type AuthorizerFunc func(ctx context.Context, op Op, req backend.Request) error

// Authorize calls f(ctx, op, req).
func (f AuthorizerFunc) Authorize(ctx context.Context, op Op, req backend.Request) error {
	return f(ctx, op, req)
}

// ConnInfo describes a client connection to the security layer.
type ConnInfo struct {
	Remote, Local net.Addr
	// TLS is the TLS state once the connection uses TLS, else nil.
	TLS *tls.ConnectionState
	// LoginName is the user name the client gave in kXR_login.
	LoginName string
	// AuthState is the connection's slot for the Authenticator's state
	// between the steps of a multi-step handshake (kXR_authmore). It
	// starts nil at each login and lives as long as the connection.
	AuthState *any
}

// Identity is who a client is, as established by the Authenticator (or the
// login name when there is none).
type Identity struct {
	// Name is the user name for logs and backend.Request.User.
	Name string
	// Authenticated is set when an Authenticator verified the identity.
	Authenticated bool
	// Protocol is the security protocol used ("ztn", "gsi"), or "".
	Protocol string
	// Attrs carries what the Authenticator learnt (token claims, VOMS
	// attributes) for the Authorizer.
	Attrs any
	// Refused says, per protocol ("ztn: token ... expired"), why the
	// credentials the client presented before this identity's were
	// refused: XrdCl falls back to the next protocol (unix) and would
	// otherwise be denied as anonymous without the reason.
	Refused []string
}

type identityKey struct{}

// IdentityFrom returns the identity of the client whose request ctx
// belongs to, or nil.
func IdentityFrom(ctx context.Context) *Identity {
	id, _ := ctx.Value(identityKey{}).(*Identity)
	return id
}

// Authenticator is the security layer of kXR_login and kXR_auth. Methods
// are called from the connection's reader goroutine, one at a time per
// connection, but concurrently across connections.
type Authenticator interface {
	// Params returns the security parameters sent with the login answer
	// (XRootD's "&P=ztn,..." text), or "" when the connection needs no
	// authentication.
	Params(c ConnInfo) string
	// Authenticate checks one kXR_auth step with credentials of credType
	// ("ztn", "gsi"; the NUL padding removed). It returns the identity when
	// done, or more != nil to send kXR_authmore with those bytes and expect
	// another step. cred is only valid during the call. An error is sent as
	// kXR_AuthFailed with its text.
	Authenticate(ctx context.Context, c ConnInfo, credType string, cred []byte) (id *Identity, more []byte, err error)
}
