package xrootd

import (
	"errors"
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/xrootd/proto"
)

func TestParsePath(t *testing.T) {
	tests := []struct {
		name   string
		raw    string
		origin string
		path   string
		opaque string
		code   proto.ErrorCode // 0: no error
	}{
		{name: "plain", raw: "/store/f.root", path: "/store/f.root"},
		{name: "opaque", raw: "/store/f.root?xrd.wantprot=unix&a=b", path: "/store/f.root", opaque: "xrd.wantprot=unix&a=b"},
		{name: "trailing NUL", raw: "/store/f\x00", path: "/store/f"},
		{name: "cleaned", raw: "//store/./a//b/../f", path: "/store/a/f"},
		{name: "root", raw: "/", path: "/"},
		{name: "proxy plugin", raw: "/root://site.example:1094//store/f", origin: "root://site.example:1094", path: "/store/f"},
		{name: "default port", raw: "/root://site.example//store/f", origin: "root://site.example:1094", path: "/store/f"},
		{name: "no leading slash", raw: "root://Site.Example:2094//store/f?x=1", origin: "root://site.example:2094", path: "/store/f", opaque: "x=1"},
		{name: "xroot is root", raw: "/xroot://site//store/f", origin: "root://site:1094", path: "/store/f"},
		{name: "roots stays TLS", raw: "/roots://site:1095//store/f", origin: "roots://site:1095", path: "/store/f"},
		{name: "xroots", raw: "/xroots://site//f", origin: "roots://site:1094", path: "/f"},
		{name: "single slash after host", raw: "/root://site:1094/store/f", origin: "root://site:1094", path: "/store/f"},
		{name: "user dropped", raw: "/root://alice@site:1094//f", origin: "root://site:1094", path: "/f"},
		{name: "ipv6", raw: "/root://[::1]:1094//f", origin: "root://[::1]:1094", path: "/f"},
		{name: "origin without path", raw: "/root://site:1094", origin: "root://site:1094", path: "/"},
		{name: "colon in a plain path", raw: "/store/a:b/c", path: "/store/a:b/c"},
		{name: "relative", raw: "store/f", code: proto.ErrArgInvalid},
		{name: "empty", raw: "", code: proto.ErrArgMissing},
		{name: "NUL inside", raw: "/store/f\x00/../../etc/passwd", code: proto.ErrArgInvalid},
		{name: "dot dot escape", raw: "/../etc/passwd", code: proto.ErrArgInvalid},
		{name: "dot dot escape later", raw: "/store/../../etc/passwd", code: proto.ErrArgInvalid},
		{name: "dot dot inside is fine", raw: "/store/x/../f", path: "/store/f"},
		{name: "dot dot escape forwarded", raw: "/root://site//../etc/passwd", code: proto.ErrArgInvalid},
		{name: "unknown scheme", raw: "/http://site//f", code: proto.ErrArgInvalid},
		{name: "bad port", raw: "/root://site:99999//f", code: proto.ErrArgInvalid},
		{name: "no host", raw: "/root://:1094//f", code: proto.ErrArgInvalid},
		{name: "bad host", raw: "/root://si te//f", code: proto.ErrArgInvalid},
		{name: "too long", raw: "/" + strings.Repeat("a", 5000), code: proto.ErrArgTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pp, err := parsePath(tt.raw, 4096)
			if tt.code != 0 {
				var ce *codedError
				if !errors.As(err, &ce) || ce.code != tt.code {
					t.Fatalf("parsePath(%q) = %+v, %v; want error %v", tt.raw, pp, err, tt.code)
				}
				return
			}
			if err != nil {
				t.Fatalf("parsePath(%q): %v", tt.raw, err)
			}
			if pp.Origin != tt.origin || pp.Path != tt.path || pp.Opaque != tt.opaque {
				t.Fatalf("parsePath(%q) = %+v, want origin %q path %q opaque %q", tt.raw, pp, tt.origin, tt.path, tt.opaque)
			}
		})
	}
}

func FuzzParsePath(f *testing.F) {
	for _, s := range []string{"/store/f", "/root://site:1094//store/f?a=b", "/../x", "//a/./b/..", "/xroots://[::1]:1//x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		pp, err := parsePath(raw, 4096)
		if err != nil {
			return
		}
		if !strings.HasPrefix(pp.Path, "/") || strings.Contains(pp.Path, "/../") || strings.HasSuffix(pp.Path, "/..") ||
			strings.Contains(pp.Path, "//") || strings.IndexByte(pp.Path, 0) >= 0 {
			t.Fatalf("parsePath(%q) let %q through", raw, pp.Path)
		}
	})
}
