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

// InTheClear is why a token that came over an unencrypted connection
// (plain, the scheme it came by; secure, the one to use) did not count.
func InTheClear(plain, secure string) string {
	return "the bearer token was ignored: it came over unencrypted " + plain + ", where anyone on the way can read it; tokens are accepted over " + secure + " only (security.allow_tokens_without_tls)"
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
