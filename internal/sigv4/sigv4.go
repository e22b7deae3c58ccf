// Package sigv4 signs HTTP requests with AWS Signature Version 4 for S3
// (header auth, "AWS4-HMAC-SHA256"): a canonical form of the request is
// hashed, and an HMAC-SHA256 key derived from the secret, the date, the
// region and the service signs it. The secret never leaves Sign.
package sigv4

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"sort"
	"strings"
	"time"
)

// EmptySHA256 is the hex SHA-256 of an empty payload, the
// x-amz-content-sha256 of a GET or HEAD.
const EmptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// UnsignedPayload is the x-amz-content-sha256 of a body sent unhashed.
const UnsignedPayload = "UNSIGNED-PAYLOAD"

// Credentials are an access key pair and, for temporary credentials, a
// session token.
type Credentials struct {
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
}

// String names the credentials without their secret, for logs.
// It names the access key by its last four characters only, as AWS's own
// tools show a key (aws configure list): enough for an operator to tell
// which of the site's keys is in use, while the whole id, half of the
// pair, stays out of logs that more people read than the key files.
func (c Credentials) String() string {
	id := c.AccessKeyID
	switch {
	case id == "":
		return "anonymous"
	case len(id) <= 8:
		return "access key (short id, not shown)"
	}
	return "access key ending in " + id[len(id)-4:]
}

// GoString keeps %#v from printing the secret.
func (c Credentials) GoString() string { return c.String() }

// unsigned are headers that proxies and transports add or change on the
// way: signing them would break the signature.
var unsigned = map[string]bool{
	"authorization": true, "user-agent": true, "content-length": true, "expect": true,
	"accept-encoding": true, "connection": true, "transfer-encoding": true, "x-amzn-trace-id": true,
}

// Sign adds x-amz-date, x-amz-content-sha256 (payloadHash: a hex SHA-256,
// EmptySHA256 or UnsignedPayload), x-amz-security-token when there is a
// session token, and the Authorization header to req. Every other header
// already set on req is signed, and the Host. Safe for concurrent use on
// different requests.
func Sign(req *http.Request, c Credentials, region, service, payloadHash string, now time.Time) error {
	if c.AccessKeyID == "" || c.SecretAccessKey == "" {
		return errors.New("sigv4: no access key or secret")
	}
	now = now.UTC()
	amzDate := now.Format("20060102T150405Z")
	day := amzDate[:8]
	req.Header.Set("X-Amz-Date", amzDate)
	req.Header.Set("X-Amz-Content-Sha256", payloadHash)
	if c.SessionToken != "" {
		req.Header.Set("X-Amz-Security-Token", c.SessionToken)
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	names := []string{"host"}
	values := map[string]string{"host": host}
	for k, v := range req.Header {
		lk := strings.ToLower(k)
		if unsigned[lk] {
			continue
		}
		names = append(names, lk)
		vs := make([]string, len(v))
		for i := range v {
			vs[i] = strings.Join(strings.Fields(v[i]), " ")
		}
		values[lk] = strings.Join(vs, ",")
	}
	sort.Strings(names)
	var ch strings.Builder
	for _, n := range names {
		ch.WriteString(n + ":" + values[n] + "\n")
	}
	signed := strings.Join(names, ";")
	canonical := strings.Join([]string{req.Method, canonicalURI(req), canonicalQuery(req), ch.String(), signed, payloadHash}, "\n")
	scope := day + "/" + region + "/" + service + "/aws4_request"
	sum := sha256.Sum256([]byte(canonical))
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(sum[:])
	k := hmacSHA256([]byte("AWS4"+c.SecretAccessKey), day)
	k = hmacSHA256(k, region)
	k = hmacSHA256(k, service)
	k = hmacSHA256(k, "aws4_request")
	sig := hex.EncodeToString(hmacSHA256(k, toSign))
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+c.AccessKeyID+"/"+scope+
		", SignedHeaders="+signed+", Signature="+sig)
	return nil
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}

// canonicalURI is the path with each segment URI-encoded once (S3 does
// not double-encode, unlike the other services).
func canonicalURI(req *http.Request) string {
	if req.URL.Path == "" {
		return "/"
	}
	// Encoded from the decoded path: Go's own escaping leaves characters
	// (e.g. '$', '!', '*') that SigV4 wants encoded.
	return Escape(req.URL.Path, false)
}

// canonicalQuery is the query with keys and values encoded and sorted.
func canonicalQuery(req *http.Request) string {
	q := req.URL.Query()
	if len(q) == 0 {
		return ""
	}
	var parts []string
	for k, vs := range q {
		for _, v := range vs {
			parts = append(parts, Escape(k, true)+"="+Escape(v, true))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, "&")
}

// Escape URI-encodes s as SigV4 requires: every byte except A-Z a-z 0-9
// - _ . ~ becomes %XX (upper-case hex); '/' too when encodeSlash. A
// request's URL must be built with the same encoding (RawPath, RawQuery)
// so that what is sent is what was signed.
func Escape(s string, encodeSlash bool) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
			c == '-' || c == '_' || c == '.' || c == '~' || (c == '/' && !encodeSlash) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}
