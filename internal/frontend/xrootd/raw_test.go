package xrootd

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/xrootd/proto"
)

// rawClient speaks the protocol byte by byte, for the cases real clients do
// not produce (malformed requests, limits, pipelining orders).
type rawClient struct {
	tb  testing.TB
	nc  net.Conn
	br  *bufio.Reader
	sid uint16
}

// dialRaw connects and, if login, does handshake, protocol and login.
func dialRaw(tb testing.TB, addr string, login bool) *rawClient {
	tb.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	rc := &rawClient{tb: tb, nc: nc, br: bufio.NewReader(nc)}
	if login {
		rc.login()
	}
	return rc
}

// login sends the handshake and kXR_protocol in one write, as XrdCl does,
// then kXR_login, and checks the answers.
func (rc *rawClient) login() {
	rc.tb.Helper()
	b := proto.AppendClientHandshake(nil)
	pr := proto.ProtocolRequest{ClientPV: proto.ProtocolVersion, Flags: proto.ProtoSecReqs | proto.ProtoAbleTLS, Expect: proto.ExpectLogin}
	b = pr.Append(b, rc.next())
	rc.send(b)
	var hs [proto.ServerHandshakeLen]byte
	if _, err := io.ReadFull(rc.br, hs[:]); err != nil {
		rc.tb.Fatalf("read handshake reply: %v", err)
	}
	if pv, typ, err := proto.DecodeServerHandshake(hs[:]); err != nil || pv != proto.ProtocolVersion || typ != proto.DataServer {
		rc.tb.Fatalf("handshake reply = %x %d %v", pv, typ, err)
	}
	h, body, _ := rc.read()
	resp, err := proto.DecodeProtocolResponse(body)
	if h.Status != proto.StatusOK || err != nil || resp.Flags&proto.SupPgRW == 0 || resp.Flags&proto.IsServer == 0 {
		rc.tb.Fatalf("protocol answer %v %+v %v", h.Status, resp, err)
	}
	lr := proto.LoginRequest{PID: 42, Username: "tester", CapVer: proto.LoginVer005 | proto.CapAsync}
	h, body = rc.call(lr.Append(nil, rc.next()))
	if h.Status != proto.StatusOK || len(body) != 16 {
		rc.tb.Fatalf("login answer %v %q", h.Status, body)
	}
}

// next returns a new stream id.
func (rc *rawClient) next() proto.StreamID {
	rc.sid++
	var s proto.StreamID
	binary.BigEndian.PutUint16(s[:], rc.sid)
	return s
}

func (rc *rawClient) send(b []byte) {
	rc.tb.Helper()
	if _, err := rc.nc.Write(b); err != nil {
		rc.tb.Fatalf("send: %v", err)
	}
}

// read reads one response. For kXR_status, body is the status body and
// info, and data the raw data that follows.
func (rc *rawClient) read() (h proto.ResponseHeader, body, data []byte) {
	rc.tb.Helper()
	var hb [proto.ResponseHeaderLen]byte
	if _, err := io.ReadFull(rc.br, hb[:]); err != nil {
		rc.tb.Fatalf("read response header: %v", err)
	}
	h, err := proto.DecodeResponseHeader(hb[:])
	if err != nil {
		rc.tb.Fatal(err)
	}
	body = make([]byte, h.Dlen)
	if _, err := io.ReadFull(rc.br, body); err != nil {
		rc.tb.Fatalf("read response body: %v", err)
	}
	if h.Status == proto.StatusStatus {
		st, _, err := proto.DecodeStatus(body)
		if err != nil {
			rc.tb.Fatalf("status body: %v", err)
		}
		data = make([]byte, st.Dlen)
		if _, err := io.ReadFull(rc.br, data); err != nil {
			rc.tb.Fatalf("read status data: %v", err)
		}
	}
	return h, body, data
}

// call sends one request (whose stream id is the last from next) and
// returns its answer, gluing kXR_oksofar parts together.
func (rc *rawClient) call(req []byte) (proto.ResponseHeader, []byte) {
	rc.tb.Helper()
	rc.send(req)
	var all []byte
	for {
		h, body, _ := rc.read()
		if h.Status == proto.StatusOKSoFar {
			all = append(all, body...)
			continue
		}
		return h, append(all, body...)
	}
}

// expectError checks that an answer is kXR_error with code.
func expectError(tb testing.TB, h proto.ResponseHeader, body []byte, code proto.ErrorCode) string {
	tb.Helper()
	if h.Status != proto.StatusError {
		tb.Fatalf("answer %v %q, want kXR_error %v", h.Status, body, code)
	}
	got, msg, err := proto.DecodeError(body)
	if err != nil || got != code {
		tb.Fatalf("error %v %q (%v), want %v", got, msg, err, code)
	}
	return msg
}

// open opens path and returns the handle.
func (rc *rawClient) open(path string) proto.FHandle {
	rc.tb.Helper()
	r := proto.OpenRequest{Options: proto.OpenRead, Path: path}
	h, body := rc.call(r.Append(nil, rc.next()))
	if h.Status != proto.StatusOK {
		rc.tb.Fatalf("open %s: %v %q", path, h.Status, body)
	}
	fh, _, _, err := proto.DecodeOpenResponse(body)
	if err != nil {
		rc.tb.Fatal(err)
	}
	return fh
}
