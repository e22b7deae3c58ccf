package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/server"
	"github.com/hepcache/hepcache/internal/syncbuf"
)

// startPOSIXCache runs hepcache over the POSIX origin file://data, without
// read-ahead, and returns it with its log; mutable lists namespaces
// declared mutable (files there are rewritten in place).
func startPOSIXCache(t *testing.T, data string, mutable ...string) (*server.Server, *syncbuf.Buffer) {
	t.Helper()
	cfg := config.Default()
	cfg.Server.Listen = "127.0.0.1:0"
	cfg.Cache.Dir = t.TempDir()
	cfg.Cache.Prefetch = 0 // the blocks a client reads, no more
	cfg.Origin.Default = "file://" + data
	for _, m := range mutable {
		cfg.Namespace = append(cfg.Namespace, config.NamespaceRule{Prefix: m, Mutable: true})
	}
	log := &syncbuf.Buffer{}
	srv, err := server.New(cfg, slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		if t.Failed() {
			t.Logf("hepcache log:\n%s", log)
		}
	})
	return srv, log
}

// rewriteInPlace writes fresh seeded bytes over the file p (same size, the
// same inode: an open file sees them) and sets its modification time to
// mtime; it returns the new bytes.
func rewriteInPlace(t *testing.T, p string, seed uint64, mtime time.Time) []byte {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, st.Size())
	r := rand.New(rand.NewPCG(seed, 99))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	return b
}

// pyReader is a Python client (the XRootD bindings) holding one file open:
// each line on its standard input is "OFFSET LENGTH" (a read) or "close";
// each read answers "ok <sha256 of the bytes>" or "error <message>".
const pyReader = `
import sys, hashlib
from XRootD import client
f = client.File()
st, _ = f.open(sys.argv[1])
if not st.ok: sys.exit("open: " + st.message)
print("open", flush=True)
for line in sys.stdin:
    if line.strip() == "close": break
    off, n = map(int, line.split())
    st, data = f.read(off, n)
    if st.ok: print("ok", hashlib.sha256(data).hexdigest(), flush=True)
    else: print("error", st.message.replace("\n", " "), flush=True)
f.close()
`

// pyClient drives pyReader.
type pyClient struct {
	t   *testing.T
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startPyReader(t *testing.T, url string) *pyClient {
	t.Helper()
	py := realclient.Python(t, realclient.DebianPython, "XRootD.client")
	cmd := exec.Command(py, "-c", pyReader, url)
	cmd.Env = realclient.Env()
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	p := &pyClient{t: t, cmd: cmd, in: in, out: bufio.NewReader(out)}
	if l := p.line(); l != "open" {
		t.Fatalf("python client: %q", l)
	}
	return p
}

func (p *pyClient) line() string {
	p.t.Helper()
	l, err := p.out.ReadString('\n')
	if err != nil {
		p.t.Fatalf("python client: %v (%q)", err, l)
	}
	return strings.TrimSpace(l)
}

// read reads n bytes at off and returns the answer line.
func (p *pyClient) read(off, n int) string {
	p.t.Helper()
	fmt.Fprintf(p.in, "%d %d\n", off, n)
	return p.line()
}

func (p *pyClient) close() {
	fmt.Fprintln(p.in, "close")
	p.in.Close()
	p.cmd.Wait()
}

func okSum(b []byte) string { return fmt.Sprintf("ok %x", sha256.Sum256(b)) }

// TestRewriteBetweenReadsOfAnOpenFile (issue 27, item 7): a file at a POSIX
// origin, in a namespace declared mutable, is rewritten in place (new
// bytes, a new modification time) between
// two reads of a client that holds it open through the cache. The read of
// block 10, which the cache fetches after the rewrite, fails, and so does
// every later read of that open file (block 0, cached before, included);
// the next open reads the new file. Before, the client read block 0 of the
// old version and then block 10 of the new one, both with success, while
// the log said the copy's readers get an I/O error.
func TestRewriteBetweenReadsOfAnOpenFile(t *testing.T) {
	data := t.TempDir()
	const mib = 1 << 20
	writeFile(t, data, "store/rw/f.root", 12*mib, 701)
	p := filepath.Join(data, "store/rw/f.root")
	old, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	srv, log := startPOSIXCache(t, data, "/store/rw/")
	url := "root://" + srv.RootAddr().String() + "//store/rw/f.root"
	c := startPyReader(t, url)
	if got := c.read(0, mib); got != okSum(old[:mib]) {
		t.Fatalf("block 0 before the rewrite: %q", got)
	}
	renewed := rewriteInPlace(t, p, 702, time.Now().Add(time.Minute))
	got := c.read(10*mib, mib)
	switch got {
	case okSum(renewed[10*mib : 11*mib]):
		t.Fatal("block 10 of the new version was read with success after block 0 of the old one")
	case okSum(old[10*mib : 11*mib]):
		t.Log("block 10 of the old version (no mix)")
	default:
		if !strings.HasPrefix(got, "error") {
			t.Fatalf("block 10 after the rewrite: %q", got)
		}
	}
	if got := c.read(0, mib); !strings.HasPrefix(got, "error") {
		t.Fatalf("block 0 once the rewrite was detected: %q, want an error", got)
	}
	if got := c.read(5*mib, 100); !strings.HasPrefix(got, "error") {
		t.Fatalf("block 5 once the rewrite was detected: %q, want an error", got)
	}
	c.close()
	if !strings.Contains(log.String(), "changed") {
		t.Fatal("the rewrite is not logged")
	}
	env := realclient.Env()
	if got := xrdcpSum(t, env, url); got != sha256.Sum256(renewed) {
		t.Fatalf("xrdcp after the rewrite: sha256 %s, want the new file", hex(got))
	}
}

// TestMixedDeliveryLogged (issue 27, item 7): a rewrite in place that keeps
// the size and the modification time is invisible to stat; a client that
// then reads the whole file through the cache (xrdcp) gets a mix of both
// versions with success. When the completed copy fails the origin's adler32
// the cache logs that delivery as "delivered mixed" (an error naming the
// client), and a client still holding the file open fails its next read.
// Before, only the dropped copy was logged.
func TestMixedDeliveryLogged(t *testing.T) {
	data := t.TempDir()
	const mib = 1 << 20
	writeFile(t, data, "store/rw/g.root", 8*mib, 703)
	p := filepath.Join(data, "store/rw/g.root")
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	srv, log := startPOSIXCache(t, data)
	url := "root://" + srv.RootAddr().String() + "//store/rw/g.root"
	a := startPyReader(t, url)
	if got := a.read(0, 2*mib); !strings.HasPrefix(got, "ok") {
		t.Fatalf("first read: %q", got)
	}
	renewed := rewriteInPlace(t, p, 704, st.ModTime())
	r := realclient.Run(t, realclient.Env(), "xrdcp", "-s", "-f", url, "-")
	if r.Err == nil && sha256.Sum256(r.Stdout) == sha256.Sum256(renewed) {
		t.Fatal("xrdcp got the new file whole: the test meant to make a mix")
	}
	eventually.True(t, func() bool { return srv.Cache().Stats().ChecksumFailures.Load() > 0 }, "the copy to fail its checksum")
	if r.Err != nil {
		// The mismatch was found before xrdcp's last bytes (the origin's
		// checksum raced them): it got no whole file, so nothing to log.
		t.Logf("xrdcp failed before getting the whole file: %s", firstLine(r.Stderr))
	} else {
		var line string
		eventually.True(t, func() bool {
			for _, l := range strings.Split(log.String(), "\n") {
				if strings.Contains(l, "delivered mixed") {
					line = l
				}
			}
			return line != ""
		}, "xrdcp's whole delivery of the mixed copy to be logged as delivered mixed")
		if !strings.Contains(line, "level=ERROR") || !strings.Contains(line, "protocol=root") || !strings.Contains(line, "client=127.0.0.1:") {
			t.Fatalf("delivered-mixed line lacks the client: %s", line)
		}
	}
	if got := a.read(4*mib, 100); !strings.HasPrefix(got, "error") {
		t.Fatalf("read of the client still holding the file, after the mismatch: %q, want an error", got)
	}
	a.close()
}
