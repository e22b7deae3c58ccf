// Package asuser runs this binary again as a less privileged user without
// handing it the caller's terminal: the child gets a session of its own (no
// controlling terminal), stdin from /dev/null, and its output through pipes
// that the parent copies with terminal control sequences removed. A service
// user that stops and ptraces such a child (its own process) finds no
// terminal of root's to push keystrokes into (TIOCSTI) and no way to send
// escape sequences to it: the lesson of su --pty and sudo's use_pty.
package asuser

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"sync"
	"syscall"
	"unicode/utf8"
)

// Creds are the numeric uid, gid and supplementary groups of u.
func Creds(u *user.User) (*syscall.Credential, error) {
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return nil, fmt.Errorf("user %s: uid %q: %w", u.Username, u.Uid, err)
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return nil, fmt.Errorf("user %s: gid %q: %w", u.Username, u.Gid, err)
	}
	c := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	if ids, err := u.GroupIds(); err == nil {
		for _, g := range ids {
			if n, err := strconv.Atoi(g); err == nil {
				c.Groups = append(c.Groups, uint32(n))
			}
		}
	}
	return c, nil
}

// Run runs /proc/self/exe (this binary, wherever it is and whatever
// directories above it u may not cross) with args as u, with env added to
// this process's environment, and waits for it. Its output goes to stdout
// and stderr, cleaned (Clean). The exit code is the child's; err is set
// only when it could not be run.
func Run(u *user.User, env []string, stdout, stderr io.Writer, args ...string) (int, error) {
	cred, err := Creds(u)
	if err != nil {
		return 0, err
	}
	cmd := exec.Command("/proc/self/exe", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: cred,
		// A new session: no controlling terminal, so no TIOCSTI into
		// ours and no job-control signals from it.
		Setsid: true,
	}
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = nil // /dev/null
	outR, outW, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return 0, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return 0, fmt.Errorf("run as %s: %w", u.Username, err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); copyClean(stdout, outR) }()
	go func() { defer wg.Done(); copyClean(stderr, errR) }()
	wg.Wait()
	outR.Close()
	errR.Close()
	err = cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	}
	if err != nil {
		return 0, fmt.Errorf("run as %s: %w", u.Username, err)
	}
	return 0, nil
}

// copyClean copies r to w through Clean, a read at a time.
func copyClean(w io.Writer, r io.Reader) {
	buf := make([]byte, 32<<10)
	var carry []byte // an incomplete UTF-8 sequence at the end of a read
	for {
		n, err := r.Read(buf)
		if n > 0 {
			b := append(carry, buf[:n]...)
			cut := len(b)
			// Hold back a rune cut by the read.
			for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
				if utf8.RuneStart(b[i]) {
					if !utf8.FullRune(b[i:]) {
						cut = i
					}
					break
				}
			}
			w.Write(Clean(b[:cut]))
			carry = append([]byte(nil), b[cut:]...)
		}
		if err != nil {
			if len(carry) > 0 {
				w.Write(Clean(carry))
			}
			return
		}
	}
}

// Clean returns b with what a terminal would take as a command removed:
// every C0 control character but newline and tab (ESC starts the escape
// sequences), DEL, the C1 controls (U+0080-U+009F, which some terminals
// take as CSI and OSC) and invalid UTF-8 are each replaced with '?'.
func Clean(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		switch {
		case r == utf8.RuneError && n <= 1,
			r < 0x20 && r != '\n' && r != '\t',
			r == 0x7f,
			r >= 0x80 && r <= 0x9f:
			out = append(out, '?')
		default:
			out = append(out, b[:n]...)
		}
		b = b[n:]
	}
	return out
}
