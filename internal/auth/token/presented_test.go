package token

import "testing"

func TestTakeAuthz(t *testing.T) {
	for _, c := range []struct{ in, rest, tok string }{
		{"", "", ""},
		{"a=1", "a=1", ""},
		{"authz=Bearer%20abc&a=1", "a=1", "abc"},
		{"authz=xyz", "", "xyz"},
		{"authz=%zz&a=1", "", ""}, // unparseable: nothing of it forwarded
	} {
		o := c.in
		if tok := TakeAuthz(&o); tok != c.tok || o != c.rest {
			t.Errorf("TakeAuthz(%q) = %q leaving %q, want %q leaving %q", c.in, tok, o, c.tok, c.rest)
		}
	}
	if got := Bearer("  bearer  t0k "); got != "t0k" {
		t.Errorf("Bearer = %q", got)
	}
}
