package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/bench"
	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/xrdtest"
)

// Descriptor budget tests (issue 35 item 3): hepcache runs under
// `prlimit --nofile=1024:1024`, as under `ulimit -n 1024`.

// ulimit1024 runs hepcache with a descriptor limit of 1024, soft and hard.
var ulimit1024 = []string{"prlimit", "--nofile=1024:1024", "--"}

// TestHitsUnderUlimit1024: 32 threads of the XRootD Python bindings read
// 3,000 small files through hepcache limited to 1024 descriptors, cold
// then hot: no error. Files lingering after their last close held up to
// 1024 descriptors (cache.max_lingering's old default) and most opens
// failed with "too many open files" (issue 35: 28,991 of 30,000).
func TestHitsUnderUlimit1024(t *testing.T) {
	python := realclient.Python(t, "/usr/bin/python3", "XRootD.client")
	realclient.Require(t, "prlimit")
	const files, size, threads = 3000, 4096, 32
	data := t.TempDir()
	var paths []string
	for i := range files {
		p := fmt.Sprintf("store/many/d%02d/f%05d", i%30, i)
		writeFile(t, data, p, size, uint64(i))
		paths = append(paths, p)
	}
	list := filepath.Join(t.TempDir(), "paths.txt")
	os.WriteFile(list, []byte(strings.Join(paths, "\n")+"\n"), 0o644)
	origin := xrdtest.StartOrigin(t, data)
	p := startProcUnder(t, ulimit1024, "--origin", "root://"+origin.Addr, "--cache-dir", t.TempDir())
	for _, pass := range []string{"cold", "hot"} {
		r := realclient.Run(t, realclient.Env(), python, "-c", bench.FilesPy, "root://"+p.addr+"/", list, fmt.Sprint(threads), fmt.Sprint(size))
		if r.Err != nil {
			t.Fatalf("%s pass: %s", pass, r)
		}
		var st struct {
			OK, Errors int
			First      string
		}
		if err := json.Unmarshal(r.Stdout, &st); err != nil {
			t.Fatalf("%s pass said %q: %v", pass, r.Stdout, err)
		}
		if st.Errors != 0 || st.OK != files {
			t.Fatalf("%s pass under ulimit -n 1024: %d of %d files failed (first: %s)", pass, st.Errors, files, st.First)
		}
	}
	if !strings.Contains(p.log.String(), "limit=1024") {
		t.Errorf("the start-up log does not give the descriptor budget:\n%s", p.log.String())
	}
}

// flood holds n connections to addr from each of the addresses
// 127.0.0.2 and up (from addresses of their own), sending nothing; it
// returns a function that closes them.
func flood(t *testing.T, addr string, addrs, n int) (release func()) {
	t.Helper()
	var conns []net.Conn
	for a := range addrs {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+a))}, Timeout: 10 * time.Second}
		for range n {
			c, err := d.Dial("tcp", addr)
			if err != nil {
				t.Fatalf("flood from 127.0.0.%d: %v", 2+a, err)
			}
			conns = append(conns, c)
		}
	}
	done := false
	release = func() {
		if !done {
			done = true
			for _, c := range conns {
				c.Close()
			}
		}
	}
	t.Cleanup(release)
	return release
}

// openFDs counts the descriptors process pid holds.
func openFDs(pid int) int {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(ents)
}

// TestFloodedServerAnswersBusy: twenty addresses holding 64 connections
// each (more than the 1024 descriptors hepcache has) leave a client from
// another address served or told busy at once, over root:// (kXR_wait,
// which XrdCl waits out and asks again) and HTTP (503 with Retry-After);
// once the flood is gone, both are served. The flood took every
// descriptor: the client was left in the listen queue until it timed out,
// and after the first EMFILE neither front end accepted again (issue 35).
func TestFloodedServerAnswersBusy(t *testing.T) {
	realclient.Require(t, "xrdfs")
	realclient.Require(t, "curl")
	realclient.Require(t, "prlimit")
	data := t.TempDir()
	writeFile(t, data, "store/f", 4096, 1)
	origin := xrdtest.StartOrigin(t, data)
	httpAddr := freeAddr(t)
	p := startProcUnder(t, ulimit1024, "--origin", "root://"+origin.Addr, "--cache-dir", t.TempDir(), "--http-listen", httpAddr)

	release := flood(t, p.addr, 20, 64)
	pid := p.cmd.Process.Pid
	// The flood is in: connections over the bounds closed (the waiting
	// room full), or (before the bounds) every descriptor taken.
	eventually.True(t, func() bool {
		return strings.Contains(p.log.String(), "no place left to wait") || openFDs(pid) >= 1000
	}, "the flood to fill the server")

	// root://: xrdfs from 127.0.0.1 is logged in and told to wait; its
	// own log says so while it waits.
	logFile := filepath.Join(t.TempDir(), "xrdcl.log")
	env := realclient.Env("XRD_LOGLEVEL=Dump", "XRD_LOGFILE="+logFile,
		"XRD_CONNECTIONWINDOW=30", "XRD_REQUESTTIMEOUT=60")
	stat := make(chan realclient.Result, 1)
	go func() { stat <- realclient.Run(t, env, "xrdfs", "root://"+p.addr, "stat", "/store/f") }()
	told := func() bool {
		b, _ := os.ReadFile(logFile)
		return bytes.Contains(b, []byte("Got kXR_wait response")) && bytes.Contains(b, []byte("server busy"))
	}
	var served *realclient.Result
	for served == nil && !told() {
		select {
		case r := <-stat:
			if r.Err != nil {
				t.Fatalf("root:// client from another address during the flood, neither served nor told busy: %s\nits log:\n%s", r, tail(logFile))
			}
			served = &r
		case <-time.After(10 * time.Millisecond):
		}
	}

	t.Logf("root:// client during the flood: served %v, told to wait %v", served != nil, told())

	// HTTP: 503 with Retry-After at once, or the file.
	r := realclient.Run(t, realclient.Env(), "curl", "-sS", "--max-time", "60", "-o", "/dev/null", "-D", "-", "-w", "%{http_code}", "http://"+httpAddr+"/store/f")
	out := string(r.Stdout)
	switch {
	case r.Err != nil:
		t.Fatalf("curl from another address during the flood: %s", r)
	case strings.HasSuffix(out, "503") && strings.Contains(strings.ToLower(out), "retry-after: "):
	case strings.HasSuffix(out, "200"):
	default:
		t.Fatalf("curl during the flood: %s, want 503 with Retry-After, or 200", out)
	}
	t.Logf("HTTP client during the flood: %s", out[len(out)-3:])

	release()
	if served == nil {
		if r := <-stat; r.Err != nil {
			t.Fatalf("the waiting root:// client once the flood was gone: %s", r)
		}
	}
	if r := realclient.Run(t, realclient.Env(), "xrdfs", "root://"+p.addr, "stat", "/store/f"); r.Err != nil {
		t.Fatalf("root:// after the flood: %s", r)
	}
	if r := realclient.Run(t, realclient.Env(), "curl", "-sS", "--retry", "5", "--max-time", "60", "-o", "/dev/null", "-w", "%{http_code}", "http://"+httpAddr+"/store/f"); r.Err != nil || string(r.Stdout) != "200" {
		t.Fatalf("HTTP after the flood: %s", r)
	}
}

// TestAcceptSurvivesDescriptorFlood: with no bound on connections, a
// flood takes every descriptor and accept fails with EMFILE; once the
// flood is gone the server accepts and serves again, over root:// and
// HTTP. One EMFILE ended the accept loops for good.
func TestAcceptSurvivesDescriptorFlood(t *testing.T) {
	realclient.Require(t, "xrdfs")
	realclient.Require(t, "curl")
	realclient.Require(t, "prlimit")
	data := t.TempDir()
	writeFile(t, data, "store/f", 4096, 1)
	origin := xrdtest.StartOrigin(t, data)
	httpAddr := freeAddr(t)
	cfgFile := filepath.Join(t.TempDir(), "hepcache.toml")
	os.WriteFile(cfgFile, []byte("[limits]\nmax_connections = -1\nmax_connections_per_client = -1\n"), 0o644)
	p := startProcUnder(t, ulimit1024, "--config", cfgFile, "--origin", "root://"+origin.Addr, "--cache-dir", t.TempDir(), "--http-listen", httpAddr)
	pid := p.cmd.Process.Pid

	release := flood(t, p.addr, 1, 1100)
	eventually.True(t, func() bool { return openFDs(pid) >= 1020 && strings.Contains(p.log.String(), "accept failed") },
		"hepcache out of descriptors, its root:// accept failing")
	// HTTP too: its accept fails while the root:// flood holds every
	// descriptor.
	hc, err := net.Dial("tcp", httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	release()
	hc.Close()

	if r := realclient.Run(t, realclient.Env(), "xrdfs", "root://"+p.addr, "stat", "/store/f"); r.Err != nil {
		t.Fatalf("root:// once the flood was gone: %s", r)
	}
	if r := realclient.Run(t, realclient.Env(), "curl", "-sS", "--max-time", "60", "-o", "/dev/null", "-w", "%{http_code}", "http://"+httpAddr+"/store/f"); r.Err != nil || string(r.Stdout) != "200" {
		t.Fatalf("HTTP once the flood was gone: %s", r)
	}
}

// tail returns the end of a file, for failure messages.
func tail(name string) string {
	b, _ := os.ReadFile(name)
	return string(b[max(0, len(b)-4000):])
}
