package client

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/xrdtest"
	"github.com/hepcache/hepcache/internal/xrootd/proto"
)

// rawConn is a logged-in connection that sends hand-built requests and
// returns the raw response bytes, to compare the C++ server's answers with
// what package proto encodes.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	r := &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
	b := proto.AppendClientHandshake(nil)
	b = (&proto.ProtocolRequest{ClientPV: proto.ProtocolVersion, Expect: proto.ExpectLogin}).Append(b, proto.StreamID{0, 1})
	nc.Write(b)
	hs := make([]byte, proto.ServerHandshakeLen)
	if _, err := io.ReadFull(r.br, hs); err != nil {
		t.Fatal(err)
	}
	if want := proto.AppendServerHandshake(nil, proto.ProtocolVersion, proto.DataServer); !bytes.Equal(hs, want) {
		t.Errorf("server handshake % x, proto encodes % x", hs, want)
	}
	r.one() // protocol
	r.send((&proto.LoginRequest{Username: "wire", CapVer: proto.LoginVer005}).Append(nil, proto.StreamID{0, 2}))
	if h, _ := r.one(); h.Status != proto.StatusOK {
		t.Fatalf("login: %v", h.Status)
	}
	return r
}

func (r *rawConn) send(b []byte) {
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

// one reads one response (for kXR_status, including its data) and returns
// its header and all its bytes.
func (r *rawConn) one() (proto.ResponseHeader, []byte) {
	r.t.Helper()
	hb := make([]byte, 8)
	if _, err := io.ReadFull(r.br, hb); err != nil {
		r.t.Fatal(err)
	}
	h, err := proto.DecodeResponseHeader(hb)
	if err != nil {
		r.t.Fatal(err)
	}
	body := make([]byte, h.Dlen)
	if _, err := io.ReadFull(r.br, body); err != nil {
		r.t.Fatal(err)
	}
	all := append(hb, body...)
	if h.Status == proto.StatusStatus {
		sb, _, err := proto.DecodeStatus(body)
		if err != nil {
			r.t.Fatal(err)
		}
		data := make([]byte, sb.Dlen)
		if _, err := io.ReadFull(r.br, data); err != nil {
			r.t.Fatal(err)
		}
		all = append(all, data...)
	}
	return h, all
}

// TestWireCompat checks that package proto encodes responses byte for byte
// as the C++ xrootd 5.5.3 does.
func TestWireCompat(t *testing.T) {
	dir, files := testData(t)
	srv := xrdtest.StartOrigin(t, dir)
	r := dialRaw(t, srv.Addr)
	sid := proto.StreamID{0x12, 0x34}

	// Open with retstat: handle, 8 zero bytes, the stat text and a NUL.
	r.send((&proto.OpenRequest{Options: proto.OpenRead | proto.OpenRetStat, Path: "/odd.bin"}).Append(nil, sid))
	h, got := r.one()
	fh, st, has, err := proto.DecodeOpenResponse(got[8:])
	if h.Status != proto.StatusOK || err != nil || !has {
		t.Fatalf("open: %v %v %v", h.Status, has, err)
	}
	if want := proto.AppendOpenResponse(nil, sid, fh, &st); !bytes.Equal(got, want) {
		t.Errorf("open answer\n got %q\nwant %q", got, want)
	}

	// pgread answers for aligned, unaligned and end-of-file reads.
	content := files["odd.bin"]
	for _, tc := range []struct{ off, n int }{{0, 4096}, {1000, 9000}, {4095, 2}, {len(content) - 100, 100}} {
		r.send((&proto.PgReadRequest{FHandle: fh, Offset: int64(tc.off), Length: int32(tc.n)}).Append(nil, sid))
		h, got := r.one()
		if h.Status != proto.StatusStatus {
			t.Fatalf("pgread %d@%d: %v", tc.n, tc.off, h.Status)
		}
		want := proto.AppendPgReadResponse(nil, sid, true, int64(tc.off), content[tc.off:tc.off+tc.n])
		if !bytes.Equal(got, want) {
			t.Errorf("pgread %d@%d answer\n got % x\nwant % x", tc.n, tc.off, got[:min(64, len(got))], want[:min(64, len(want))])
		}
	}

	// stat by handle and by path: the text the server formats, re-encoded.
	r.send((&proto.StatRequest{FHandle: fh}).Append(nil, sid))
	_, got = r.one()
	st2, err := proto.ParseStatInfo(got[8:])
	if err != nil {
		t.Fatal(err)
	}
	if want := proto.AppendStatResponse(nil, sid, &st2); !bytes.Equal(got, want) {
		t.Errorf("stat answer\n got %q\nwant %q", got, want)
	}

	// Errors: code, message and NUL.
	r.send((&proto.StatRequest{Path: "/missing"}).Append(nil, sid))
	h, got = r.one()
	code, msg, err := proto.DecodeError(got[8:])
	if h.Status != proto.StatusError || err != nil || code != proto.ErrNotFound {
		t.Fatalf("stat missing: %v %v %v", h.Status, code, err)
	}
	if want := proto.AppendError(nil, sid, code, msg); !bytes.Equal(got, want) {
		t.Errorf("error answer\n got %q\nwant %q", got, want)
	}

	// dirlist with dstat: lead-in, name/stat pairs, last newline as NUL.
	os.WriteFile(filepath.Join(dir, "sub", "two"), []byte("2"), 0o644)
	xrdtest.Chown(t, filepath.Join(dir, "sub"))
	r.send((&proto.DirlistRequest{Options: proto.DirlistDStat, Path: "/sub"}).Append(nil, sid))
	h, got = r.one()
	ents, err := proto.ParseDirlist(nil, got[8:])
	if h.Status != proto.StatusOK || err != nil || len(ents) != 2 {
		t.Fatalf("dirlist: %v %+v %v", h.Status, ents, err)
	}
	if want := proto.AppendDirlist(nil, sid, true, true, true, ents); !bytes.Equal(got, want) {
		t.Errorf("dirlist answer\n got %q\nwant %q", got, want)
	}

	// locate: "Sr" + address, NUL terminated.
	r.send((&proto.LocateRequest{Path: "/odd.bin"}).Append(nil, sid))
	_, got = r.one()
	locs, err := proto.ParseLocateResponse(got[8:])
	if err != nil {
		t.Fatal(err)
	}
	if want := proto.AppendLocateResponse(nil, sid, locs); !bytes.Equal(got, want) {
		t.Errorf("locate answer\n got %q\nwant %q", got, want)
	}
	t.Logf("locate: %q", got[8:])
}
