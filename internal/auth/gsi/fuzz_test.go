package gsi

import (
	"crypto/tls"
	"os"
	"strings"
	"testing"
)

func writeFile(tb testing.TB, path string, b []byte) {
	tb.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		tb.Fatal(err)
	}
}

// FuzzServerStep feeds arbitrary client steps to the server: it must
// never panic, and never answer a step it could not parse.
func FuzzServerStep(f *testing.F) {
	p := newPKI(f)
	srv := NewServer(func() *tls.Certificate { return p.host })
	params, _ := srv.Params()
	ch, first, err := NewClientHandshake(p.clientConfig(p.proxy), "localhost", strings.TrimPrefix(params, "&P=gsi,"))
	if err != nil {
		f.Fatal(err)
	}
	// after is the state after the first step, made once: each execution
	// starts from a copy instead of paying for a signature and a DH key.
	var after Handshake
	_, more, err := srv.Step(&after, first)
	if err != nil {
		f.Fatal(err)
	}
	second, err := ch.Next(more)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(first, false)
	f.Add(second, true)
	f.Add([]byte("gsi\x00\x00\x00\x03\xe8\x00\x00\x0b\xb9\xff\xff\xff\xff"), false)
	f.Fuzz(func(t *testing.T, cred []byte, afterFirst bool) {
		var hs Handshake
		if afterFirst {
			hs = after
		}
		chain, more, err := srv.Step(&hs, cred)
		if err == nil && chain == nil && more == nil {
			t.Fatal("no error, no chain, no next step")
		}
		if _, perr := parseBuffer(cred); perr != nil && err == nil {
			t.Fatalf("unparseable step accepted: %v", perr)
		}
	})
}
