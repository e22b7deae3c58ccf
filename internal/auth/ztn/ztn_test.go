package ztn

import (
	"errors"
	"strings"
	"testing"
)

func TestCredentialsRoundTrip(t *testing.T) {
	tok := "eyJhbGciOiJSUzI1NiJ9.e30.sig"
	got, err := ParseCredentials(Credentials(tok))
	if err != nil || got != tok {
		t.Fatalf("round trip: %q, %v", got, err)
	}
}

func TestParseCredentialsRejects(t *testing.T) {
	good := Credentials("abc")
	mut := func(f func(b []byte) []byte) []byte {
		b := append([]byte(nil), good...)
		return f(b)
	}
	cases := []struct {
		name string
		b    []byte
		want string
	}{
		{"short", good[:5], "shorter"},
		{"other protocol", mut(func(b []byte) []byte { copy(b, "gsi\x00"); return b }), "not ztn"},
		{"issuer request", mut(func(b []byte) []byte { b[5] = 'S'; return b }), "BEARER_TOKEN"},
		{"bad op", mut(func(b []byte) []byte { b[5] = 'X'; return b }), "unknown operation"},
		{"version", mut(func(b []byte) []byte { b[4] = 1; return b }), "version"},
		{"zero length", mut(func(b []byte) []byte { b[8], b[9] = 0, 0; return b }), "< 1"},
		{"length beyond data", mut(func(b []byte) []byte { b[9] = 200; return b }), "credsize"},
		{"no NUL", mut(func(b []byte) []byte { b[len(b)-1] = 'x'; return b }), "null byte"},
		{"empty token", Credentials(""), "null token"},
		{"NUL inside", Credentials("a\x00b"), "NUL inside"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := ParseCredentials(tc.b)
			if err == nil {
				t.Fatalf("accepted %q", tok)
			}
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want %q", err, tc.want)
			}
		})
	}
}

func TestParams(t *testing.T) {
	if got := Params(4096, true); got != "&P=ztn,0:4096:&P=unix" {
		t.Fatalf("Params = %q", got)
	}
	if n, err := ParseParams("0:4096:"); err != nil || n != 4096 {
		t.Fatalf("ParseParams = %d, %v", n, err)
	}
	for _, bad := range []string{"", "x:1:", "0:0:", "0"} {
		if _, err := ParseParams(bad); err == nil {
			t.Errorf("ParseParams(%q) accepted", bad)
		}
	}
}

func TestParseUnix(t *testing.T) {
	u, g, err := ParseUnix([]byte("unix\x00alice users\x00"))
	if err != nil || u != "alice" || g != "users" {
		t.Fatalf("%q %q %v", u, g, err)
	}
}

// FuzzParseCredentials: arbitrary kXR_auth bodies never panic, and what
// parses re-encodes to the same token.
func FuzzParseCredentials(f *testing.F) {
	f.Add(Credentials("abc"))
	f.Add([]byte("ztn\x00\x00S\x00\x00"))
	f.Add([]byte("unix\x00u g\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		tok, err := ParseCredentials(b)
		if err != nil {
			ParseUnix(b)
			return
		}
		again, err := ParseCredentials(Credentials(tok))
		if err != nil || again != tok {
			t.Fatalf("re-encoded %q: %q, %v", tok, again, err)
		}
	})
}
