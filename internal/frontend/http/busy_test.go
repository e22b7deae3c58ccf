package httpfront

import (
	"bytes"
	"net"
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/connlimit"
	"github.com/hepcache/hepcache/internal/eventually"
)

// TestBusyOverConnectionBound: over the bound on connections, curl is
// answered at once with 503 and Retry-After, saying why (it was closed
// without a word, or left to time out in the listen queue once the
// descriptors were gone); /health is still answered; once a place is
// free, curl --retry, which honours Retry-After, gets the file.
func TestBusyOverConnectionBound(t *testing.T) {
	requireTool(t, "curl")
	lim := connlimit.New(1, 0)
	e := newEnv(t, envOpts{listen: func(ln net.Listener) net.Listener { return lim.Gate(0).Listener(ln) }})
	want := e.put("/f", 10_000, 1)
	held, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	eventually.True(t, func() bool { return lim.Counts().Admitted == 1 }, "the held connection admitted")

	status, hdr, body := curl(t, e.url+"/f")
	if status != "503" || header(hdr, "Retry-After") != "2" || !strings.Contains(string(body), "server busy: it serves at most 1 connections") {
		t.Fatalf("over the bound: %s, Retry-After %q, %q; want 503, 2 and why", status, header(hdr, "Retry-After"), body)
	}
	if status, _, _ := curl(t, e.url+"/health"); status != "200" {
		t.Errorf("/health over the bound: %s", status)
	}
	held.Close()
	status, _, body = curl(t, "--retry", "10", e.url+"/f")
	if status != "200" || !bytes.Equal(body, want) {
		t.Fatalf("after a place was freed: %s, %d bytes", status, len(body))
	}
}
