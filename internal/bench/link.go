package bench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hepcache/hepcache/internal/wan"
)

// Link runs the emulated wide-area link (package wan) in this process until
// it is interrupted: `hepcache bench link`, which `bench wan --link
// process` starts so that the link's CPU is not the benchmark's. It prints
// "listening ADDR" on out once it accepts connections.
func Link(cfg wan.Config, out io.Writer) error {
	p, err := wan.New(&cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	fmt.Fprintf(out, "listening %s\n", p.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	return nil
}

// linkProc is a link running as a child process (`bench link`).
type linkProc struct {
	cmd  *exec.Cmd
	addr string
}

func startLinkProc(bin, target string, rtt time.Duration, bw int64) (*linkProc, error) {
	cmd := exec.Command(bin, "bench", "link", "--target", target, "--rtt", rtt.String(), "--bandwidth", strconv.FormatInt(bw, 10))
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the link process: %w", err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err == nil && !ok {
		err = errors.New("no listening address")
	}
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("the link process did not start: %q: %w", line, err)
	}
	return &linkProc{cmd: cmd, addr: addr}, nil
}

func (l *linkProc) close() {
	l.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { l.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		l.cmd.Process.Kill()
		<-done
	}
}
