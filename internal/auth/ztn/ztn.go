// Package ztn is the wire format of XRootD's "ztn" security protocol: a
// bearer token in kXR_auth over TLS. The server announces
// "&P=ztn,<opts>:<maxsize>:" in the kXR_login answer and the client answers
// with a "ztn\0" credential holding the token. It also reads the "unix"
// protocol's credentials, which clients without a token fall back to.
package ztn

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Version is the ztn protocol version hepcache speaks (XRootD 5: 0).
const Version = 0

// Operations in a credential header.
const (
	opToken      = 'T' // the credential holds a token
	opSendIssuer = 'S' // the client asks for the accepted issuers
)

// hdrLen is the credential header: "ztn\0", version, operation, 2 spare
// bytes, then the 16-bit big-endian token length (with its NUL).
const hdrLen = 8 + 2

// Params returns the security parameters announced at login for ztn with
// tokens of at most maxSize bytes; with unixFallback clients without a
// token may continue with the unix protocol (as anonymous users).
func Params(maxSize int, unixFallback bool) string {
	s := fmt.Sprintf("&P=ztn,%d:%d:", Version, maxSize)
	if unixFallback {
		s += "&P=unix"
	}
	return s
}

// ParseParams reads the parameters the server sent for ztn ("0:4096:")
// and returns the largest token it accepts.
func ParseParams(p string) (maxSize int, err error) {
	parts := strings.Split(p, ":")
	if len(parts) < 2 {
		return 0, fmt.Errorf("ztn parameters %q: want opts:maxsize:", p)
	}
	if _, err := strconv.ParseUint(parts[0], 10, 64); err != nil {
		return 0, fmt.Errorf("ztn parameters %q: bad options", p)
	}
	n, err := strconv.Atoi(parts[1])
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("ztn parameters %q: bad maximum token size", p)
	}
	return n, nil
}

// Credentials encodes a token as a ztn credential (the body of kXR_auth
// with credential type "ztn").
func Credentials(token string) []byte {
	b := make([]byte, hdrLen, hdrLen+len(token)+1)
	copy(b, "ztn\x00")
	b[4] = Version
	b[5] = opToken
	binary.BigEndian.PutUint16(b[8:], uint16(len(token)+1))
	b = append(b, token...)
	return append(b, 0)
}

// ErrMalformed marks credentials that do not follow the protocol.
var ErrMalformed = errors.New("ztn: malformed credentials")

// ParseCredentials returns the token in a ztn credential. It never
// panics (it is fuzzed) and does not retain b.
func ParseCredentials(b []byte) (string, error) {
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("'ztn' token malformed; %s: %w", why, ErrMalformed)
	}
	if len(b) < 8 {
		return bad("credentials shorter than the header")
	}
	if !bytes.Equal(b[:4], []byte("ztn\x00")) {
		return bad(fmt.Sprintf("protocol id %q is not ztn", bytes.TrimRight(b[:4], "\x00")))
	}
	switch {
	case b[5] == opSendIssuer:
		return bad("the client asks for the accepted issuers, which is not supported; set BEARER_TOKEN or BEARER_TOKEN_FILE")
	case b[5] != opToken:
		return bad("unknown operation")
	case b[4] != Version:
		return bad("version mismatch")
	case len(b) < hdrLen:
		return bad("no token length")
	}
	n := int(binary.BigEndian.Uint16(b[8:]))
	switch {
	case n < 1:
		return bad("token length < 1")
	case hdrLen+n > len(b):
		return bad("respdata > credsize")
	case b[hdrLen] == 0:
		return bad("null token")
	case b[hdrLen+n-1] != 0:
		return bad("missing null byte")
	}
	tok := b[hdrLen : hdrLen+n-1]
	if bytes.IndexByte(tok, 0) >= 0 {
		return bad("NUL inside the token")
	}
	return string(tok), nil
}

// ParseUnix returns the user and group names in a unix credential
// ("unix\0user group\0").
func ParseUnix(b []byte) (user, group string, err error) {
	if !bytes.HasPrefix(b, []byte("unix\x00")) {
		return "", "", errors.New("unix credentials: wrong protocol id")
	}
	rest := b[5:]
	if i := bytes.IndexByte(rest, 0); i >= 0 {
		rest = rest[:i]
	}
	if len(rest) > 512 {
		return "", "", errors.New("unix credentials too long")
	}
	user, group, _ = strings.Cut(string(rest), " ")
	return user, group, nil
}
