package xrootd

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/hepcache/hepcache/internal/xrootd/proto"
)

// defaultOriginPort is XRootD's port, assumed when a forwarded URL has none.
const defaultOriginPort = 1094

// codedError is an error the front end detects itself (a bad path, a read
// past the end of a file), with the protocol error code it maps to.
type codedError struct {
	code proto.ErrorCode
	msg  string
}

func (e *codedError) Error() string { return e.msg }

// codeError returns a codedError with a formatted message.
func codeError(code proto.ErrorCode, format string, args ...any) error {
	return &codedError{code: code, msg: fmt.Sprintf(format, args...)}
}

// parsedPath is a request path taken apart.
type parsedPath struct {
	// Origin is "root://host:port" (or "roots://host:port") in forwarding
	// mode, else "".
	Origin string
	// Path is the cleaned absolute path.
	Path string
	// Opaque is the CGI after '?', without the '?'.
	Opaque string
}

// forwardSchemes maps the URL schemes accepted in forwarding mode to the
// scheme of Request.Origin: xroot is root, so that one site's files share
// one cache entry whatever the client wrote; TLS stays TLS.
var forwardSchemes = map[string]string{
	"root":   "root",
	"xroot":  "root",
	"roots":  "roots",
	"xroots": "roots",
}

// parsePath splits a request path into origin, path and opaque data.
//
// The XrdClProxyPlugin turns root://site//store/f into
// root://cache//root://site//store/f, so the server receives
// "/root://site//store/f": a path whose first component is a URL scheme
// names the origin. Everything else is a plain path. Paths must be
// absolute, free of NUL bytes, at most maxLen bytes long, and '..' must not
// climb above the root; the result is cleaned ("//", "/./", "a/..").
func parsePath(raw string, maxLen int) (parsedPath, error) {
	var pp parsedPath
	// Some clients NUL-terminate the path; NULs elsewhere are an attack.
	raw = strings.TrimRight(raw, "\x00")
	p, opaque, _ := strings.Cut(raw, "?")
	pp.Opaque = opaque
	if strings.IndexByte(p, 0) >= 0 {
		return pp, codeError(proto.ErrArgInvalid, "path %q contains a NUL byte", p)
	}
	if len(p) > maxLen {
		return pp, codeError(proto.ErrArgTooLong, "path of %d bytes is longer than %d", len(p), maxLen)
	}
	if p == "" {
		return pp, codeError(proto.ErrArgMissing, "empty path")
	}

	rest := strings.TrimLeft(p, "/")
	if scheme, after, ok := strings.Cut(rest, "://"); ok && !strings.Contains(scheme, "/") {
		norm, known := forwardSchemes[strings.ToLower(scheme)]
		if !known {
			return pp, codeError(proto.ErrArgInvalid, "path %q names an unsupported protocol %q (root://, roots://, xroot:// are forwarded)", p, scheme)
		}
		hostport, fpath, _ := strings.Cut(after, "/")
		host, port, err := splitHostPort(hostport)
		if err != nil {
			return pp, codeError(proto.ErrArgInvalid, "path %q: origin %q: %v", p, hostport, err)
		}
		pp.Origin = norm + "://" + host + ":" + strconv.Itoa(port)
		rest = fpath
	} else if !strings.HasPrefix(p, "/") {
		return pp, codeError(proto.ErrArgInvalid, "path %q is not absolute", p)
	}

	clean, err := cleanPath(rest)
	if err != nil {
		return pp, codeError(proto.ErrArgInvalid, "path %q: %v", p, err)
	}
	pp.Path = clean
	return pp, nil
}

// cleanPath returns the absolute, cleaned form of p (which may lack the
// leading slash), refusing a ".." that would climb above the root.
func cleanPath(p string) (string, error) {
	depth := 0
	for _, seg := range strings.Split(p, "/") {
		switch seg {
		case "", ".":
		case "..":
			depth--
			if depth < 0 {
				return "", errors.New("'..' climbs above the root")
			}
		default:
			depth++
		}
	}
	return path.Clean("/" + p), nil
}

// splitHostPort parses "host", "host:port", "[v6]", "[v6]:port", with an
// optional "user@" in front (dropped: the cache uses its own credentials).
// The host is lower-cased; the port defaults to 1094.
func splitHostPort(hp string) (string, int, error) {
	if i := strings.LastIndexByte(hp, '@'); i >= 0 {
		hp = hp[i+1:]
	}
	if hp == "" {
		return "", 0, errors.New("no host")
	}
	host, portStr := hp, ""
	if strings.HasPrefix(hp, "[") {
		end := strings.IndexByte(hp, ']')
		if end < 0 {
			return "", 0, errors.New("unterminated '['")
		}
		host = hp[:end+1]
		switch tail := hp[end+1:]; {
		case tail == "":
		case strings.HasPrefix(tail, ":"):
			portStr = tail[1:]
		default:
			return "", 0, fmt.Errorf("junk %q after the address", tail)
		}
		if !validHostChars(host[1:len(host)-1], true) {
			return "", 0, fmt.Errorf("bad IPv6 address %q", host)
		}
	} else {
		if i := strings.LastIndexByte(hp, ':'); i >= 0 {
			host, portStr = hp[:i], hp[i+1:]
		}
		if host == "" || !validHostChars(host, false) {
			return "", 0, fmt.Errorf("bad host name %q", host)
		}
	}
	port := defaultOriginPort
	if portStr != "" {
		n, err := strconv.Atoi(portStr)
		if err != nil || n <= 0 || n > 65535 {
			return "", 0, fmt.Errorf("bad port %q", portStr)
		}
		port = n
	}
	return strings.ToLower(host), port, nil
}

func validHostChars(h string, v6 bool) bool {
	if h == "" {
		return false
	}
	for _, r := range h {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.', r == '_':
		case v6 && (r == ':' || r == '%'):
		default:
			return false
		}
	}
	return true
}
