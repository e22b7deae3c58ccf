package listenfds

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestMain makes the test binary also the process that inherits the
// sockets (HEPCACHE_LISTENFDS_CHILD set): it takes them and prints what it
// got.
func TestMain(m *testing.M) {
	if os.Getenv("HEPCACHE_LISTENFDS_CHILD") != "" {
		s, err := Inherit()
		if err != nil {
			fmt.Println("error:", err)
		}
		fmt.Println("from", s.From)
		for _, want := range strings.Split(os.Getenv("HEPCACHE_LISTENFDS_CHILD"), ",") {
			name, addr, _ := strings.Cut(want, "=")
			if ln := s.Take(name, addr); ln != nil {
				fmt.Println("took", name, ln.Addr())
			}
		}
		fmt.Println("left", s.CloseRest())
		fmt.Println("env", os.Getenv(handoverFDs), os.Getenv(systemdFDs))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestHandOver: the sockets handed over reach the new process, found by
// name or by address, and the variables announcing them are cleared;
// systemd's are taken only by the process they name.
func TestHandOver(t *testing.T) {
	var lns []net.Listener
	for range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		lns = append(lns, ln)
	}
	h, err := Prepare([]string{"root", "http", "x"}, lns)
	if err != nil {
		t.Fatal(err)
	}
	var files []*os.File // own the duplicates from here
	for _, fd := range h.FDs {
		f := os.NewFile(uintptr(fd), "dup")
		defer f.Close()
		files = append(files, f)
	}
	h.FDs = nil
	run := func(want string, env ...string) string {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.ExtraFiles = files
		cmd.Env = append(append(os.Environ(), "HEPCACHE_LISTENFDS_CHILD="+want), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return string(out)
	}
	out := run("root=,nope="+lns[1].Addr().String(), h.Env...)
	for _, w := range []string{"from upgrade", "took root " + lns[0].Addr().String(), "took nope " + lns[1].Addr().String(),
		"left [" + lns[2].Addr().String() + "]", "env  \n"} {
		if !strings.Contains(out, w) {
			t.Errorf("child output lacks %q:\n%s", w, out)
		}
	}
	// systemd's variables name another process: nothing is taken.
	out = run("root=", "LISTEN_FDS=3", "LISTEN_PID="+strconv.Itoa(os.Getpid()))
	if !strings.Contains(out, "from \n") || strings.Contains(out, "took") {
		t.Errorf("systemd's sockets for another pid taken:\n%s", out)
	}
}

func TestSameAddr(t *testing.T) {
	any6 := &net.TCPAddr{IP: net.IPv6unspecified, Port: 1094}
	lo := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1094}
	for _, tc := range []struct {
		a    net.Addr
		addr string
		want bool
	}{
		{any6, ":1094", true}, {any6, "0.0.0.0:1094", true}, {any6, ":1095", false}, {any6, "127.0.0.1:1094", false},
		{lo, "127.0.0.1:1094", true}, {lo, ":1094", false}, {lo, "localhost:1094", true},
	} {
		if got := sameAddr(tc.a, tc.addr); got != tc.want {
			t.Errorf("sameAddr(%v, %q) = %v", tc.a, tc.addr, got)
		}
	}
}
