package acceptretry

import (
	"errors"
	"log/slog"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestOutOfDescriptors runs a real listener out of descriptors (the
// process's soft RLIMIT_NOFILE lowered to what it holds): Accept fails
// with EMFILE, backs off, counts it, and hands over the waiting
// connection once descriptors are back.
func TestOutOfDescriptors(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	st := &Stats{}
	ln := Wrap(inner, "test", slog.New(slog.DiscardHandler), st)
	defer ln.Close()
	// The back-off waits until the test says so, once EMFILE was seen.
	retried := make(chan struct{}, 1)
	resume := make(chan struct{})
	ln.sleep = func(time.Duration, <-chan struct{}) {
		select {
		case retried <- struct{}{}:
			<-resume
		default:
		}
	}
	c, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	// A descriptor takes the lowest free number and fails with EMFILE
	// when that is at the limit: the limit becomes that number.
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	low := old
	low.Cur = uint64(f.Fd())
	f.Close()
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer restore()

	type result struct {
		c   net.Conn
		err error
	}
	got := make(chan result, 1)
	go func() {
		s, err := ln.Accept()
		got <- result{s, err}
	}()
	select {
	case <-retried:
	case r := <-got:
		restore()
		t.Fatalf("Accept with no descriptor left returned %v, %v before failing once", r.c, r.err)
	}
	restore()
	close(resume)
	r := <-got
	if r.err != nil {
		t.Fatalf("Accept after EMFILE: %v", r.err)
	}
	r.c.Close()
	if n := st.Errors.Load(); n < 1 {
		t.Errorf("%d failed accepts counted", n)
	}
}

// failing is a listener whose Accept always fails as one out of
// descriptors does.
type failing struct{ net.Listener }

func (failing) Accept() (net.Conn, error) {
	return nil, &net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
}

// TestCloseEndsBackoff: Close ends an Accept that is backing off.
func TestCloseEndsBackoff(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := Wrap(failing{inner}, "test", slog.New(slog.DiscardHandler), nil)
	done := make(chan error, 1)
	go func() { _, err := ln.Accept(); done <- err }()
	ln.Close()
	if err := <-done; err == nil || !OutOfDescriptors(err) && !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
}
