package s3origin

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/s3test"
	"github.com/hepcache/hepcache/origin"
)

// stripping is a proxy in front of a real S3 server that removes headers
// from its answers, as a store that omits them would: strip says which
// for a request.
func stripping(t *testing.T, target string, strip func(r *http.Request) []string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := httputil.NewSingleHostReverseProxy(u)
	p.ModifyResponse = func(resp *http.Response) error {
		for _, h := range strip(resp.Request) {
			resp.Header.Del(h)
		}
		return nil
	}
	ts := httptest.NewServer(p)
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestStoreWithoutETags (issue 27, item 8): an object store that omits
// ETags (so If-Match is never sent, or, when only its HEAD answers lack
// them, sent with the ETag of the first GET) has an object replaced (same
// size, a later second) between two reads of one open object: the second
// read fails with origin.ErrChanged before any byte of the new object is
// used. Before, it returned the new object's bytes, which the cache would
// have kept next to the old ones. A store giving neither ETag nor
// Last-Modified is refused at open.
func TestStoreWithoutETags(t *testing.T) {
	s := s3test.Start(t, "data")
	ctx := context.Background()
	const size = 2 << 20
	for _, tc := range []struct {
		name  string
		strip func(r *http.Request) []string
	}{
		{"no ETag anywhere", func(*http.Request) []string { return []string{"ETag"} }},
		{"no ETag in HEAD answers", func(r *http.Request) []string {
			if r.Method == http.MethodHead {
				return []string{"ETag"}
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "store/" + url.PathEscape(tc.name) + ".root"
			old := randomBytes(11, size)
			s3test.Put(t, s, "data", key, old)
			o := newTestOrigin(t, s, "s3://data", func(c *Config) { c.Endpoint = stripping(t, s.Endpoint(), tc.strip) })
			f, err := o.Open(ctx, "/"+key)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.Info().ETag != "" || f.Info().VersionPinned {
				t.Fatalf("the proxy left an ETag: %+v", f.Info())
			}
			buf := make([]byte, 1<<20)
			if _, err := f.ReadAt(ctx, buf, 0); err != nil || !bytes.Equal(buf, old[:1<<20]) {
				t.Fatalf("first read: %v", err)
			}
			// A later second than the object's Last-Modified.
			time.Sleep(time.Until(f.Info().ModTime.Add(1100 * time.Millisecond)))
			renewed := randomBytes(12, size)
			s3test.Put(t, s, "data", key, renewed)
			n, err := f.ReadAt(ctx, buf, 1<<20)
			switch {
			case err == nil && bytes.Equal(buf[:n], renewed[1<<20:]):
				t.Fatal("the second read returned the new object's bytes with success")
			case !errors.Is(err, origin.ErrChanged):
				t.Fatalf("second read after the replacement: %v, want origin.ErrChanged", err)
			}
		})
	}
	t.Run("neither ETag nor Last-Modified", func(t *testing.T) {
		s3test.Put(t, s, "data", "store/bare.root", randomBytes(13, 100))
		o := newTestOrigin(t, s, "s3://data", func(c *Config) {
			c.Endpoint = stripping(t, s.Endpoint(), func(*http.Request) []string { return []string{"ETag", "Last-Modified"} })
		})
		if _, err := o.Open(ctx, "/store/bare.root"); !errors.Is(err, origin.ErrUnsupported) {
			t.Fatalf("open of an object without any version identity: %v, want origin.ErrUnsupported", err)
		}
	})
}
