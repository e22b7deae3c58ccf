package origintimeout

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hepcache/hepcache/origin"
)

// TestSetBoundsCallsFromNowOn: a read blocked at the origin ends at the
// bound in force when it started; Set changes it for the next calls,
// without resolving the origin again.
func TestSetBoundsCallsFromNowOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := origin.NewMem("mem://a")
		m.Put("/f", make([]byte, 10), time.Unix(1, 0))
		to := New(time.Hour)
		o, err := to.Resolver(origin.ResolverFunc(func(context.Context, string) (origin.Origin, error) { return m, nil })).Resolve(context.Background(), "mem://a")
		if err != nil {
			t.Fatal(err)
		}
		f, err := o.Open(context.Background(), "/f")
		if err != nil {
			t.Fatal(err)
		}
		release := m.Gate()
		defer release()
		read := func() (time.Duration, error) {
			start := time.Now()
			_, err := f.ReadAt(context.Background(), make([]byte, 4), 0)
			return time.Since(start), err
		}
		to.Set(2 * time.Second)
		if took, err := read(); !errors.Is(err, context.DeadlineExceeded) || took != 2*time.Second {
			t.Fatalf("read under a 2s bound: %v after %v", err, took)
		}
		to.Set(5 * time.Second)
		if took, err := read(); !errors.Is(err, context.DeadlineExceeded) || took != 5*time.Second {
			t.Fatalf("read under a 5s bound: %v after %v", err, took)
		}
		if o2, _ := to.Resolver(origin.ResolverFunc(func(context.Context, string) (origin.Origin, error) { return m, nil })).Resolve(context.Background(), "mem://a"); o2.String() != "mem://a" {
			t.Fatalf("the wrapper renamed the origin: %s", o2)
		}
	})
}
