//go:build linux && amd64

package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/syncbuf"
)

// attackEnv, when set, makes TestHelperInjectKeys the attacker: it names
// the pid whose terminal it pushes keystrokes into.
const attackEnv = "HEPCACHE_TEST_ATTACK_PID"

// injected is what the attacker types into root's terminal.
const injected = "id>/tmp/pwned\n"

// TestCheckGivesNoTerminal is issue 36 item 1 as the attacker ran it: root
// runs `hepcache check --user nobody` in a real terminal; nobody, the
// service user, ptraces the check's child (its own process) and makes it
// push keystrokes into its terminal with TIOCSTI. The child must have no
// terminal of root's: none of the keystrokes may reach the terminal's
// input, the child must be in a session of its own with no controlling
// terminal, and what it prints reaches root's terminal without escape
// sequences.
func TestCheckGivesNoTerminal(t *testing.T) {
	realclient.RequireRoot(t, "check --user nobody and a second uid")
	setpriv := realclient.Require(t, "setpriv")
	top, bin := crossableTop(t, "hepcache-tty-")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	attacker := filepath.Join(top, "attacker")
	copyFile(t, self, attacker, 0o755)
	// The config is a FIFO: the child, as nobody, blocks opening it until
	// the test writes, which gives the attacker its time.
	fifo := filepath.Join(top, "hepcache.toml")
	if err := syscall.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chmod(fifo, 0o666)

	master, slave := openPTY(t)
	chk := exec.Command(bin, "check", "--user", "nobody", "--config", fifo)
	chk.Stdin, chk.Stdout, chk.Stderr = slave, slave, slave
	// As a shell starts a command: the terminal is its controlling one.
	chk.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	var out syncbuf.Buffer
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			out.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	if err := chk.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- chk.Wait() }()
	defer func() {
		chk.Process.Kill()
		<-exited
	}()

	child := waitChild(t, chk.Process.Pid, 65534)
	stat := procStat(t, child)
	parentSid := procStat(t, chk.Process.Pid)[3]
	t.Logf("child %d: session %s (parent's %s), tty_nr %s", child, stat[3], parentSid, stat[4])
	if stat[4] != "0" {
		t.Errorf("the child running as nobody has a controlling terminal (tty_nr %s)", stat[4])
	}
	if stat[3] == parentSid {
		t.Errorf("the child running as nobody is in root's session %s", parentSid)
	}
	for fd := 0; fd <= 2; fd++ {
		if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", child, fd)); strings.HasPrefix(l, "/dev/pts/") || strings.HasPrefix(l, "/dev/tty") {
			t.Errorf("the child's fd %d is root's terminal %s", fd, l)
		}
	}

	// The attack, as nobody.
	att := exec.Command(setpriv, "--reuid", "nobody", "--regid", "nogroup", "--clear-groups",
		attacker, "-test.run", "^TestHelperInjectKeys$", "-test.v")
	att.Env = append(os.Environ(), attackEnv+"="+strconv.Itoa(child), "HEPCACHE_BIN="+bin)
	attOut, _ := att.CombinedOutput()
	t.Logf("attacker: %s", attOut)

	// What the attacker typed is in the terminal's input queue, where
	// root's shell would read it once check exits.
	typed := readPending(t, slave)
	if strings.Contains(typed, strings.TrimSpace(injected)) {
		t.Errorf("the service user typed into root's terminal: %q", typed)
	}

	// Release the child with a config whose error quotes an escape
	// sequence: it must reach the terminal cleaned.
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(w, "[cache]\ndir = \"%s/\\u001b]0;owned\\u0007\"\n[origin]\ndefault = \"root://127.0.0.1:1\"\n", top)
	w.Close()
	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatal("check did not finish")
	}
	exited <- nil
	time.Sleep(100 * time.Millisecond) // the reader drains the master
	if o := out.String(); strings.Contains(o, "\x1b") {
		t.Errorf("an escape sequence reached root's terminal: %q", o)
	} else {
		t.Logf("terminal: %q", o)
	}
}

// TestHelperInjectKeys is the attacker of TestCheckGivesNoTerminal, run as
// the service user: it stops the process named by attackEnv with ptrace
// and makes it call ioctl(fd, TIOCSTI) on its fds 0-2 for each byte of
// injected.
func TestHelperInjectKeys(t *testing.T) {
	pidS := os.Getenv(attackEnv)
	if pidS == "" {
		return // not the attacker
	}
	pid, _ := strconv.Atoi(pidS)
	n, err := injectKeys(pid, injected)
	fmt.Printf("uid %d: %d keystrokes pushed into pid %d's terminal: %v\n", os.Getuid(), n, pid, err)
}

// injectKeys ptraces a thread of pid stopped in a system call and makes it
// run ioctl(fd, TIOCSTI, &c) for every byte c of text on the first of fds
// 0-2 that accepts it. It returns how many bytes were pushed.
func injectKeys(pid int, text string) (int, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, err
	}
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		if err := syscall.PtraceAttach(tid); err != nil {
			return 0, fmt.Errorf("ptrace attach %d: %w", tid, err)
		}
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(tid, &ws, syscall.WALL, nil); err != nil {
			return 0, err
		}
		n, err := injectInto(tid, text)
		syscall.PtraceDetach(tid)
		if !errors.Is(err, errNotInSyscall) {
			return n, err
		}
	}
	return 0, errors.New("no thread stopped in a system call")
}

var errNotInSyscall = errors.New("thread not in a system call")

func injectInto(tid int, text string) (int, error) {
	var saved syscall.PtraceRegs
	if err := syscall.PtraceGetRegs(tid, &saved); err != nil {
		return 0, err
	}
	insn := make([]byte, 2)
	if _, err := syscall.PtracePeekText(tid, uintptr(saved.Rip-2), insn); err != nil || insn[0] != 0x0f || insn[1] != 0x05 {
		return 0, errNotInSyscall
	}
	defer syscall.PtraceSetRegs(tid, &saved)
	addr := uintptr((saved.Rsp - 1024) &^ 15)
	orig := make([]byte, 8)
	syscall.PtracePeekData(tid, addr, orig)
	defer syscall.PtracePokeData(tid, addr, orig)
	pushed := 0
	for fd := uint64(0); fd <= 2 && pushed == 0; fd++ {
		for i := 0; i < len(text); i++ {
			word := make([]byte, 8)
			copy(word, orig)
			word[0] = text[i]
			if _, err := syscall.PtracePokeData(tid, addr, word); err != nil {
				return pushed, err
			}
			r := saved
			r.Rip = saved.Rip - 2
			r.Rax = syscall.SYS_IOCTL
			r.Orig_rax = ^uint64(0) // no syscall restart on resume
			r.Rdi, r.Rsi, r.Rdx = fd, syscall.TIOCSTI, uint64(addr)
			if err := syscall.PtraceSetRegs(tid, &r); err != nil {
				return pushed, err
			}
			if err := syscall.PtraceSingleStep(tid); err != nil {
				return pushed, err
			}
			var ws syscall.WaitStatus
			if _, err := syscall.Wait4(tid, &ws, syscall.WALL, nil); err != nil {
				return pushed, err
			}
			if err := syscall.PtraceGetRegs(tid, &r); err != nil {
				return pushed, err
			}
			if int64(r.Rax) < 0 {
				if i == 0 {
					fmt.Printf("ioctl(%d, TIOCSTI): %v\n", fd, syscall.Errno(-int64(r.Rax)))
				}
				break
			}
			pushed++
		}
	}
	return pushed, nil
}

// openPTY opens a new pseudo-terminal pair.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Fatal(e)
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Fatal(e)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); m.Close() })
	return m, s
}

// readPending returns what is waiting in the terminal's input queue.
func readPending(t *testing.T, slave *os.File) string {
	t.Helper()
	var n int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, slave.Fd(), syscall.TIOCINQ, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Fatal(e)
	}
	if n == 0 {
		return ""
	}
	b := make([]byte, n)
	k, _ := syscall.Read(int(slave.Fd()), b)
	return string(b[:max(k, 0)])
}

// waitChild waits for a child of parent running as uid.
func waitChild(t *testing.T, parent, uid int) int {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			if err != nil {
				continue
			}
			if bytes.Contains(b, []byte(fmt.Sprintf("\nPPid:\t%d\n", parent))) &&
				bytes.Contains(b, []byte(fmt.Sprintf("\nUid:\t%d\t", uid))) {
				time.Sleep(200 * time.Millisecond) // into its blocking open
				return pid
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no child of %d running as uid %d", parent, uid)
	return 0
}

// procStat returns the fields of /proc/pid/stat after the command name:
// [0] state, [1] ppid, [2] pgrp, [3] session, [4] tty_nr, ...
func procStat(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.LastIndexByte(b, ')')
	return strings.Fields(string(b[i+1:]))
}

// TestAdoptRefusesSwappableCacheDir is issue 36 item 2: from-xcache put
// cache.dir inside the tree XCache's user owns, and that user swapped it
// for a link to a root-only directory: root created data/, meta/ and the
// lock in it. A cache.dir another user could swap is refused before
// anything is created, and nothing in the root-only directory changes.
func TestAdoptRefusesSwappableCacheDir(t *testing.T) {
	realclient.RequireRoot(t, "adoption as root of another user's tree")
	top, _ := crossableTop(t, "hepcache-adopt-swap-")
	xc := filepath.Join(top, "xcache")
	os.Mkdir(xc, 0o755)
	os.Chown(xc, 65534, 65534) // XCache's user: nobody
	secret := filepath.Join(top, "secret")
	os.Mkdir(secret, 0o700)
	os.WriteFile(filepath.Join(secret, "shadow"), []byte("root only"), 0o600)
	planted := filepath.Join(xc, ".hepcache")
	if err := os.Symlink(secret, planted); err != nil {
		t.Fatal(err)
	}
	os.Lchown(planted, 65534, 65534)

	out, err := exec.Command(hepcacheBin, "adopt-xcache", "--cache-dir", planted, "--origin", "root://127.0.0.1:1", xc).CombinedOutput()
	t.Logf("adopt-xcache: %v\n%s", err, out)
	if err == nil {
		t.Error("adoption into a cache.dir XCache's user can swap succeeded")
	}
	if !strings.Contains(string(out), "another user could replace it") {
		t.Errorf("the refusal does not say why")
	}
	ents, _ := os.ReadDir(secret)
	if len(ents) != 1 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("root's directory was written through the link: %v", names)
	}
	var st syscall.Stat_t
	if syscall.Stat(filepath.Join(secret, "shadow"), &st) != nil || st.Uid != 0 {
		t.Errorf("root's file changed owner: uid %d", st.Uid)
	}
}
