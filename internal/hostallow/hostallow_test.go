package hostallow

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// fakeDNS answers from tables, as a site's DNS would.
type fakeDNS struct {
	ptr  map[string][]string
	host map[string][]string
}

func (f fakeDNS) LookupAddr(_ context.Context, a string) ([]string, error) { return f.ptr[a], nil }
func (f fakeDNS) LookupHost(_ context.Context, h string) ([]string, error) { return f.host[h], nil }

// TestPatterns: XRootD's host patterns, one * anywhere (issue 34: "xrd.allow
// host wn*.t2.example.edu" was refused).
func TestPatterns(t *testing.T) {
	dns := fakeDNS{ptr: map[string][]string{}, host: map[string][]string{}}
	for i, name := range []string{"wn12.t2.example.edu", "wn.t2.example.edu", "login.t2.example.edu", "wn3.t3.example.edu"} {
		ip := "192.0.2." + string(rune('1'+i))
		dns.ptr[ip] = []string{name + "."}
		dns.host[name] = []string{ip}
	}
	l, err := New([]string{"wn*.t2.example.edu"}, dns)
	if err != nil {
		t.Fatal(err)
	}
	for ip, want := range map[string]bool{"192.0.2.1": true, "192.0.2.2": true, "192.0.2.3": false, "192.0.2.4": false} {
		if got := l.Allowed(context.Background(), net.ParseIP(ip)); got != want {
			t.Errorf("%s (%s): allowed %v, want %v", ip, dns.ptr[ip], got, want)
		}
	}
}

func TestAllowed(t *testing.T) {
	dns := fakeDNS{
		ptr: map[string][]string{
			"192.0.2.10": {"wn1.site.example."},
			"192.0.2.11": {"liar.site.example."}, // no forward record back to it
			"192.0.2.12": {"WN2.Site.Example"},
			"192.0.2.13": {"evilsite.example."},
		},
		host: map[string][]string{
			"wn1.site.example":  {"192.0.2.10"},
			"liar.site.example": {"198.51.100.1"},
			"wn2.site.example":  {"192.0.2.12"},
			"evilsite.example":  {"192.0.2.13"},
		},
	}
	l, err := New([]string{"*.site.example", "10.0.0.0/8", "2001:db8::1", "203.0.113.5"}, dns)
	if err != nil {
		t.Fatal(err)
	}
	for ip, want := range map[string]bool{
		"192.0.2.10":  true,
		"192.0.2.11":  false, // PTR not confirmed forward
		"192.0.2.12":  true,  // case and trailing dot
		"192.0.2.13":  false, // suffix without the dot
		"10.200.0.1":  true,
		"11.0.0.1":    false,
		"2001:db8::1": true,
		"2001:db8::2": false,
		"203.0.113.5": true,
		"203.0.113.6": false,
	} {
		if got := l.Allowed(context.Background(), net.ParseIP(ip)); got != want {
			t.Errorf("%s: allowed %v, want %v", ip, got, want)
		}
	}
	for _, bad := range []string{"a*b*.example", "+trusted", "10.0.0.0/99", ""} {
		if _, err := New([]string{bad}, dns); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestListener: a refused client is disconnected at once; an allowed one
// is accepted.
func TestListener(t *testing.T) {
	for _, tc := range []struct {
		allow []string
		ok    bool
	}{{[]string{"10.0.0.0/8"}, false}, {[]string{"127.0.0.0/8"}, true}} {
		inner, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		l, _ := New(tc.allow, fakeDNS{})
		ln := l.Listener(inner, nil)
		got := make(chan net.Conn, 1)
		go func() {
			if c, err := ln.Accept(); err == nil {
				got <- c
			}
		}()
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if tc.ok {
			select {
			case s := <-got:
				s.Close()
			case <-time.After(10 * time.Second):
				t.Fatalf("%v: allowed client not accepted", tc.allow)
			}
		} else {
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Read(make([]byte, 1)); err == nil {
				t.Fatalf("%v: refused client read data", tc.allow)
			} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("%v: refused client left connected", tc.allow)
			}
		}
		c.Close()
		ln.Close()
	}
}

// flakyListener fails its first accepts with EMFILE, as a listener does
// while the process is out of descriptors, then accepts from the real one.
type flakyListener struct {
	net.Listener
	fails atomic.Int32
}

func (f *flakyListener) Accept() (net.Conn, error) {
	if f.fails.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return f.Listener.Accept()
}

// TestAcceptSurvivesEMFILE: one EMFILE ended the accept loop for good,
// and with it the front end behind the allow-list (issue 35: root:// and
// HTTP stayed dead after the descriptor flood was gone). It backs off and
// accepts again; only Close ends it.
func TestAcceptSurvivesEMFILE(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fl := &flakyListener{Listener: inner}
	fl.fails.Store(3)
	l, err := New([]string{"127.0.0.1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln := l.Listener(fl, slog.New(slog.DiscardHandler))
	c, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatalf("the allow-list's listener gave up after EMFILE: %v", err)
	}
	s.Close()
	ln.Close()
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
	}
}
