package security

import (
	"errors"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/auth/token"
)

func TestTokenCache(t *testing.T) {
	now := time.Now()
	c := newTokenCache()
	c.now = func() time.Time { return now }
	calls := 0
	verify := func() (*token.Claims, error) {
		calls++
		return &token.Claims{Subject: "a", Expiry: now.Add(time.Minute)}, nil
	}
	for i := 0; i < 3; i++ {
		if _, err := c.get("tok", verify); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 1 {
		t.Fatalf("verified %d times, want once", calls)
	}
	now = now.Add(2 * time.Minute) // past the token's expiry: verified again
	c.get("tok", verify)
	if calls != 2 {
		t.Fatalf("expired entry reused (calls %d)", calls)
	}
	bad := errors.New("bad")
	for i := 0; i < 2; i++ {
		if _, err := c.get("other", func() (*token.Claims, error) { calls++; return nil, bad }); !errors.Is(err, bad) {
			t.Fatal(err)
		}
	}
	if calls != 4 {
		t.Fatalf("failures were cached (calls %d)", calls)
	}
}
