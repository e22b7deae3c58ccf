package token

import (
	"net/url"
	"strings"
)

// Bearer returns the token of "Bearer <token>" (or a bare token).
func Bearer(v string) string {
	v = strings.TrimSpace(v)
	if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		return strings.TrimSpace(v[7:])
	}
	return v
}

// TakeAuthz removes "authz" from a request's opaque data so that a
// client's token is never forwarded to an origin, and returns the token
// ("Bearer " removed). Unparseable opaque data carrying a token is
// dropped whole rather than risk forwarding the token.
func TakeAuthz(opaque *string) string {
	if !strings.Contains(*opaque, "authz=") {
		return ""
	}
	q, err := url.ParseQuery(*opaque)
	if err != nil {
		*opaque = ""
		return ""
	}
	tok := q.Get("authz")
	q.Del("authz")
	*opaque = q.Encode()
	return Bearer(tok)
}
