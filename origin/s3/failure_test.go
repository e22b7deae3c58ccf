package s3origin

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/sigv4"
	"github.com/hepcache/hepcache/origin"
)

// throttling answers the first n requests with 503 SlowDown, then 200.
func throttling(n int64) (*httptest.Server, *atomic.Int64) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= n {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`))
			return
		}
		w.Header().Set("ETag", `"e"`)
		w.Header().Set("Content-Length", "5")
		w.Header().Set("Last-Modified", "Mon, 02 Jan 2006 15:04:05 GMT")
	}))
	return srv, &calls
}

// fakeSleep records back-offs instead of waiting.
type fakeSleep struct{ waits []time.Duration }

func (f *fakeSleep) sleep(ctx context.Context, d time.Duration) error {
	f.waits = append(f.waits, d)
	return ctx.Err()
}

func newFake(tb testing.TB, endpoint string, log *bytes.Buffer, mut func(*Config)) *Origin {
	tb.Helper()
	cfg := &Config{URL: "s3://bkt/pre", Endpoint: endpoint,
		Credentials: Static(sigv4.Credentials{AccessKeyID: "AKID", SecretAccessKey: "very-secret-key"}),
		Logger:      slog.New(slog.NewTextHandler(log, nil))}
	if mut != nil {
		mut(cfg)
	}
	o, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { o.Close() })
	return o
}

func TestSlowDownIsRetriedWithBackoff(t *testing.T) {
	for _, tc := range []struct {
		name      string
		throttled int64
		ok        bool
	}{
		{"recovers", 3, true},
		{"gives up", 100, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, calls := throttling(tc.throttled)
			defer srv.Close()
			var log bytes.Buffer
			fs := &fakeSleep{}
			o := newFake(t, srv.URL, &log, func(c *Config) { c.sleep = fs.sleep })
			fi, err := o.Stat(context.Background(), "/f")
			if tc.ok {
				if err != nil || fi.Size != 5 || calls.Load() != 4 || len(fs.waits) != 3 {
					t.Fatalf("stat: %+v %v after %d calls, %d waits", fi, err, calls.Load(), len(fs.waits))
				}
				return
			}
			if !errors.Is(err, origin.ErrUnavailable) || !strings.Contains(err.Error(), "503") {
				t.Fatalf("stat of a throttling server: %v", err)
			}
			if calls.Load() != defaultMaxRetries+1 {
				t.Fatalf("%d calls, want %d", calls.Load(), defaultMaxRetries+1)
			}
			for i, w := range fs.waits {
				if w <= 0 || w > defaultRetryBase<<i {
					t.Fatalf("back-off %d: %v, want in (0, %v]", i, w, defaultRetryBase<<i)
				}
			}
			if strings.Count(log.String(), "s3 origin: unavailable") != 1 {
				t.Fatalf("log:\n%s", log.String())
			}
		})
	}
}

func TestEndpointDownIsUnreachableAndLoggedOnce(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	var log bytes.Buffer
	o := newFake(t, "http://"+addr, &log, nil)
	for range 5 {
		_, err := o.Open(context.Background(), "/f")
		if !errors.Is(err, origin.ErrUnavailable) || !strings.Contains(err.Error(), "unreachable") {
			t.Fatalf("open at a dead endpoint: %v", err)
		}
	}
	if n := strings.Count(log.String(), "s3 origin: unavailable"); n != 1 {
		t.Fatalf("logged %d times, want once:\n%s", n, log.String())
	}
	if strings.Contains(log.String(), "very-secret-key") {
		t.Fatal("the secret is in the log")
	}
}

func TestErrorCodesMapToSentinels(t *testing.T) {
	for _, tc := range []struct {
		code   string
		status int
		want   error
	}{
		{"NoSuchKey", 404, origin.ErrNotFound},
		{"NoSuchBucket", 404, origin.ErrNotFound},
		{"AccessDenied", 403, origin.ErrNotAuthorized},
		{"InvalidAccessKeyId", 403, origin.ErrNotAuthorized},
		{"SignatureDoesNotMatch", 403, origin.ErrNotAuthorized},
		{"InternalError", 500, origin.ErrUnavailable},
		{"InvalidRequest", 400, origin.ErrInvalid},
	} {
		t.Run(tc.code, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				if r.Method != http.MethodHead {
					w.Write([]byte("<Error><Code>" + tc.code + "</Code><Message>m</Message></Error>"))
				}
			}))
			defer srv.Close()
			var log bytes.Buffer
			o := newFake(t, srv.URL, &log, func(c *Config) { c.sleep = (&fakeSleep{}).sleep })
			_, err := o.List(context.Background(), "/d", false)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.code) {
				t.Fatalf("%s: %v, want %v", tc.code, err, tc.want)
			}
			if tc.want == origin.ErrNotAuthorized && !strings.Contains(err.Error(), `bucket "bkt"`) {
				t.Fatalf("a refusal does not name the bucket: %v", err)
			}
			if strings.Contains(err.Error()+log.String(), "very-secret-key") {
				t.Fatal("the secret is in an error or the log")
			}
		})
	}
}

func TestParseURL(t *testing.T) {
	for _, tc := range []struct{ in, bucket, prefix string }{
		{"s3://bkt", "bkt", ""},
		{"s3://bkt/", "bkt", ""},
		{"s3://bkt/a/b/", "bkt", "a/b/"},
		{"s3://bkt//a/../c", "bkt", "c/"},
	} {
		b, p, err := ParseURL(tc.in)
		if err != nil || b != tc.bucket || p != tc.prefix {
			t.Errorf("ParseURL(%q) = %q %q %v", tc.in, b, p, err)
		}
	}
	for _, bad := range []string{"s3://", "s3://a", "http://bkt/x", "s3://bkt:80/x", "s3://bk t/x", "s3://bkt/x?y=1"} {
		if _, _, err := ParseURL(bad); err == nil {
			t.Errorf("ParseURL(%q): no error", bad)
		}
	}
}
