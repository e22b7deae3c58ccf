package security

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/authz"
	httpfront "github.com/hepcache/hepcache/internal/frontend/http"
	xrdfront "github.com/hepcache/hepcache/internal/frontend/xrootd"
	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/xrootd/client"
	"github.com/hepcache/hepcache/internal/xrootd/proto"
)

// openAll lets everyone read and fetch everything, so that only path
// handling stands between a client and the files outside the namespace.
var openAll = func(c *Config) { c.Rules = []authz.Rule{{Path: "/", Read: []string{"anonymous"}}} }

// TestPathAttacks sends paths that try to leave the namespace (.., //,
// encoded slashes and dots, NUL bytes, over-long paths, forwarding to an
// origin not on the allow-list) through both front ends, with real clients
// where they can send them and a raw Go client where they cannot. None
// reaches the origin outside the namespace, none is served, and nothing is
// written outside the cache directory.
func TestPathAttacks(t *testing.T) {
	p := newPKI(t)
	s := newStack(t, p, openAll)
	ctx := context.Background()
	long := "/public/" + strings.Repeat("a", 5000)

	t.Run("http", func(t *testing.T) {
		for _, tc := range []struct{ name, path string }{
			{"dotdot", "/public/../../../etc/passwd"},
			{"encoded dots", "/public/%2e%2e/%2e%2e/etc/passwd"},
			{"encoded slashes", "/public%2F..%2F..%2Fetc%2Fpasswd"},
			{"double encoded", "/public/%252e%252e/%252e%252e/etc/passwd"},
			{"NUL", "/public/a.root%00/../../etc/passwd"},
			{"over-long", long},
			{"backslashes", "/public/..\\..\\etc\\passwd"},
			{"forwarding elsewhere", "/root://evil.example:1094//etc/passwd"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				code, body := s.curl(t, tc.path, "--path-as-is")
				if code < 400 || strings.Contains(body, "root:x:0:0") {
					t.Fatalf("%s: %d %.200q", tc.path, code, body)
				}
			})
		}
		// Redundant slashes and dots are cleaned, not refused.
		if code, body := s.curl(t, "//public//./a.root", "--path-as-is"); code != http.StatusOK || body != string(s.data["/public/a.root"]) {
			t.Fatalf("//public//./a.root: %d", code)
		}
	})

	t.Run("root raw", func(t *testing.T) {
		c, err := client.New(&client.Config{DialTimeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		addr := strings.TrimPrefix(s.root, "root://")
		for _, tc := range []struct {
			name, path string
			code       proto.ErrorCode
		}{
			{"dotdot", "/public/../../../etc/passwd", proto.ErrArgInvalid},
			{"NUL", "/public/a.root\x00/../../../etc/passwd", proto.ErrArgInvalid},
			{"over-long", long, proto.ErrArgTooLong},
			{"relative", "etc/passwd", proto.ErrArgInvalid},
			{"forwarding elsewhere", "/root://evil.example:1094//etc/passwd", proto.ErrNotAuthorized},
			{"forwarding with dotdot", "/root://evil.example:1094//../etc/passwd", proto.ErrArgInvalid},
		} {
			t.Run(tc.name, func(t *testing.T) {
				f, err := c.Open(ctx, addr, tc.path)
				if err == nil {
					f.Close(ctx)
					t.Fatalf("opened %q", tc.path)
				}
				var pe *proto.Error
				if !errors.As(err, &pe) || pe.Code != tc.code {
					t.Fatalf("open %q: %v, want %v", tc.path, err, tc.code)
				}
			})
		}
		// Cleaned, not refused: "//public/./x/../a.root" is /public/a.root.
		f, err := c.Open(ctx, addr, "//public/./x/../a.root")
		if err != nil {
			t.Fatalf("cleanable path: %v", err)
		}
		f.Close(ctx)
	})

	t.Run("xrdcp", func(t *testing.T) {
		for _, path := range []string{"//public/../../../etc/passwd", "//public/%2e%2e/%2e%2e/etc/passwd", "//root://evil.example:1094//etc/passwd"} {
			got, r := s.xrdcp(t, s.xrdEnv(t), s.root+path)
			if r.Err == nil {
				t.Fatalf("xrdcp %s succeeded: %.100q", path, got)
			}
			t.Logf("xrdcp %s: %s", path, bytes.TrimSpace(append(r.Stdout, r.Stderr...)))
		}
	})

	for _, p := range s.rec.Paths() {
		if !strings.HasPrefix(p, "/public/") && !strings.HasPrefix(p, "/store/") {
			t.Errorf("the origin was asked for %q", p)
		}
		if strings.Contains(p, "//") || strings.ContainsRune(p, 0) {
			t.Errorf("the origin was asked for an unclean path %q", p)
		}
		for _, seg := range strings.Split(p, "/") {
			// A backslash is an ordinary character in a POSIX name:
			// "..\x" is one component, not a climb.
			if seg == ".." || seg == "." {
				t.Errorf("the origin was asked for %q, with a %q component", p, seg)
			}
		}
	}
	// Everything the cache wrote is below its directory.
	root := filepath.Dir(s.cacheDir)
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && p != root && !strings.HasPrefix(p, s.cacheDir) {
			t.Errorf("file outside the cache directory: %s", p)
		}
		return nil
	})
}

// TestSlowClientsDoNotTieUpTheServer opens many connections that stall in
// the handshake (root://, roots://) or trickle their headers (https://), as
// a slowloris attack does. Real clients are served meanwhile, and the
// server closes every stalled connection when its handshake timeout ends.
func TestSlowClientsDoNotTieUpTheServer(t *testing.T) {
	p := newPKI(t)
	s := newStack(t, p, openAll, func(x *xrdfront.Config, h *httpfront.Config) {
		x.HandshakeTimeout = time.Second
		h.ReadHeaderTimeout = time.Second
	})
	s.fill(t, "/public/a.root")
	xaddr := strings.TrimPrefix(s.root, "root://")
	haddr := strings.TrimPrefix(s.https, "https://")
	const n = 40
	var conns []net.Conn
	for i := 0; i < n; i++ {
		// root://: half a handshake, then silence.
		c, err := net.Dial("tcp", xaddr)
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte{0, 0, 0, 0, 0, 0})
		conns = append(conns, c)
		// https://: TLS done, then a request line and headers trickled
		// one byte at a time, never finished.
		tc, err := tls.Dial("tcp", haddr, &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		tc.Write([]byte("GET /public/a.root HTTP/1.1\r\nHost: x\r\n"))
		conns = append(conns, tc)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			for _, c := range conns {
				if _, ok := c.(*tls.Conn); ok {
					c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
					c.Write([]byte("X"))
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()

	// Real clients get through while the slow ones hang on.
	if got, r := s.xrdcp(t, s.xrdEnv(t), s.root+"//public/a.root"); r.Err != nil || !bytes.Equal(got, s.data["/public/a.root"]) {
		t.Fatalf("xrdcp during the attack: %s", r)
	}
	if code, _ := s.curl(t, "/public/a.root"); code != http.StatusOK {
		t.Fatalf("curl during the attack: %d", code)
	}

	// Every stalled connection is closed by the server.
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, err := io.Copy(io.Discard, bufio.NewReader(c))
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("connection %d (%T) still open after the handshake timeout", i, c)
		}
		c.Close()
	}
	realclient.Require(t, "xrdcp") // the test is meaningless without the real clients
}

// TestConnectionLimit: over server max connections, a real client is told
// to come back (kXR_wait, "server busy") at once, waits, and is served on
// the same connection once a place is free. It was told kXR_Overloaded,
// which XrdCl takes as final without a redirector: xrdcp failed.
func TestConnectionLimit(t *testing.T) {
	p := newPKI(t)
	s := newStack(t, p, openAll, func(x *xrdfront.Config, h *httpfront.Config) { x.MaxConnections = 3 })
	s.fill(t, "/public/a.root")
	conns := s.holdConnections(t, 3)
	s.busyThenServed(t, "/public/a.root", "server busy: it serves at most 3 connections", func() {
		for _, c := range conns {
			c.Close()
		}
	})
}

// TestConnectionLimitPerClient: one address holding its bound of
// connections (limits.max_connections_per_client) gets no more at once:
// xrdcp is told to come back (kXR_wait, "from one client address"), and is
// served once one of them is freed.
func TestConnectionLimitPerClient(t *testing.T) {
	p := newPKI(t)
	s := newStack(t, p, openAll, func(x *xrdfront.Config, h *httpfront.Config) { x.MaxConnectionsPerClient = 2 })
	s.fill(t, "/public/a.root")
	conns := s.holdConnections(t, 2)
	s.busyThenServed(t, "/public/a.root", "connections from one client address", func() { conns[0].Close() })
	conns[1].Close()
}

// holdConnections opens n root:// connections that send part of a
// handshake and nothing more.
func (s *stack) holdConnections(t *testing.T, n int) []net.Conn {
	t.Helper()
	var conns []net.Conn
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", strings.TrimPrefix(s.root, "root://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.Write([]byte{0, 0, 0, 0})
		conns = append(conns, c)
	}
	return conns
}

// busyThenServed runs xrdcp of path, waits until XrdCl's own log shows it
// was told to wait with a reason containing why, calls free, and wants
// the copy to complete with the file's bytes.
func (s *stack) busyThenServed(t *testing.T, path, why string, free func()) {
	t.Helper()
	logFile := filepath.Join(t.TempDir(), "xrdcl.log")
	env := s.xrdEnv(t, "XRD_LOGLEVEL=Dump", "XRD_LOGFILE="+logFile)
	type copied struct {
		b []byte
		r realclient.Result
	}
	done := make(chan copied, 1)
	go func() {
		b, r := s.xrdcp(t, env, s.root+"/"+path)
		done <- copied{b, r}
	}()
	told := func() bool {
		b, _ := os.ReadFile(logFile)
		return bytes.Contains(b, []byte("Got kXR_wait response")) && bytes.Contains(b, []byte(why))
	}
	for !told() {
		select {
		case c := <-done:
			t.Fatalf("xrdcp over the limit ended before being told to wait (%q): %s", why, c.r)
		case <-time.After(10 * time.Millisecond):
		}
	}
	free()
	c := <-done
	if c.r.Err != nil || !bytes.Equal(c.b, s.data[path]) {
		t.Fatalf("xrdcp after a place was freed: %s", c.r)
	}
}
