package security

import (
	"crypto/sha256"
	"crypto/x509"
	"sync"
	"time"

	"github.com/hepcache/hepcache/internal/auth/token"
	"github.com/hepcache/hepcache/internal/authz"
)

const (
	// subjectCacheSize bounds the verified chains remembered; when full the
	// cache starts over (verification is cheap, the bound is what matters).
	subjectCacheSize = 4096
	// subjectTTL is how long a verification result is reused, so that a
	// changed CA or vomsdir takes effect soon even without a reload.
	subjectTTL = 5 * time.Minute
	// failureTTL is how long a failed verification is remembered, so that
	// a client repeating a bad chain does not cost a verification each time.
	failureTTL = time.Minute
)

// subjectCache remembers client chain verifications by the chain's bytes.
type subjectCache struct {
	now func() time.Time

	// mu protects m.
	mu sync.Mutex
	m  map[[32]byte]cachedSubject
}

type cachedSubject struct {
	sub     *authz.Subject
	err     error
	expires time.Time
}

func newSubjectCache() *subjectCache {
	return &subjectCache{now: time.Now, m: map[[32]byte]cachedSubject{}}
}

// get returns the cached result for certs or computes it with verify.
func (c *subjectCache) get(certs []*x509.Certificate, verify func() (*authz.Subject, error)) (*authz.Subject, error) {
	h := sha256.New()
	for _, cert := range certs {
		h.Write(cert.Raw)
	}
	var k [32]byte
	h.Sum(k[:0])
	now := c.now()
	c.mu.Lock()
	e, ok := c.m[k]
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.sub, e.err
	}
	sub, err := verify()
	e = cachedSubject{sub: sub, err: err, expires: now.Add(failureTTL)}
	if err == nil {
		e.expires = now.Add(subjectTTL)
		if na := sub.X509.NotAfter; na.Before(e.expires) {
			e.expires = na
		}
		for _, a := range sub.VOMS {
			if a.NotAfter.Before(e.expires) {
				e.expires = a.NotAfter
			}
		}
	}
	c.mu.Lock()
	if len(c.m) >= subjectCacheSize {
		clear(c.m)
	}
	c.m[k] = e
	c.mu.Unlock()
	return sub, err
}

// tokenCache remembers verified tokens by their hash, so that a client
// sending many requests with one token (uproot's ranged GETs) costs one
// signature verification. Entries live until the token expires or
// subjectTTL passes; failures are not cached (they are cheap to repeat:
// bad tokens fail before or at the signature).
type tokenCache struct {
	now func() time.Time

	// mu protects m.
	mu sync.Mutex
	m  map[[32]byte]cachedToken
}

type cachedToken struct {
	claims  *token.Claims
	expires time.Time
}

func newTokenCache() *tokenCache {
	return &tokenCache{now: time.Now, m: map[[32]byte]cachedToken{}}
}

func (c *tokenCache) get(tok string, verify func() (*token.Claims, error)) (*token.Claims, error) {
	k := sha256.Sum256([]byte(tok))
	now := c.now()
	c.mu.Lock()
	e, ok := c.m[k]
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.claims, nil
	}
	claims, err := verify()
	if err != nil {
		return nil, err
	}
	exp := now.Add(subjectTTL)
	if claims.Expiry.Before(exp) {
		exp = claims.Expiry
	}
	c.mu.Lock()
	if len(c.m) >= subjectCacheSize {
		clear(c.m)
	}
	c.m[k] = cachedToken{claims: claims, expires: exp}
	c.mu.Unlock()
	return claims, nil
}
