package security

import (
	"crypto/sha256"
	"crypto/x509"
	"sync"
	"time"

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
