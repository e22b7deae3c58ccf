// Package xrootd is an origin.Origin over root:// (XRootD protocol v5),
// built on internal/xrootd/client: multiplexed, pipelined reads over a small
// pool of connections per server, kXR_readv for vector reads, and
// kXR_redirect/kXR_wait followed transparently. Server error codes map to
// the origin sentinels (kXR_NotFound -> origin.ErrNotFound, ...).
package xrootd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/hepcache/hepcache/internal/auth/gsi"
	"github.com/hepcache/hepcache/internal/xrootd/client"
	"github.com/hepcache/hepcache/internal/xrootd/proto"
	"github.com/hepcache/hepcache/origin"
)

// Config configures an Origin.
type Config struct {
	// URL names the server: "root://host[:port]" (port 1094 by default;
	// "xroot://" is accepted). A path part is ignored. Required.
	URL string
	// ConnsPerHost is the number of TCP connections per server, see
	// client.Config. Zero means the client's default.
	ConnsPerHost int
	// Username is the login name (at most 8 bytes). Default "hepcache".
	Username string
	// Timeout bounds Stat, Open, List and Checksum when ctx has no
	// deadline. Reads rely on the client's stall detection instead, which
	// needs no timer per request. Default 60s.
	Timeout time.Duration
	// StallTimeout is the client's StallTimeout (zero: its default).
	StallTimeout time.Duration
	// TLS verifies roots:// servers (the CAs) and may carry the cache's
	// client certificate. Nil: the system roots. root:// URLs ignore it.
	TLS *tls.Config
	// Token returns the cache's own bearer token, sent with ztn (over
	// roots:// only) when the server asks for authentication. Nil: none.
	Token func() (string, error)
	// GSI is the cache's proxy for servers asking for gsi (root:// and
	// roots://). Nil: such servers are refused.
	GSI *gsi.ClientConfig
}

const defaultTimeout = 60 * time.Second

// Origin is one root:// server. It is safe for concurrent use.
type Origin struct {
	url     string // "root://host:port"
	addr    string // "host:port"
	timeout time.Duration
	c       *client.Client
}

var _ origin.Origin = (*Origin)(nil)

// New returns an Origin for cfg.URL. It does not connect: the first call
// does.
func New(cfg *Config) (*Origin, error) {
	addr, secure, err := parseURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	ccfg := client.DefaultConfig()
	scheme := "root"
	if secure {
		scheme = "roots"
		ccfg.TLS = cfg.TLS
		if ccfg.TLS == nil {
			ccfg.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
		}
	}
	ccfg.Token, ccfg.GSI = cfg.Token, cfg.GSI
	if cfg.ConnsPerHost != 0 {
		ccfg.ConnsPerHost = cfg.ConnsPerHost
	}
	if cfg.Username != "" {
		ccfg.Username = cfg.Username
	}
	if cfg.StallTimeout != 0 {
		ccfg.StallTimeout = cfg.StallTimeout
	}
	c, err := client.New(ccfg)
	if err != nil {
		return nil, fmt.Errorf("root origin %s: %w", cfg.URL, err)
	}
	t := cfg.Timeout
	if t == 0 {
		t = defaultTimeout
	}
	return &Origin{url: scheme + "://" + addr, addr: addr, timeout: t, c: c}, nil
}

// Dial returns an Origin for url with default settings; it has the shape
// of upstream.DialFunc.
func Dial(_ context.Context, url string) (origin.Origin, error) {
	return New(&Config{URL: url})
}

// parseURL returns host:port and whether the URL asks for TLS (roots://).
func parseURL(raw string) (string, bool, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", false, fmt.Errorf("root origin %q: %w: %w", raw, err, origin.ErrInvalid)
	}
	secure := u.Scheme == "roots" || u.Scheme == "xroots"
	if u.Scheme != "root" && u.Scheme != "xroot" && !secure {
		return "", false, fmt.Errorf("root origin %q: scheme must be root://, roots://, xroot:// or xroots://: %w", raw, origin.ErrInvalid)
	}
	if u.Hostname() == "" {
		return "", false, fmt.Errorf("root origin %q: no host: %w", raw, origin.ErrInvalid)
	}
	port := u.Port()
	if port == "" {
		port = "1094"
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port), secure, nil
}

// String implements origin.Origin: "root://host:port".
func (o *Origin) String() string { return o.url }

// Close implements origin.Origin: it closes the connections.
func (o *Origin) Close() error { return o.c.Close() }

func (o *Origin) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, o.timeout)
}

// Stat implements origin.Origin.
func (o *Origin) Stat(ctx context.Context, p string) (origin.FileInfo, error) {
	ctx, cancel := o.withTimeout(ctx)
	defer cancel()
	st, err := o.c.Stat(ctx, o.addr, p)
	if err != nil {
		return origin.FileInfo{}, classify(err)
	}
	return fileInfo(p, st), nil
}

// Open implements origin.Origin.
func (o *Origin) Open(ctx context.Context, p string) (origin.File, error) {
	ctx, cancel := o.withTimeout(ctx)
	defer cancel()
	f, err := o.c.Open(ctx, o.addr, p)
	if err != nil {
		return nil, classify(err)
	}
	return &file{f: f, info: fileInfo(p, f.Info())}, nil
}

// List implements origin.Origin.
func (o *Origin) List(ctx context.Context, p string, withStat bool) ([]origin.FileInfo, error) {
	ctx, cancel := o.withTimeout(ctx)
	defer cancel()
	ents, err := o.c.Dirlist(ctx, o.addr, p, withStat)
	if err != nil {
		return nil, classify(err)
	}
	out := make([]origin.FileInfo, len(ents))
	for i, e := range ents {
		if e.HasStat {
			out[i] = fileInfo(e.Name, e.Stat)
		} else {
			out[i] = origin.FileInfo{Name: e.Name}
		}
	}
	return out, nil
}

// Checksum implements origin.Origin. algo "adler32", "crc32c" and "md5"
// (any case) are asked for by name; other names are passed on and the
// server decides. The value is lower-case hex, 8 digits for adler32 and
// crc32c.
func (o *Origin) Checksum(ctx context.Context, p, algo string) (string, error) {
	ctx, cancel := o.withTimeout(ctx)
	defer cancel()
	name := strings.ToLower(algo)
	if name == "" || strings.ContainsAny(name, "&?= \n") {
		return "", fmt.Errorf("checksum %s/%s: algorithm %q: %w", o.url, p, algo, origin.ErrInvalid)
	}
	_, v, err := o.c.QueryChecksum(ctx, o.addr, p, name)
	if err != nil {
		var pe *proto.Error
		if errors.As(err, &pe) && (pe.Code == proto.ErrUnsupported ||
			(pe.Code == proto.ErrServerError && strings.Contains(pe.Message, "not supported"))) {
			return "", &classified{err: err, kind: origin.ErrUnsupported}
		}
		if errors.Is(err, client.ErrOtherAlgorithm) {
			return "", &classified{err: err, kind: origin.ErrUnsupported}
		}
		return "", classify(err)
	}
	v = strings.ToLower(strings.TrimPrefix(strings.TrimPrefix(v, "0x"), "0X"))
	if (name == "adler32" || name == "crc32c") && len(v) < 8 {
		v = strings.Repeat("0", 8-len(v)) + v
	}
	return v, nil
}

// file is an open root:// file.
type file struct {
	f    *client.File
	info origin.FileInfo
}

// Info implements origin.File.
func (f *file) Info() origin.FileInfo { return f.info }

// ReadAt implements origin.File.
func (f *file) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	n, err := f.f.ReadAt(ctx, p, off)
	if err != nil && err != io.EOF {
		return n, classify(err)
	}
	return n, err
}

var _ origin.ProgressReader = (*file)(nil)

// ReadAtProgress implements origin.ProgressReader.
func (f *file) ReadAtProgress(ctx context.Context, p []byte, off int64, progress func(int)) (int, error) {
	n, err := f.f.ReadAtProgress(ctx, p, off, progress)
	if err != nil && err != io.EOF {
		return n, classify(err)
	}
	return n, err
}

// ReadV implements origin.File with kXR_readv; segments must lie within
// the file.
func (f *file) ReadV(ctx context.Context, segs []origin.Segment) error {
	for _, s := range segs {
		if s.Offset < 0 || s.Offset+int64(len(s.Buf)) > f.info.Size {
			return fmt.Errorf("readv root://%s/%s: segment %d@%d outside the file (size %d): %w: %w",
				f.f.Addr(), f.f.Path(), len(s.Buf), s.Offset, f.info.Size, origin.ErrInvalid, io.ErrUnexpectedEOF)
		}
	}
	if err := f.f.ReadV(ctx, segs); err != nil {
		return classify(err)
	}
	return nil
}

// Close implements origin.File.
func (f *file) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), defaultTimeout)
	defer cancel()
	if err := f.f.Close(ctx); err != nil {
		// The handle is gone with its connection either way.
		if errors.Is(err, origin.ErrUnavailable) {
			return nil
		}
		return classify(err)
	}
	return nil
}

// fileInfo converts XRootD stat information.
func fileInfo(name string, st proto.StatInfo) origin.FileInfo {
	var mode fs.FileMode
	if st.Extended {
		mode = fs.FileMode(st.Mode & 0o777)
	} else {
		if st.Flags&proto.StatReadable != 0 {
			mode |= 0o444
		}
		if st.Flags&proto.StatWritable != 0 {
			mode |= 0o200
		}
		if st.Flags&proto.StatXset != 0 {
			mode |= 0o111
		}
	}
	switch {
	case st.Flags&proto.StatIsDir != 0:
		mode |= fs.ModeDir
	case st.Flags&proto.StatOther != 0:
		mode |= fs.ModeIrregular
	}
	if name != "" && !strings.HasPrefix(name, "/") {
		name = path.Base(name)
	}
	return origin.FileInfo{
		Name:    name,
		Size:    st.Size,
		ModTime: time.Unix(st.MTime, 0),
		Mode:    mode,
		Offline: st.Flags&proto.StatOffline != 0,
	}
}

// classified is an error whose message is the client's (operation, URL,
// server message) and which also matches an origin sentinel.
type classified struct {
	err  error
	kind error
}

func (e *classified) Error() string   { return e.err.Error() }
func (e *classified) Unwrap() []error { return []error{e.err, e.kind} }

// classify marks err with the origin sentinel its cause maps to.
func classify(err error) error {
	for _, s := range []error{origin.ErrNotFound, origin.ErrNotAuthorized, origin.ErrIsDir,
		origin.ErrUnavailable, origin.ErrUnsupported, origin.ErrInvalid} {
		if errors.Is(err, s) {
			return err
		}
	}
	var pe *proto.Error
	switch {
	case errors.As(err, &pe):
		return &classified{err: err, kind: codeKind(pe.Code)}
	case errors.Is(err, context.DeadlineExceeded):
		return &classified{err: fmt.Errorf("origin timeout: %w", err), kind: origin.ErrUnavailable}
	case errors.Is(err, context.Canceled):
		return err // the caller gave up; nothing is wrong with the origin
	case errors.Is(err, client.ErrFileChanged):
		return fmt.Errorf("%w: %w", err, origin.ErrChanged)
	}
	// Redirect and wait limits, malformed answers: the origin is not usable
	// now.
	return &classified{err: err, kind: origin.ErrUnavailable}
}

// codeKind maps an XRootD error code to an origin sentinel.
func codeKind(c proto.ErrorCode) error {
	switch c {
	case proto.ErrNotFound, proto.ErrNoReplicas:
		return origin.ErrNotFound
	case proto.ErrNotAuthorized, proto.ErrAuthFailed, proto.ErrTLSRequired, proto.ErrSigVerErr:
		return origin.ErrNotAuthorized
	case proto.ErrIsDirectory:
		return origin.ErrIsDir
	case proto.ErrArgInvalid, proto.ErrArgMissing, proto.ErrArgTooLong, proto.ErrInvalidRequest,
		proto.ErrNotFile, proto.ErrBadPayload, proto.ErrFSReadOnly, proto.ErrItExists:
		return origin.ErrInvalid
	case proto.ErrUnsupported:
		return origin.ErrUnsupported
	}
	// IOError, FSError, ServerError, NoMemory, Overloaded, noserver,
	// ReqTimedOut, FileNotOpen...: may work later or elsewhere.
	return origin.ErrUnavailable
}
