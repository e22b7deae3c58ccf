package cms

import (
	"bytes"
	"testing"
)

// FuzzManagerData feeds arbitrary bytes to the decoders of what a manager
// sends: they never panic, and login data that decodes re-encodes to the
// same values.
func FuzzManagerData(f *testing.F) {
	f.Add((&loginData{Version: 3, Mode: modeServer, DPort: 1094, SID: "m-x", EnvCGI: "site=a"}).marshal())
	f.Add([]byte("\x20/store/f.root\x00"))
	f.Add([]byte{0xb0, 0, 0, 5, 0xa0, 0x7f, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		if d, err := unmarshalLogin(b); err == nil {
			again, err := unmarshalLogin(d.marshal())
			if err != nil || *again != *d {
				t.Fatalf("login data %+v re-encoded to %+v, %v", d, again, err)
			}
		}
		if len(b) > 0 {
			if p, err := pathOf(header{Modifier: b[0]}, b[1:]); err == nil && (p == "" || p[0] != '/' || bytes.IndexByte([]byte(p), 0) >= 0) {
				t.Fatalf("pathOf accepted %q", p)
			}
		}
		errorText(b)
		u := unpacker{b: b}
		for u.err == nil && !u.done() {
			u.int()
		}
	})
}
