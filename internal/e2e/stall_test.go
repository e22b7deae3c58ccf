package e2e

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/bench"
	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/xrdtest"
	"github.com/hepcache/hepcache/internal/xrootd/proto"
)

// dialTiny is bench.DialTiny, closed with the test.
func dialTiny(tb testing.TB, addr string) net.Conn {
	tb.Helper()
	nc, err := bench.DialTiny(addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { nc.Close() })
	return nc
}

// stallRoot logs in over root://, opens path and asks for all of it with
// one kXR_read, then never reads the answer.
func stallRoot(tb testing.TB, addr, path string, n int) {
	tb.Helper()
	nc := dialTiny(tb, addr)
	br := bufio.NewReader(nc)
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	sid := func(i uint16) proto.StreamID { var s proto.StreamID; binary.BigEndian.PutUint16(s[:], i); return s }
	read := func() (proto.ResponseHeader, []byte) {
		var hb [proto.ResponseHeaderLen]byte
		if _, err := io.ReadFull(br, hb[:]); err != nil {
			tb.Fatalf("stalled client: %v", err)
		}
		h, _ := proto.DecodeResponseHeader(hb[:])
		body := make([]byte, h.Dlen)
		io.ReadFull(br, body)
		return h, body
	}
	b := proto.AppendClientHandshake(nil)
	pr := proto.ProtocolRequest{ClientPV: proto.ProtocolVersion, Expect: proto.ExpectLogin}
	nc.Write(pr.Append(b, sid(1)))
	io.ReadFull(br, make([]byte, proto.ServerHandshakeLen))
	read()
	lr := proto.LoginRequest{PID: 7, Username: "stall", CapVer: proto.LoginVer005}
	nc.Write(lr.Append(nil, sid(2)))
	read()
	or := proto.OpenRequest{Options: proto.OpenRead, Path: path}
	nc.Write(or.Append(nil, sid(3)))
	h, body := read()
	for h.Status == proto.StatusWait {
		// Shed while the other stalled clients' reads queue (cache:
		// overloaded): as XrdCl, wait and ask again.
		secs, _, _ := proto.DecodeWait(body)
		time.Sleep(time.Duration(secs) * time.Second)
		nc.Write(or.Append(nil, sid(3)))
		h, body = read()
	}
	fh, _, _, err := proto.DecodeOpenResponse(body)
	if h.Status != proto.StatusOK || err != nil {
		tb.Fatalf("stalled client's open of %s: %v %v", path, h.Status, err)
	}
	rr := proto.ReadRequest{FHandle: fh, Length: int32(n)}
	nc.Write(rr.Append(nil, sid(4)))
	nc.SetDeadline(time.Time{})
}

// stallHTTP is bench.StallHTTP, closed with the test.
func stallHTTP(tb testing.TB, addr, path string) {
	tb.Helper()
	c, err := bench.StallHTTP(addr, path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
}

// TestStalledClientsHoldNoRAM: clients that open files and never read their
// answers (a 4 KiB receive buffer, nothing read) take the cache's RAM only
// while a block is handed over, never while their send is stuck: next to
// more of them than RAM has blocks to pin, xrdcp and curl reading other
// files cold finish while the stalled clients are still connected. Before,
// each stalled client pinned a block until its send timed out, and every
// other client's cold read waited for that (60 s and more).
func TestStalledClientsHoldNoRAM(t *testing.T) {
	realclient.Require(t, "xrdcp")
	curl := realclient.Require(t, "curl")
	dir := t.TempDir()
	data := filepath.Join(dir, "origin")
	os.MkdirAll(data, 0o755)
	const size = 16 << 20
	for i := range 24 {
		writePattern(t, filepath.Join(data, fmt.Sprintf("stall%d.root", i)), size)
	}
	for i := range 4 {
		writePattern(t, filepath.Join(data, fmt.Sprintf("normal%d.root", i)), size)
	}
	origin := xrdtest.StartOrigin(t, data)
	httpAddr := freeAddr(t)
	// 16 blocks of RAM, far fewer than the stalled clients' answers.
	p := startProc(t, "--cache-dir", filepath.Join(dir, "hc"), "--origin", origin.URL, "--http-listen", httpAddr, "--ram", "16M", "--fetch-memory", "8M")
	for i := range 12 {
		stallHTTP(t, httpAddr, fmt.Sprintf("/stall%d.root", i))
	}
	for i := 12; i < 24; i++ {
		stallRoot(t, p.addr, fmt.Sprintf("/stall%d.root", i), size)
	}
	time.Sleep(2 * time.Second) // let every stalled answer fill its socket
	env := realclient.Env()
	// A hang guard, not a speed check: before, these waited for the
	// stalled clients' sends to time out.
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	got := filepath.Join(dir, "got")
	for i := range 2 {
		r := realclient.RunIn(t, ctx, env, nil, "xrdcp", "-f", "-s", "root://"+p.addr+"//normal"+fmt.Sprint(i)+".root", got)
		if r.Err != nil {
			t.Fatalf("xrdcp next to stalled clients: %v", r)
		}
		sameFile(t, got, filepath.Join(data, fmt.Sprintf("normal%d.root", i)))
	}
	for i := 2; i < 4; i++ {
		r := realclient.RunIn(t, ctx, env, nil, curl, "-sS", "-o", got, "http://"+httpAddr+"/normal"+fmt.Sprint(i)+".root")
		if r.Err != nil {
			t.Fatalf("curl next to stalled clients: %v", r)
		}
		sameFile(t, got, filepath.Join(data, fmt.Sprintf("normal%d.root", i)))
	}
}
