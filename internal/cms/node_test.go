package cms

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/internal/xrdtest"
)

func TestLoginRoundTrip(t *testing.T) {
	in := &loginData{Version: 3, Mode: modeServer | modeNoStage, HoldTime: 4242, TSpace: 7, FSpace: 1 << 20, FSNum: 1, FSUtil: 42, DPort: 1094,
		SID: "s-hepcache@node:1094 mgr:1213", Paths: "r /store\nr /data", EnvCGI: "myHN=node&site=T2_XX"}
	out, err := unmarshalLogin(in.marshal())
	if err != nil {
		t.Fatal(err)
	}
	if *out != *in {
		t.Fatalf("round trip:\n got %+v\nwant %+v", out, in)
	}
	// The strings are optional (cmsd's fence): a manager's answer may end
	// after the numbers.
	short := (&loginData{Version: 3, DPort: 1}).marshal()
	short = short[:len(short)-8] // drop the four empty strings
	if d, err := unmarshalLogin(short); err != nil || d.DPort != 1 || d.SID != "" {
		t.Fatalf("login without strings: %+v, %v", d, err)
	}
}

func TestUnpackInline(t *testing.T) {
	var p packer
	p.inlineInt(5)
	p.inlineInt(0x7fffffff) // top nibble set: not inline
	p.short(9)
	if len(p.b) != 4+5+3 {
		t.Fatalf("packed %d bytes, want 12: % x", len(p.b), p.b)
	}
	u := unpacker{b: p.b}
	if a, b, c := u.int(), u.int(), u.short(); u.err != nil || a != 5 || b != 0x7fffffff || c != 9 {
		t.Fatalf("unpacked %d %d %d, %v", a, b, c, u.err)
	}
}

func TestUnpackRejectsBadData(t *testing.T) {
	good := (&loginData{Version: 3, SID: "x"}).marshal()
	for name, b := range map[string][]byte{
		"empty":          nil,
		"truncated int":  good[:5],
		"wrong type":     append([]byte{pupInt, 0, 0, 0, 3}, good[3:]...),
		"string overrun": append(good[:len(good)-8], 0x00, 0x40, 'x'),
	} {
		if _, err := unmarshalLogin(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err %v, want ErrMalformed", name, err)
		}
	}
	for name, c := range map[string]struct {
		mod  byte
		data []byte
	}{
		"relative raw":    {modRaw, []byte("etc/passwd\x00")},
		"empty raw":       {modRaw, nil},
		"packed overrun":  {0, []byte{0, 9, '/'}},
		"packed relative": {0, []byte{0, 2, 'x', 0}},
	} {
		if _, err := pathOf(header{Modifier: c.mod}, c.data); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err %v, want ErrMalformed", name, err)
		}
	}
	if p, err := pathOf(header{Modifier: modRaw}, []byte("/a/b\x00")); err != nil || p != "/a/b" {
		t.Fatalf("raw path: %q, %v", p, err)
	}
}

func TestConfigErrors(t *testing.T) {
	have := func(context.Context, string) (bool, error) { return true, nil }
	for _, c := range []Config{
		{DataPort: 1, Have: have},
		{Manager: "nohostport", DataPort: 1, Have: have},
		{Manager: "h:1", Have: have},
		{Manager: "h:1", DataPort: 1},
		{Manager: "h:1", DataPort: 1, Have: have, Paths: []string{"relative"}},
		{Manager: "h:1", DataPort: 1, Have: have, Site: "a&b"},
	} {
		if n, err := Start(c); err == nil {
			n.Close()
			t.Errorf("Start(%+v) succeeded", c)
		}
	}
}

// TestReconnectsAfterManagerDeath: a manager that accepts the login and
// dies is dialled again, with the same login data.
func TestReconnectsAfterManagerDeath(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	logins := make(chan *loginData, 4)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			h, data, err := readMessage(c)
			if err != nil || h.Code != codeLogin {
				c.Close()
				continue
			}
			d, err := unmarshalLogin(data)
			if err != nil {
				c.Close()
				continue
			}
			c.Write(message(header{Code: codeLogin}, (&loginData{Version: 3, SID: "m-test"}).marshal()))
			logins <- d
			c.Close() // the manager dies
		}
	}()
	n, err := Start(Config{Manager: l.Addr().String(), DataPort: 2000, Host: "node1", Site: "T2_XX",
		Have:     func(context.Context, string) (bool, error) { return true, nil },
		RetryMin: 10 * time.Millisecond, RetryMax: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	for i := 0; i < 2; i++ {
		select {
		case d := <-logins:
			if d.DPort != 2000 || d.Mode&modeServer == 0 || d.Paths != "r /" || d.EnvCGI != "myHN=node1&site=T2_XX" || !strings.Contains(d.SID, "node1:2000") {
				t.Fatalf("login %d: %+v", i, d)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("login %d did not come", i)
		}
	}
	eventually.True(t, func() bool { return n.Stats().Logins >= 2 }, "two logins counted")
}

// TestSubscribeToRealManager subscribes two nodes to a real cmsd manager.
// Each node's data port is a real C++ xrootd serving the same directory,
// so xrdcp through the redirector reads real bytes from whichever node
// the manager picks; after one node leaves, the manager locates the file
// on the other only.
func TestSubscribeToRealManager(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a C++ redirector")
	}
	xrdcp := xrdtest.RequireTool(t, "xrdcp")
	xrdfs := xrdtest.RequireTool(t, "xrdfs")
	dir := t.TempDir()
	want := bytes.Repeat([]byte("cms subscription\n"), 4096)
	if err := os.WriteFile(filepath.Join(dir, "f.root"), want, 0o644); err != nil {
		t.Fatal(err)
	}
	// Pings every 3 s (the least cmsd allows), a usage query with each,
	// and each answer logged, so that the test sees load and space arrive.
	red := xrdtest.StartRedirector(t, "cms.ping 3 log 1 usage 1")
	var nodes []*Node
	var ports []string
	for i := 0; i < 2; i++ {
		o := xrdtest.StartOrigin(t, dir)
		n, err := Start(Config{
			Manager: red.CMSAddr, DataPort: o.Port, Host: "127.0.0.1", Paths: []string{"/"},
			Have: func(_ context.Context, p string) (bool, error) {
				_, err := os.Stat(filepath.Join(dir, filepath.Clean(p)))
				return err == nil, nil
			},
			Space: func() (uint64, uint64, int) { return 10 << 30, 20 << 30, 50 },
			Load:  func() int { return 37 },
		})
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		nodes = append(nodes, n)
		ports = append(ports, strconv.Itoa(o.Port))
	}
	eventually.True(t, func() bool { return nodes[0].Stats().Connected && nodes[1].Stats().Connected }, "both nodes logged in")

	last := new(answer)
	located := func(in, notIn []string) func() bool {
		return func() bool {
			out, _ := run(t, xrdfs, red.URL, "locate", "/f.root")
			*last = answer(out)
			for _, p := range in {
				if !strings.Contains(string(*last), ":"+p+" ") {
					time.Sleep(200 * time.Millisecond)
					return false
				}
			}
			for _, p := range notIn {
				if strings.Contains(string(*last), ":"+p+" ") {
					time.Sleep(200 * time.Millisecond)
					return false
				}
			}
			return true
		}
	}
	// The manager asks every node once the startup delay has passed.
	eventually.True(t, located(ports, nil), "the manager to locate the file on both nodes (last answer %s)", last)
	if s := nodes[0].Stats(); s.Queries == 0 || s.Haves == 0 {
		t.Fatalf("node 0 stats %+v: the manager's queries were not answered", s)
	}
	dst := filepath.Join(t.TempDir(), "out")
	if out, err := run(t, xrdcp, "-f", "-s", red.URL+"//f.root", dst); err != nil {
		t.Fatalf("xrdcp through the redirector: %v\n%s", err, out)
	}
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, want) {
		t.Fatalf("xrdcp through the redirector read %d bytes, want %d byte-exact", len(got), len(want))
	}
	// A missing file is nobody's.
	if out, err := run(t, xrdcp, "-f", "-s", red.URL+"//missing.root", dst); err == nil {
		t.Fatalf("xrdcp of a missing file succeeded: %s", out)
	}

	// The manager pings and asks for usage; it logs the load and free
	// space it received.
	eventually.True(t, func() bool {
		return nodes[0].Stats().Pings > 0 && strings.Contains(red.CmsdLog(), "cpu=37 ") && strings.Contains(red.CmsdLog(), "dsk=10240 ")
	}, "pings answered and the manager logging cpu=37 and dsk=10240 (10 GiB free)")

	// Leaving (disc) and dying (connection drop) both mark the node
	// offline at the manager, which then neither lists nor selects it.
	// (A refreshing locate, -r, would wait for the offline node until the
	// manager drops it, cms.delay drop, 10 min by default.)
	nodes[0].Close()
	eventually.True(t, located(ports[1:], ports[:1]), "the manager to locate the file on node 1 only (last answer %s)", last)
	if !strings.Contains(red.CmsdLog(), "requested a disconnect") {
		t.Errorf("the manager did not log node 0's disc:\n%s", red.CmsdLog())
	}
}

// answer holds the last xrdfs output; it prints what it holds when the
// wait fails.
type answer string

func (a *answer) String() string { return strconv.Quote(string(*a)) }

// run runs a client tool with a deadline (a hung client fails the step,
// not the whole test binary).
func run(t *testing.T, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	t.Logf("%s %s: %v in %v", filepath.Base(name), strings.Join(args, " "), err, time.Since(start).Round(time.Millisecond))
	return out, err
}

// TestStateQueriesOnlyForExportedPaths (issue 21, item 7): a hostile
// manager asking about paths outside cmsd.paths (/secret, a ".." climbing
// out of /store, a sibling prefix /storex) gets no answer and causes no
// lookup; a path under /store is looked up and answered.
func TestStateQueriesOnlyForExportedPaths(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	haves := make(chan string, 8)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if _, _, err := readMessage(c); err != nil {
			return
		}
		c.Write(message(header{Code: codeLogin}, (&loginData{Version: 3, SID: "m-test"}).marshal()))
		for i, p := range []string{"/secret/x", "/store/../secret/x", "/storex/y", "/store/a/f.root"} {
			c.Write(message(header{StreamID: uint32(i + 1), Code: codeState, Modifier: modRaw}, append([]byte(p), 0)))
		}
		for {
			h, data, err := readMessage(c)
			if err != nil {
				return
			}
			if h.Code == codeHave {
				haves <- string(data[:indexNUL(data)])
			}
		}
	}()
	var mu sync.Mutex
	var asked []string
	n, err := Start(Config{Manager: l.Addr().String(), DataPort: 2000, Host: "node1", Paths: []string{"/store"},
		Have: func(_ context.Context, p string) (bool, error) {
			mu.Lock()
			asked = append(asked, p)
			mu.Unlock()
			return true, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	select {
	case p := <-haves:
		if p != "/store/a/f.root" {
			t.Fatalf("have answered for %s", p)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no have for /store/a/f.root")
	}
	eventually.True(t, func() bool { return n.Stats().Queries == 4 }, "the four queries received")
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 1 || asked[0] != "/store/a/f.root" || n.Stats().Outside != 3 {
		t.Fatalf("looked up %v (%d outside), want only /store/a/f.root", asked, n.Stats().Outside)
	}
}
