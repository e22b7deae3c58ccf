// Package originhttp holds what the HTTP-based origins (origin/http,
// origin/s3) share: the transport they reach an origin with and the
// parsing of a ranged answer's Content-Range.
package originhttp

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Transport returns the transport of an origin: dialled directly (never
// through $http_proxy), HTTP/2 where offered, as many idle connections
// kept as may be busy (a burst of block reads reuses them instead of
// redialling), and no compression (byte ranges of a compressed
// representation are not the file's).
func Transport(dialTimeout time.Duration, tlsConfig *tls.Config, maxConns int, idleTimeout time.Duration) *http.Transport {
	d := &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:               nil,
		DialContext:         d.DialContext,
		TLSClientConfig:     tlsConfig,
		TLSHandshakeTimeout: dialTimeout,
		ForceAttemptHTTP2:   true,
		MaxConnsPerHost:     maxConns,
		MaxIdleConns:        maxConns,
		MaxIdleConnsPerHost: maxConns,
		IdleConnTimeout:     idleTimeout,
		DisableCompression:  true,
	}
}

// ParseContentRange parses "bytes first-last/size" (size may be "*",
// returned as -1).
func ParseContentRange(s string) (first, last, size int64, err error) {
	rest, ok := strings.CutPrefix(s, "bytes ")
	if !ok {
		return 0, 0, 0, fmt.Errorf("content-range %q: not bytes", s)
	}
	rng, total, ok := strings.Cut(strings.TrimSpace(rest), "/")
	a, b, ok2 := strings.Cut(rng, "-")
	if !ok || !ok2 {
		return 0, 0, 0, fmt.Errorf("content-range %q: malformed", s)
	}
	if first, err = strconv.ParseInt(a, 10, 64); err != nil {
		return 0, 0, 0, fmt.Errorf("content-range %q: %w", s, err)
	}
	if last, err = strconv.ParseInt(b, 10, 64); err != nil || last < first {
		return 0, 0, 0, fmt.Errorf("content-range %q: bad last byte", s)
	}
	size = -1
	if total != "*" {
		if size, err = strconv.ParseInt(total, 10, 64); err != nil {
			return 0, 0, 0, fmt.Errorf("content-range %q: %w", s, err)
		}
	}
	return first, last, size, nil
}
