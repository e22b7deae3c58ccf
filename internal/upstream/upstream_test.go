package upstream

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/origin"
)

func TestCanonical(t *testing.T) {
	cases := []struct{ in, want string }{
		{"root://Origin.Example.org", "root://origin.example.org:1094"},
		{"xroot://a:2000//", "root://a:2000"},
		{"root://a:1094//store/x", "root://a:1094"},
		{"https://web.example", "https://web.example:443"},
		{"https://Dir.Example/api/v1.0/director/origin", "https://dir.example:443/api/v1.0/director/origin"},
		{"http://web.example:8080//data/./store/", "http://web.example:8080/data/store"},
		{"https://web.example/", "https://web.example:443"},
		{"https://web.example/a%20b", "https://web.example:443/a%20b"},
		{"file:///data/", "file:///data"},
		{"root://[::1]:1095", "root://[::1]:1095"},
		{"s3://bucket", "s3://bucket"},
		{"s3://bucket/store/data/", "s3://bucket/store/data"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := Canonical(tc.in)
			if err != nil || got != tc.want {
				t.Fatalf("Canonical(%q)=%q,%v want %q", tc.in, got, err, tc.want)
			}
		})
	}
	for _, bad := range []string{"", "origin.example", "ftp://x", "root://", "root://a:99999", "file://host/x", "file://", "s3://b", "s3://bucket:9000/x", "https://web.example/a/../../etc"} {
		if got, err := Canonical(bad); err == nil {
			t.Errorf("Canonical(%q)=%q, want error", bad, got)
		}
	}
}

func TestIgnored(t *testing.T) {
	cases := []struct {
		in   string
		want []string // a word of each phrase, in order
	}{
		{"root://h:1094", nil},
		{"https://h/api/v1.0/director/origin", nil},
		{"file:///data", nil},
		{"root://h:1094//store", []string{"path"}},
		{"roots://h//store/mc/", []string{"path"}},
		{"https://user:secret@h/x?a=1#f", []string{"user information", "query", "fragment"}},
		{"root://h:1094//store?x=1", []string{"path", "query"}},
		{"ftp://h/x", nil},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got := Ignored(c.in)
			if len(got) != len(c.want) {
				t.Fatalf("Ignored(%q) = %q; want %d phrases %q", c.in, got, len(c.want), c.want)
			}
			for i, w := range c.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("Ignored(%q)[%d] = %q; want it to name %q", c.in, i, got[i], w)
				}
				if strings.Contains(got[i], "secret") {
					t.Errorf("Ignored(%q)[%d] = %q shows the password", c.in, i, got[i])
				}
			}
		})
	}
}

// TestS3NeverForwarded: a bucket is read with the site's credentials, so
// a client may name only the buckets the configuration names.
func TestS3NeverForwarded(t *testing.T) {
	dial := map[string]DialFunc{"s3": func(ctx context.Context, c string) (origin.Origin, error) { return origin.NewMem(c), nil }}
	s, err := New(Config{Default: "s3://site-data/store", Trusted: []string{"s3://other/x/"}, ForwardAllow: []string{"evil", ".example"}, Dial: dial})
	if err != nil {
		t.Fatal(err)
	}
	for c, want := range map[string]bool{"s3://site-data/store": true, "s3://other/x": true, "s3://evil": false, "s3://a.example": false, "s3://site-data": false} {
		if got := s.Allowed(c); got != want {
			t.Errorf("Allowed(%s) = %v, want %v", c, got, want)
		}
	}
}

func TestForwardAllowList(t *testing.T) {
	dial := map[string]DialFunc{"root": func(ctx context.Context, c string) (origin.Origin, error) { return origin.NewMem(c), nil }}
	s, err := New(Config{Default: "root://default:1094", ForwardAllow: []string{"site-a.example", "site-b.example:2094", ".cern.ch", "*.desy.de"}, Dial: dial})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		url string
		ok  bool
	}{
		{"", true},
		{"root://default:1094", true},
		{"root://site-a.example:1094", true},
		{"root://site-a.example:3000", true},
		{"root://SITE-A.example", true},
		{"root://site-b.example:2094", true},
		{"root://site-b.example:1094", false},
		{"root://eos.cern.ch:1094", true},
		{"root://dcache.desy.de", true},
		{"root://evilcern.ch", false},
		{"root://cern.ch.evil.org", false},
		{"root://other.example", false},
		{"root://default:1095", false},
	}
	for _, tc := range cases {
		t.Run(tc.url, func(t *testing.T) {
			o, err := s.Resolve(context.Background(), tc.url)
			if tc.ok {
				if err != nil {
					t.Fatalf("want allowed, got %v", err)
				}
				if tc.url == "" && o.String() != "root://default:1094" {
					t.Fatalf("default resolved to %s", o)
				}
				return
			}
			if !errors.Is(err, backend.ErrForbidden) {
				t.Fatalf("want ErrForbidden, got %v", err)
			}
		})
	}
	// One Origin per site, shared by every request for it.
	a1, _ := s.Resolve(context.Background(), "root://site-a.example")
	a2, _ := s.Resolve(context.Background(), "root://site-a.example:1094")
	if a1 != a2 {
		t.Fatal("same site resolved to two origins")
	}
}

func TestForwardingOffAndBadRules(t *testing.T) {
	dial := map[string]DialFunc{"root": func(ctx context.Context, c string) (origin.Origin, error) { return origin.NewMem(c), nil }}
	s, err := New(Config{Default: "root://d", Dial: dial})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Resolve(context.Background(), "root://x"); !errors.Is(err, backend.ErrForbidden) {
		t.Fatalf("forwarding off: got %v", err)
	}
	for _, bad := range []string{"*", ".", "root://x", ".x:1"} {
		if _, err := New(Config{ForwardAllow: []string{bad}, Dial: dial}); err == nil {
			t.Errorf("rule %q accepted", bad)
		}
	}
}
