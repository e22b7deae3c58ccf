package e2e

import (
	"crypto/sha256"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/xrdtest"
)

// TestSubscribedToXRootDRedirector runs two `hepcache serve` nodes
// subscribed (--cmsd-manager) to two real C++ xrootd+cmsd redirectors (a
// redundant pair), in front of a real C++ origin. xrdcp through a
// redirector reads byte-exact through a node; after kill -9 of one node
// neither redirector lists it, and clients are sent to the other only.
func TestSubscribedToXRootDRedirector(t *testing.T) {
	xrdfs := realclient.Require(t, "xrdfs")
	realclient.Require(t, "xrdcp")
	realclient.Require(t, "curl")
	data := t.TempDir()
	sum1 := writeFile(t, data, "store/cms/f1.root", 3<<20, 11)
	sum2 := writeFile(t, data, "store/cms/f2.root", 3<<20, 12)
	origin := xrdtest.StartOrigin(t, data)
	red, red2 := xrdtest.StartRedirector(t), xrdtest.StartRedirector(t)

	var nodes []*proc
	var ports, metricsAddrs []string
	for i := 0; i < 2; i++ {
		metricsAddrs = append(metricsAddrs, freeAddr(t))
		p := startProc(t, "--cache-dir", t.TempDir(), "--origin", origin.URL, "--cmsd-manager", red.CMSAddr+","+red2.CMSAddr, "--metrics-listen", metricsAddrs[i])
		_, port, _ := net.SplitHostPort(p.addr)
		nodes, ports = append(nodes, p), append(ports, port)
	}
	// xrdfs lists a located node as "[::127.0.0.1]:port Server Read".
	listed := func(out, port string) bool { return strings.Contains(out, "]:"+port+" ") }
	var last realclient.Result
	locate := func(red *xrdtest.Server, path string, in, notIn []string) func() bool {
		return func() bool {
			last = realclient.Run(t, realclient.Env(), xrdfs, red.URL, "locate", path)
			ok := last.Err == nil
			for _, p := range in {
				ok = ok && listed(string(last.Stdout), p)
			}
			for _, p := range notIn {
				ok = ok && !listed(string(last.Stdout), p)
			}
			if !ok {
				time.Sleep(200 * time.Millisecond)
			}
			return ok
		}
	}
	for _, r := range []*xrdtest.Server{red, red2} {
		if !eventuallyOK(locate(r, "/store/cms/f1.root", ports, nil)) {
			t.Fatalf("the redirector at %s never located f1 on both nodes; last answer:\n%s", r.Addr, last)
		}
	}
	read := func(name string, want [32]byte) string {
		r := realclient.MustRun(t, realclient.Env("XRD_LOGLEVEL=Debug"), "xrdcp", "-f", red.URL+"//store/cms/"+name, "-")
		if got := sha256.Sum256(r.Stdout); got != want {
			t.Fatalf("%s through the redirector: sha256 %s, want %s", name, hex(got), hex(want))
		}
		return string(r.Stderr)
	}
	read("f1.root", sum1)
	if r := realclient.Run(t, realclient.Env(), "xrdcp", "-f", red.URL+"//store/cms/missing.root", "/dev/null"); r.Err == nil {
		t.Fatalf("a file no node has was read: %s", r)
	}

	if err := nodes[0].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-nodes[0].done
	for _, r := range []*xrdtest.Server{red, red2} {
		if !eventuallyOK(locate(r, "/store/cms/f1.root", ports[1:], ports[:1])) {
			t.Fatalf("after kill -9 of node 0 the redirector at %s still lists it, or not node 1; last answer:\n%s", r.Addr, last)
		}
	}
	// New and known files alike now go to node 1 only: the client's log
	// names no redirect to the dead node.
	for _, f := range []struct {
		name string
		sum  [32]byte
	}{{"f2.root", sum2}, {"f1.root", sum1}, {"f2.root", sum2}} {
		log := read(f.name, f.sum)
		if strings.Contains(log, ":"+ports[0]) || !strings.Contains(log, ":"+ports[1]) {
			t.Fatalf("the redirector did not send the client to node 1 (port %s) only:\n%s", ports[1], log)
		}
	}
	m := realclient.MustRun(t, realclient.Env(), "curl", "-sS", "http://"+metricsAddrs[1]+"/metrics")
	for _, want := range []string{"hepcache_cmsd_connected 2\n", "hepcache_cmsd_logins_total 2\n", "hepcache_cmsd_queries_total "} {
		if !strings.Contains(string(m.Stdout), want) {
			t.Errorf("node 1 /metrics lacks %q", want)
		}
	}
	if strings.Contains(string(m.Stdout), "hepcache_cmsd_haves_total 0\n") {
		t.Errorf("node 1 answered no state query with have")
	}
	if !strings.Contains(red.CmsdLog(), "logged out") {
		t.Errorf("the manager did not record node 0's departure:\n%s", red.CmsdLog())
	}
}

// freeAddr returns a free loopback address to listen on.
func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// eventuallyOK polls cond like eventually.True but lets the caller report
// the failure with its own detail.
func eventuallyOK(cond func() bool) bool {
	return eventually.Within(eventually.Timeout, cond) == nil
}
