package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hepcache/hepcache/internal/admin"
	"github.com/hepcache/hepcache/internal/sdnotify"
	"github.com/hepcache/hepcache/internal/server"
)

// A hand-over (hepcache upgrade, SIGUSR2), as nginx and HAProxy do it: the
// serving process starts the binary now installed at its path with its
// listening sockets (listenfds) and a pipe; the new process checks its
// configuration and says "ready" on the pipe (and, under systemd, that it
// is the service's main process now); the old one then finishes its
// requests as on SIGTERM and lets go of the cache, which the new one takes
// and serves. The sockets never close: a client connecting meanwhile waits
// in their backlog, none is refused. If the new binary fails before it is
// ready, the old one goes on serving.

// readyFDEnv names the descriptor of the pipe the new process says it is
// ready on.
const readyFDEnv = "HEPCACHE_UPGRADE_READY_FD"

// handOverTimeout bounds the new process's start up to "ready".
const handOverTimeout = 2 * time.Minute

// finalHandOverGrace is how long, beyond server.shutdown_timeout, the new
// process waits for the old one to let go of the cache.
const finalHandOverGrace = 30 * time.Second

// selfPath is this binary's path as started, resolved at start-up: an
// upgrade runs what is installed there now (/proc/self/exe would be the
// old binary).
var selfPath = func() string {
	p := os.Args[0]
	if !strings.Contains(p, "/") {
		if lp, err := exec.LookPath(p); err == nil {
			p = lp
		}
	}
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	return p
}()

// handOver starts the new process with s's sockets and waits until it is
// ready to take over; it returns its pid.
func handOver(s *server.Server, args []string, log *slog.Logger) (int, error) {
	h, err := s.HandOver()
	if err != nil {
		return 0, err
	}
	defer h.Close()
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		return 0, fmt.Errorf("pipe: %w", err)
	}
	r := os.NewFile(uintptr(p[0]), "upgrade-ready")
	defer r.Close()
	// stdin, stdout and stderr, the sockets, then the pipe.
	files := append(append([]uintptr{0, 1, 2}, fdsOf(h.FDs)...), uintptr(p[1]))
	env := append(append(os.Environ(), h.Env...), readyFDEnv+"="+strconv.Itoa(len(files)-1))
	pid, err := syscall.ForkExec(selfPath, append([]string{selfPath, "serve"}, args...), &syscall.ProcAttr{Env: env, Files: files})
	syscall.Close(p[1])
	if err != nil {
		return 0, fmt.Errorf("start %s: %w", selfPath, err)
	}
	proc, _ := os.FindProcess(pid)
	exited := make(chan error, 1)
	go func() {
		st, err := proc.Wait()
		if err == nil && !st.Success() {
			err = errors.New(st.String())
		}
		exited <- err
	}()
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(r).ReadString('\n')
		switch {
		case err == nil && strings.TrimSpace(line) == "ready":
			ready <- nil
		case strings.HasPrefix(line, "error: "):
			ready <- fmt.Errorf("the new process refused to start: %s", strings.TrimSpace(strings.TrimPrefix(line, "error: ")))
		default:
			if err == nil {
				err = errors.New("no ready line")
			}
			ready <- fmt.Errorf("the new process (pid %d) did not get ready (%q): %w", pid, line, err)
		}
	}()
	select {
	case err := <-ready:
		if err != nil {
			select {
			case <-exited:
			case <-time.After(time.Second):
				proc.Kill()
			}
			return 0, fmt.Errorf("%s: %w", selfPath, err)
		}
	case <-time.After(handOverTimeout):
		proc.Kill()
		return 0, fmt.Errorf("the new process (pid %d) was not ready within %v", pid, handOverTimeout)
	}
	return pid, nil
}

func fdsOf(fds []int) []uintptr {
	out := make([]uintptr, len(fds))
	for i, fd := range fds {
		out[i] = uintptr(fd)
	}
	return out
}

// upgradeReady is the new process's side: ready, once its configuration
// passed, tells systemd it is the service's main process now (the unit's
// NotifyAccess=all) and the old process that it is ready; failed tells the
// old process why it will not serve (it goes on). Both nil when this
// process was not started by a hand-over.
func upgradeReady(log *slog.Logger) (ready func() error, failed func(error)) {
	fd, err := strconv.Atoi(os.Getenv(readyFDEnv))
	os.Unsetenv(readyFDEnv)
	if err != nil || fd < 3 {
		return nil, nil
	}
	syscall.CloseOnExec(fd)
	f := os.NewFile(uintptr(fd), "upgrade-ready")
	ready = func() error {
		sdnotify.Notify("MAINPID=" + strconv.Itoa(os.Getpid()))
		defer f.Close()
		if _, err := f.WriteString("ready\n"); err != nil {
			return fmt.Errorf("tell the process handing over that this one is ready: %w", err)
		}
		log.Info("upgrade: configuration checked; waiting for the process handing over to finish its requests")
		return nil
	}
	failed = func(err error) {
		f.WriteString("error: " + strings.ReplaceAll(err.Error(), "\n", "; ") + "\n")
		f.Close()
	}
	return ready, failed
}

func runUpgrade(ctx context.Context, args []string) error {
	fs := newFlagSet("upgrade", `Asks the running server through its admin socket to hand its listening sockets
over to the binary now installed at its path (after a package upgrade), as
SIGUSR2 does: the new binary checks the configuration; if it fails, the old
one goes on serving (exit status 1); else the old one finishes its requests and
lets go of the cache, which the new one takes. The sockets stay open all along:
no client connection is refused. Under systemd the unit needs NotifyAccess=all
(the packaged one has it).`, "hepcache upgrade [--config FILE | --cache-dir DIR]")
	dir := fs.String("cache-dir", "", "cache directory of the server (or use --config)")
	cfgPath := fs.String("config", "", "config file to take cache.dir from (default "+defaultConfigPath+")")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	d, err := cacheDirFrom(*dir, *cfgPath)
	if err != nil {
		return err
	}
	msg, err := admin.Upgrade(d)
	switch {
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("no server runs on %s: start it (systemctl start hepcache)", d)
	case err != nil:
		return err
	}
	fmt.Println(msg)
	return nil
}
