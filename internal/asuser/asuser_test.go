package asuser

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

func TestClean(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text\nnext line\ttab", "plain text\nnext line\ttab"},
		{"title \x1b]0;owned\x07 done", "title ?]0;owned? done"},
		{"csi \x1b[2J clear", "csi ?[2J clear"},
		{"c1 \u009b2J", "c1 ?2J"},
		{"cr\rover", "cr?over"},
		{"del\x7f", "del?"},
		{"bad utf8 \xff\xfe", "bad utf8 ??"},
		{"ünïcode ok", "ünïcode ok"},
	} {
		if got := string(Clean([]byte(tc.in))); got != tc.want {
			t.Errorf("Clean(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestCopyCleanKeepsRunesCutByReads: a rune split across two reads is
// kept whole, not replaced.
func TestCopyCleanKeepsRunesCutByReads(t *testing.T) {
	in := strings.Repeat("é", 40000) + "\x1b"
	var out bytes.Buffer
	copyClean(&out, &slowReader{b: []byte(in), n: 7})
	if want := strings.Repeat("é", 40000) + "?"; out.String() != want {
		t.Fatalf("got %d bytes, want %d", out.Len(), len(want))
	}
}

type slowReader struct {
	b []byte
	n int
}

func (r *slowReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), r.n)], r.b)
	r.b = r.b[k:]
	return k, nil
}
