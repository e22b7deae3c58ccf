// Package listenfds finds the listening sockets this process was handed,
// so that a restart or an upgrade refuses no connection: the sockets stay
// open across it, and connections made meanwhile wait in their backlog for
// the process that serves next. Two senders: systemd's socket activation
// (LISTEN_PID, LISTEN_FDS, LISTEN_FDNAMES; sd_listen_fds(3)), and the
// hepcache that hands its sockets over to the binary replacing it (`hepcache
// upgrade`: HEPCACHE_LISTEN_FDS, HEPCACHE_LISTEN_FDNAMES, see Env).
package listenfds

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// firstFD is the first descriptor passed (after stdin, stdout, stderr).
const firstFD = 3

// The variables that announce the sockets.
const (
	systemdPID   = "LISTEN_PID"
	systemdFDs   = "LISTEN_FDS"
	systemdNames = "LISTEN_FDNAMES"
	handoverFDs  = "HEPCACHE_LISTEN_FDS"
	handoverName = "HEPCACHE_LISTEN_FDNAMES"
)

// Set is the listening sockets handed to this process. Its methods are
// safe for concurrent use.
type Set struct {
	// mu protects ls.
	mu sync.Mutex
	ls []named
	// From says who handed them: "systemd", "upgrade", or "" for none.
	From string
}

type named struct {
	name string
	ln   net.Listener
}

// Inherit takes the sockets handed to this process, and clears the
// variables that announced them, so that a process this one starts does
// not take them again. Without any, it returns an empty Set.
func Inherit() (*Set, error) {
	s := &Set{}
	n, names := 0, ""
	switch {
	case os.Getenv(handoverFDs) != "":
		s.From = "upgrade"
		var err error
		if n, err = strconv.Atoi(os.Getenv(handoverFDs)); err != nil || n < 0 {
			return s, fmt.Errorf("%s=%q: want a number of descriptors", handoverFDs, os.Getenv(handoverFDs))
		}
		names = os.Getenv(handoverName)
	case os.Getenv(systemdFDs) != "":
		if pid, err := strconv.Atoi(os.Getenv(systemdPID)); err != nil || pid != os.Getpid() {
			break // meant for another process
		}
		s.From = "systemd"
		var err error
		if n, err = strconv.Atoi(os.Getenv(systemdFDs)); err != nil || n < 0 {
			return s, fmt.Errorf("%s=%q: want a number of descriptors", systemdFDs, os.Getenv(systemdFDs))
		}
		names = os.Getenv(systemdNames)
	}
	for _, v := range []string{systemdPID, systemdFDs, systemdNames, handoverFDs, handoverName} {
		os.Unsetenv(v)
	}
	nameList := strings.Split(names, ":")
	var errs []error
	for i := range n {
		fd := firstFD + i
		syscall.CloseOnExec(fd)
		name := ""
		if i < len(nameList) {
			name = nameList[i]
		}
		f := os.NewFile(uintptr(fd), fmt.Sprintf("listen-fd-%d", fd))
		ln, err := net.FileListener(f)
		f.Close() // FileListener holds a duplicate
		if err != nil {
			errs = append(errs, fmt.Errorf("descriptor %d (%q) from %s: %w", fd, name, s.From, err))
			continue
		}
		s.ls = append(s.ls, named{name: name, ln: ln})
	}
	return s, errors.Join(errs...)
}

// Len is the number of sockets not yet taken.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ls)
}

// Take removes from the set and returns the socket for name (systemd's
// FileDescriptorName=, or the name an upgrade gave it) and addr
// ("host:port", ":port" for every address): the one with both, else the
// one listening on addr, else the one named name; nil if none. (One
// systemd socket unit gives one name to all its sockets.)
func (s *Set) Take(name, addr string) net.Listener {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, match := range []func(named) bool{
		func(l named) bool { return l.name == name && sameAddr(l.ln.Addr(), addr) },
		func(l named) bool { return sameAddr(l.ln.Addr(), addr) },
		func(l named) bool { return l.name == name },
	} {
		for i, l := range s.ls {
			if match(l) {
				s.ls = append(s.ls[:i], s.ls[i+1:]...)
				return l.ln
			}
		}
	}
	return nil
}

// CloseRest closes the sockets nobody took and returns their addresses.
func (s *Set) CloseRest() []string {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, l := range s.ls {
		out = append(out, l.ln.Addr().String())
		l.ln.Close()
	}
	s.ls = nil
	return out
}

// sameAddr reports whether a listens on addr as a configuration names it:
// the same port, and the same address or, for an empty host, 0.0.0.0 or
// ::, a socket listening on every address.
func sameAddr(a net.Addr, addr string) bool {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return false
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || strconv.Itoa(ta.Port) != port {
		return false
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		return ta.IP.IsUnspecified()
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.Equal(ta.IP)
	}
	ips, err := net.LookupIP(host)
	if err != nil {
		return false
	}
	for _, ip := range ips {
		if ip.Equal(ta.IP) {
			return true
		}
	}
	return false
}

// Handover is a set of listening sockets ready to be handed to a new
// process: FDs are duplicates (close-on-exec) to pass as its descriptors
// 3, 4, ... (syscall.ProcAttr.Files), Env the variables announcing them.
//
// Raw descriptors, not *os.File for exec.Cmd.ExtraFiles: os.StartProcess
// takes them with File.Fd, which puts the shared socket in blocking mode,
// and this process's own accept on it would then block a thread and hold
// up its Close.
type Handover struct {
	FDs []int
	Env []string
}

// Prepare duplicates listeners (by name) for a new process. The caller
// closes them (Close) once the process started.
func Prepare(names []string, lns []net.Listener) (*Handover, error) {
	h := &Handover{}
	for i, ln := range lns {
		sc, ok := ln.(syscall.Conn)
		if !ok {
			h.Close()
			return nil, fmt.Errorf("listener %s (%s) cannot be handed over", names[i], ln.Addr())
		}
		rc, err := sc.SyscallConn()
		if err != nil {
			h.Close()
			return nil, fmt.Errorf("listener %s (%s): %w", names[i], ln.Addr(), err)
		}
		var nfd int
		var derr error
		if err := rc.Control(func(fd uintptr) { nfd, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); err != nil || derr != nil {
			h.Close()
			return nil, fmt.Errorf("listener %s (%s): dup: %w", names[i], ln.Addr(), errors.Join(err, derr))
		}
		h.FDs = append(h.FDs, nfd)
	}
	h.Env = []string{handoverFDs + "=" + strconv.Itoa(len(h.FDs)), handoverName + "=" + strings.Join(names, ":")}
	return h, nil
}

// Close closes the duplicates (the new process has its own).
func (h *Handover) Close() {
	for _, fd := range h.FDs {
		syscall.Close(fd)
	}
	h.FDs = nil
}
