package xrootd

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/adler32"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/internal/xrootd/proto"
)

// ping checks that the connection still answers.
func (rc *rawClient) ping() {
	rc.tb.Helper()
	var r proto.PingRequest
	if h, body := rc.call(r.Append(nil, rc.next())); h.Status != proto.StatusOK {
		rc.tb.Fatalf("ping: %v %q", h.Status, body)
	}
}

// request builds a request with a raw 16-byte body and data.
func request(sid proto.StreamID, id proto.RequestID, body [16]byte, data []byte) []byte {
	h := proto.RequestHeader{StreamID: sid, RequestID: id, Body: body, Dlen: int32(len(data))}
	return append(proto.AppendRequestHeader(nil, &h), data...)
}

func TestBadRequestsKeepTheConnection(t *testing.T) {
	ts := startServer(t, "", nil)
	writeRandom(t, ts.dir, "f", 10000)
	rc := dialRaw(t, ts.addr, true)
	fh := rc.open("/f")
	badFH := proto.FHandle{0, 0, 0, 99}

	tests := []struct {
		name string
		req  func() []byte
		code proto.ErrorCode
		msg  string
	}{
		{"read of an unknown handle", func() []byte {
			r := proto.ReadRequest{FHandle: badFH, Length: 10}
			return r.Append(nil, rc.next())
		}, proto.ErrFileNotOpen, "not refer to an open file"},
		{"pgread of an unknown handle", func() []byte {
			r := proto.PgReadRequest{FHandle: badFH, Length: 10}
			return r.Append(nil, rc.next())
		}, proto.ErrFileNotOpen, ""},
		{"stat of an unknown handle", func() []byte {
			r := proto.StatRequest{FHandle: badFH}
			return r.Append(nil, rc.next())
		}, proto.ErrFileNotOpen, ""},
		{"close of an unknown handle", func() []byte {
			r := proto.CloseRequest{FHandle: badFH}
			return r.Append(nil, rc.next())
		}, proto.ErrFileNotOpen, ""},
		{"readv list of a partial element", func() []byte {
			return request(rc.next(), proto.ReqReadV, [16]byte{}, make([]byte, 10))
		}, proto.ErrArgInvalid, "Read vector is invalid"},
		{"readv of too many segments", func() []byte {
			r := proto.ReadVRequest{Segs: make([]proto.ReadSeg, 1025)}
			return r.Append(nil, rc.next())
		}, proto.ErrArgTooLong, "readv_iov_max"},
		{"readv segment too long", func() []byte {
			r := proto.ReadVRequest{Segs: []proto.ReadSeg{{FHandle: fh, Length: 3 << 20}}}
			return r.Append(nil, rc.next())
		}, proto.ErrArgTooLong, "readv_ior_max"},
		{"readv past the end", func() []byte {
			r := proto.ReadVRequest{Segs: []proto.ReadSeg{{FHandle: fh, Length: 100, Offset: 9950}}}
			return r.Append(nil, rc.next())
		}, proto.ErrIOError, "past the end"},
		{"readv of an unknown handle", func() []byte {
			r := proto.ReadVRequest{Segs: []proto.ReadSeg{{FHandle: fh, Length: 1}, {FHandle: badFH, Length: 1}}}
			return r.Append(nil, rc.next())
		}, proto.ErrFileNotOpen, ""},
		{"pgread of length zero", func() []byte {
			r := proto.PgReadRequest{FHandle: fh}
			return r.Append(nil, rc.next())
		}, proto.ErrArgInvalid, "length"},
		{"negative read length", func() []byte {
			var b [16]byte
			copy(b[:], fh[:])
			binary.BigEndian.PutUint32(b[12:], 0xffffffff)
			return request(rc.next(), proto.ReqRead, b, nil)
		}, proto.ErrArgInvalid, ""},
		{"oversized request body", func() []byte {
			return request(rc.next(), proto.ReqOpen, [16]byte{}, make([]byte, 100<<10))
		}, proto.ErrArgTooLong, "longer than the limit"},
		{"write payload is skipped", func() []byte {
			var b [16]byte
			copy(b[:], fh[:])
			return request(rc.next(), proto.ReqWrite, b, bytes.Repeat([]byte{'w'}, 200<<10))
		}, proto.ErrFSReadOnly, "read-only"},
		{"open for update", func() []byte {
			r := proto.OpenRequest{Options: proto.OpenUpdate, Path: "/f"}
			return r.Append(nil, rc.next())
		}, proto.ErrFSReadOnly, "open /f for writing refused"},
		{"open for create", func() []byte {
			r := proto.OpenRequest{Options: proto.OpenNew | proto.OpenMkpath, Path: "/g?oss.asize=1"}
			return r.Append(nil, rc.next())
		}, proto.ErrFSReadOnly, "read-only"},
		{"rm", func() []byte {
			return request(rc.next(), proto.ReqRm, [16]byte{}, []byte("/f"))
		}, proto.ErrFSReadOnly, ""},
		{"open of a missing file", func() []byte {
			r := proto.OpenRequest{Options: proto.OpenRead, Path: "/nope"}
			return r.Append(nil, rc.next())
		}, proto.ErrNotFound, "/nope"},
		{"open of a directory", func() []byte {
			r := proto.OpenRequest{Options: proto.OpenRead, Path: "/"}
			return r.Append(nil, rc.next())
		}, proto.ErrIsDirectory, ""},
		{"open without a path", func() []byte {
			return request(rc.next(), proto.ReqOpen, [16]byte{}, nil)
		}, proto.ErrArgMissing, ""},
		{"path with a NUL", func() []byte {
			r := proto.OpenRequest{Options: proto.OpenRead, Path: "/f\x00/../../etc/passwd"}
			return r.Append(nil, rc.next())
		}, proto.ErrArgInvalid, "NUL"},
		{"path escaping the root", func() []byte {
			r := proto.StatRequest{Path: "/../../etc/passwd"}
			return r.Append(nil, rc.next())
		}, proto.ErrArgInvalid, "climbs above the root"},
		{"relative path", func() []byte {
			r := proto.StatRequest{Path: "etc/passwd"}
			return r.Append(nil, rc.next())
		}, proto.ErrArgInvalid, "not absolute"},
		{"path too long", func() []byte {
			r := proto.StatRequest{Path: "/" + strings.Repeat("x", 5000)}
			return r.Append(nil, rc.next())
		}, proto.ErrArgTooLong, ""},
		{"stat vfs by handle", func() []byte {
			r := proto.StatRequest{Options: proto.StatVFS, FHandle: fh}
			return r.Append(nil, rc.next())
		}, proto.ErrArgMissing, ""},
		{"unknown request", func() []byte {
			return request(rc.next(), proto.RequestID(3999), [16]byte{}, nil)
		}, proto.ErrUnsupported, "not supported"},
		{"bind", func() []byte {
			return request(rc.next(), proto.ReqBind, [16]byte{}, nil)
		}, proto.ErrUnsupported, ""},
		{"query of an unknown type", func() []byte {
			r := proto.QueryRequest{Type: 999, Args: "x"}
			return r.Append(nil, rc.next())
		}, proto.ErrArgInvalid, ""},
		{"query config without keys", func() []byte {
			r := proto.QueryRequest{Type: proto.QueryConfig}
			return r.Append(nil, rc.next())
		}, proto.ErrArgMissing, ""},
		{"checksum of an unsupported algorithm", func() []byte {
			r := proto.QueryRequest{Type: proto.QueryChecksum, Args: "/f?cks.type=md5"}
			return r.Append(nil, rc.next())
		}, proto.ErrServerError, "md5 checksum not supported"},
		{"second login", func() []byte {
			r := proto.LoginRequest{Username: "x"}
			return r.Append(nil, rc.next())
		}, proto.ErrInvalidRequest, "already logged in"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, body := rc.call(tt.req())
			msg := expectError(t, h, body, tt.code)
			if !strings.Contains(msg, tt.msg) {
				t.Fatalf("message %q does not mention %q", msg, tt.msg)
			}
			rc.ping()
		})
	}
}

func TestFramingErrorsEndTheConnection(t *testing.T) {
	ts := startServer(t, "", nil)
	t.Run("request before login", func(t *testing.T) {
		rc := dialRaw(t, ts.addr, false)
		rc.send(proto.AppendClientHandshake(nil))
		var hs [proto.ServerHandshakeLen]byte
		io.ReadFull(rc.br, hs[:])
		r := proto.StatRequest{Path: "/"}
		h, body := rc.call(r.Append(nil, rc.next()))
		expectError(t, h, body, proto.ErrInvalidRequest)
		if _, err := rc.br.ReadByte(); err != io.EOF {
			t.Fatalf("connection still open after a request before login: %v", err)
		}
	})
	t.Run("negative data length", func(t *testing.T) {
		rc := dialRaw(t, ts.addr, true)
		b := request(rc.next(), proto.ReqPing, [16]byte{}, nil)
		binary.BigEndian.PutUint32(b[20:], 0x80000000)
		h, body := rc.call(b)
		expectError(t, h, body, proto.ErrArgInvalid)
		if _, err := rc.br.ReadByte(); err != io.EOF {
			t.Fatalf("connection still open after a broken frame: %v", err)
		}
	})
	t.Run("not xrootd", func(t *testing.T) {
		rc := dialRaw(t, ts.addr, false)
		rc.send([]byte("GET / HTTP/1.0\r\n\r\n\r\n"))
		if _, err := rc.br.ReadByte(); err != io.EOF {
			t.Fatalf("a non-XRootD client got an answer: %v", err)
		}
	})
}

// TestPgReadPages checks the pgread layout against the rules XrdCl relies
// on, with Stream chunks that end inside pages and reads that start
// unaligned, end at or beyond the end of file.
func TestPgReadPages(t *testing.T) {
	ts := startServer(t, "", func(c *Config, r *recorder) {
		c.MaxMessage = 3 * pageSize
		r.chunks = []int{1000, 3, 9000, 4096, 1, 20000}
	})
	const size = 50_000
	writeRandom(t, ts.dir, "f", size)
	data, _ := os.ReadFile(filepath.Join(ts.dir, "f"))
	rc := dialRaw(t, ts.addr, true)
	fh := rc.open("/f")
	tests := []struct {
		off int64
		n   int32
	}{
		{0, size}, {0, 1}, {1000, 30000}, {4095, 2}, {4096, 4096}, {12345, 100000}, {size - 1, 10}, {size, 10}, {size + 5000, 10},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d@%d", tt.n, tt.off), func(t *testing.T) {
			r := proto.PgReadRequest{FHandle: fh, Offset: tt.off, Length: tt.n, NArgs: 2, ReqFlags: proto.PgRetry}
			sid := rc.next()
			rc.send(r.Append(nil, sid))
			var got []byte
			next := tt.off
			for {
				h, body, wire := rc.read()
				if h.Status != proto.StatusStatus || h.StreamID != sid {
					t.Fatalf("answer %v on stream %v: %q", h.Status, h.StreamID, body)
				}
				st, info, _ := proto.DecodeStatus(body)
				off, _ := proto.PgReadOffset(info)
				if st.RequestID != proto.ReqPgRead || st.StreamID != sid || off != next {
					t.Fatalf("status %+v at offset %d, want offset %d", st, off, next)
				}
				buf := make([]byte, len(wire))
				n, err := proto.UnpackPgRead(buf, wire, off)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, buf[:n]...)
				next += int64(n)
				if st.RespType == proto.FinalResult {
					break
				}
				if next%pageSize != 0 {
					t.Fatalf("partial answer ends at %d, inside a page", next)
				}
				if n > 3*pageSize+pageSize {
					t.Fatalf("message of %d bytes exceeds MaxMessage", n)
				}
			}
			end := min(tt.off+int64(tt.n), size)
			want := []byte{}
			if tt.off < size {
				want = data[tt.off:end]
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("got %d bytes, want %d (equal prefix: %v)", len(got), len(want), bytes.HasPrefix(want, got))
			}
		})
	}
}

func TestReadInMessages(t *testing.T) {
	ts := startServer(t, "", func(c *Config, r *recorder) {
		c.MaxMessage = 10000
		r.chunks = []int{7777}
	})
	writeRandom(t, ts.dir, "f", 100_000)
	data, _ := os.ReadFile(filepath.Join(ts.dir, "f"))
	rc := dialRaw(t, ts.addr, true)
	fh := rc.open("/f")
	r := proto.ReadRequest{FHandle: fh, Offset: 5, Length: 200_000}
	rc.send(r.Append(nil, rc.next()))
	var got []byte
	parts := 0
	for {
		h, body, _ := rc.read()
		got = append(got, body...)
		parts++
		if len(body) > 10000 {
			t.Fatalf("message of %d bytes exceeds MaxMessage", len(body))
		}
		if h.Status == proto.StatusOK {
			break
		}
		if h.Status != proto.StatusOKSoFar {
			t.Fatalf("answer %v", h.Status)
		}
	}
	if !bytes.Equal(got, data[5:]) || parts < 10 {
		t.Fatalf("read returned %d bytes in %d parts", len(got), parts)
	}
}

// TestPipelining sends many requests at once, as XrdCl does, and matches
// the answers by stream id.
func TestPipelining(t *testing.T) {
	ts := startServer(t, "", func(c *Config, r *recorder) {
		c.MaxInFlight = 4 // fewer than the requests: the reader must wait
		c.MaxMessage = 8192
	})
	writeRandom(t, ts.dir, "f", 1<<20)
	data, _ := os.ReadFile(filepath.Join(ts.dir, "f"))
	rc := dialRaw(t, ts.addr, true)
	fh := rc.open("/f")
	type want struct {
		off, n int
		kind   proto.RequestID
	}
	wants := map[proto.StreamID]want{}
	var batch []byte
	for i := 0; i < 60; i++ {
		sid := rc.next()
		off, n := i*15000, 20000+i
		switch i % 3 {
		case 0:
			r := proto.ReadRequest{FHandle: fh, Offset: int64(off), Length: int32(n)}
			batch = r.Append(batch, sid)
			wants[sid] = want{off, n, proto.ReqRead}
		case 1:
			r := proto.PgReadRequest{FHandle: fh, Offset: int64(off), Length: int32(n)}
			batch = r.Append(batch, sid)
			wants[sid] = want{off, n, proto.ReqPgRead}
		case 2:
			r := proto.ReadVRequest{Segs: []proto.ReadSeg{{FHandle: fh, Offset: int64(off), Length: 100}, {FHandle: fh, Offset: int64(off + 5000), Length: int32(n)}}}
			batch = r.Append(batch, sid)
			wants[sid] = want{off, n, proto.ReqReadV}
		}
	}
	rc.send(batch)
	got := map[proto.StreamID][]byte{}
	for len(wants) > 0 {
		h, body, wire := rc.read()
		w, ok := wants[h.StreamID]
		if !ok {
			t.Fatalf("answer %v for unknown stream %v", h.Status, h.StreamID)
		}
		final := false
		switch h.Status {
		case proto.StatusOK:
			got[h.StreamID] = append(got[h.StreamID], body...)
			final = true
		case proto.StatusOKSoFar:
			got[h.StreamID] = append(got[h.StreamID], body...)
		case proto.StatusStatus:
			st, info, _ := proto.DecodeStatus(body)
			off, _ := proto.PgReadOffset(info)
			buf := make([]byte, len(wire))
			n, err := proto.UnpackPgRead(buf, wire, off)
			if err != nil {
				t.Fatal(err)
			}
			got[h.StreamID] = append(got[h.StreamID], buf[:n]...)
			final = st.RespType == proto.FinalResult
		default:
			t.Fatalf("answer %v %q", h.Status, body)
		}
		if !final {
			continue
		}
		b := got[h.StreamID]
		switch w.kind {
		case proto.ReqRead, proto.ReqPgRead:
			if end := min(w.off+w.n, len(data)); !bytes.Equal(b, data[w.off:end]) {
				t.Fatalf("%v %d@%d: wrong data", w.kind, w.n, w.off)
			}
		case proto.ReqReadV:
			var exp []byte
			exp = proto.AppendReadSeg(exp, proto.ReadSeg{FHandle: fh, Offset: int64(w.off), Length: 100})
			exp = append(exp, data[w.off:w.off+100]...)
			exp = proto.AppendReadSeg(exp, proto.ReadSeg{FHandle: fh, Offset: int64(w.off + 5000), Length: int32(w.n)})
			exp = append(exp, data[w.off+5000:w.off+5000+w.n]...)
			if !bytes.Equal(b, exp) {
				t.Fatalf("readv at %d: wrong answer", w.off)
			}
		}
		delete(wants, h.StreamID)
	}
}

// TestChecksumWaitResp makes the checksum slower than ChecksumWait: the
// client gets kXR_waitresp, then the answer as kXR_attn/kXR_asynresp.
func TestChecksumWaitResp(t *testing.T) {
	gate := make(chan struct{})
	ts := startServer(t, "", func(c *Config, r *recorder) {
		c.ChecksumWait = time.Millisecond
		r.checksumGate = gate
	})
	ts.srv.afterWaitResp = func() { close(gate) }
	writeRandom(t, ts.dir, "f", 12345)
	data, _ := os.ReadFile(filepath.Join(ts.dir, "f"))
	rc := dialRaw(t, ts.addr, true)
	sid := rc.next()
	r := proto.QueryRequest{Type: proto.QueryChecksum, Args: "/f"}
	rc.send(r.Append(nil, sid))
	h, body, _ := rc.read()
	if h.Status != proto.StatusWaitResp || h.StreamID != sid {
		t.Fatalf("first answer %v on %v, want kXR_waitresp", h.Status, h.StreamID)
	}
	h, body, _ = rc.read()
	action, inner, idata, err := proto.DecodeAttn(body)
	if h.Status != proto.StatusAttn || err != nil || action != proto.AttnAsynResp {
		t.Fatalf("second answer %v action %v: %v", h.Status, action, err)
	}
	want := fmt.Sprintf("adler32 %08x\x00", adler32.Checksum(data))
	if inner.StreamID != sid || inner.Status != proto.StatusOK || string(idata) != want {
		t.Fatalf("asynresp %+v %q, want %q", inner, idata, want)
	}
	rc.ping()
}

// TestRedirectAndWait checks the encoding of the backend's RedirectError
// and WaitError.
func TestRedirectAndWait(t *testing.T) {
	ts := startServer(t, "", func(c *Config, r *recorder) {
		r.openErr = func(req backend.Request) error {
			switch req.Path {
			case "/redirect":
				return &backend.RedirectError{URL: "root://node2.example:2094//redirect?tried=a", Host: "node2.example", Port: 2094}
			case "/redirect-url":
				return &backend.RedirectError{URL: "file:///data/redirect-url"}
			case "/wait":
				return &backend.WaitError{Seconds: 7, Reason: "staging"}
			}
			return nil
		}
	})
	rc := dialRaw(t, ts.addr, true)
	open := func(p string) (proto.ResponseHeader, []byte) {
		r := proto.OpenRequest{Options: proto.OpenRead, Path: p}
		return rc.call(r.Append(nil, rc.next()))
	}
	h, body := open("/redirect")
	port, host, err := proto.DecodeRedirect(body)
	if h.Status != proto.StatusRedirect || err != nil || port != 2094 || host != "node2.example?tried=a" {
		t.Fatalf("redirect answer %v %d %q %v", h.Status, port, host, err)
	}
	h, body = open("/redirect-url")
	port, host, err = proto.DecodeRedirect(body)
	if h.Status != proto.StatusRedirect || err != nil || port != -1 || host != "file:///data/redirect-url" {
		t.Fatalf("URL redirect answer %v %d %q %v", h.Status, port, host, err)
	}
	h, body = open("/wait")
	secs, msg, err := proto.DecodeWait(body)
	if h.Status != proto.StatusWait || err != nil || secs != 7 || msg != "staging" {
		t.Fatalf("wait answer %v %d %q %v", h.Status, secs, msg, err)
	}
}

func TestEndsessEndsTheOldSession(t *testing.T) {
	ts := startServer(t, "", nil)
	writeRandom(t, ts.dir, "f", 100)
	old := dialRaw(t, ts.addr, false)
	b := proto.AppendClientHandshake(nil)
	lr := proto.LoginRequest{Username: "tester", CapVer: proto.LoginVer005}
	b = lr.Append(b, old.next())
	old.send(b)
	var hs [proto.ServerHandshakeLen]byte
	io.ReadFull(old.br, hs[:])
	_, body, _ := old.read()
	lresp, err := proto.DecodeLoginResponse(body)
	if err != nil {
		t.Fatal(err)
	}
	old.open("/f")

	rc := dialRaw(t, ts.addr, true)
	er := proto.EndsessRequest{SessID: lresp.SessID}
	if h, body := rc.call(er.Append(nil, rc.next())); h.Status != proto.StatusOK {
		t.Fatalf("endsess: %v %q", h.Status, body)
	}
	if _, err := old.br.ReadByte(); err == nil {
		t.Fatal("the old session is still open")
	}
	rc.ping()
}

func TestAuthorizer(t *testing.T) {
	ts := startServer(t, "", func(c *Config, r *recorder) {
		c.Authorizer = AuthorizerFunc(func(ctx context.Context, op Op, req backend.Request) error {
			if id := IdentityFrom(ctx); id == nil || id.Name != "tester" || req.User != "tester" {
				return fmt.Errorf("no identity in %v: %w", req, backend.ErrForbidden)
			}
			if strings.HasPrefix(req.Path, "/secret") {
				return fmt.Errorf("%s %s: only the physics group may read /secret: %w", op, req.Path, backend.ErrForbidden)
			}
			return nil
		})
	})
	writeRandom(t, ts.dir, "secret/f", 100)
	writeRandom(t, ts.dir, "public/f", 100)
	rc := dialRaw(t, ts.addr, true)
	rc.open("/public/f")
	r := proto.OpenRequest{Options: proto.OpenRead, Path: "/secret/f"}
	h, body := rc.call(r.Append(nil, rc.next()))
	if msg := expectError(t, h, body, proto.ErrNotAuthorized); !strings.Contains(msg, "physics group") {
		t.Fatalf("denial message %q lacks the reason", msg)
	}
	for _, req := range ts.rec.requests() {
		if strings.HasPrefix(req.Path, "/secret") {
			t.Fatalf("the backend saw the denied request %v", req)
		}
	}
}

// TestShutdownFinishesRequests starts a read that blocks in the backend,
// shuts down, and checks that the read still completes before Shutdown
// returns, while new connections are refused.
func TestShutdownFinishesRequests(t *testing.T) {
	gate, started := make(chan struct{}), make(chan struct{}, 1)
	ts := startServer(t, "", func(c *Config, r *recorder) { r.readGate, r.streaming = gate, started })
	writeRandom(t, ts.dir, "f", 5000)
	rc := dialRaw(t, ts.addr, true)
	fh := rc.open("/f")
	r := proto.ReadRequest{FHandle: fh, Length: 5000}
	rc.send(r.Append(nil, rc.next()))
	<-started

	shut := make(chan error, 1)
	go func() { shut <- ts.srv.Shutdown(context.Background()) }()
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a read in progress", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(gate)
	h, body, _ := rc.read()
	if h.Status != proto.StatusOK || len(body) != 5000 {
		t.Fatalf("read during shutdown: %v, %d bytes", h.Status, len(body))
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if _, err := rc.br.ReadByte(); err == nil {
		t.Fatal("connection open after Shutdown")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.srv.Serve(ln); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve after Shutdown = %v", err)
	}
}

// TestShutdownAnswersEveryRequest (issue 29 item 9): no request is left
// without an answer when the server goes away. A read blocked in the
// backend past the shutdown deadline, and a stat sent while the server
// drains, are each answered with kXR_wait before the connection closes
// (the connection was closed with the read unanswered: XrdCl then retried
// blindly); a ping while draining is answered.
func TestShutdownAnswersEveryRequest(t *testing.T) {
	gate, started := make(chan struct{}), make(chan struct{}, 1)
	defer close(gate)
	ts := startServer(t, "", func(c *Config, r *recorder) { r.readGate, r.streaming = gate, started })
	writeRandom(t, ts.dir, "f", 5000)
	rc := dialRaw(t, ts.addr, true)
	fh := rc.open("/f")
	r := proto.ReadRequest{FHandle: fh, Length: 5000}
	readSID := rc.next()
	rc.send(r.Append(nil, readSID))
	<-started

	ctx, cancel := context.WithCancel(context.Background())
	shut := make(chan error, 1)
	go func() { shut <- ts.srv.Shutdown(ctx) }()
	// While draining: a ping is answered, a stat told to wait.
	eventually.True(t, func() bool { return ts.srv.closingNow() }, "the server to drain")
	pingSID := rc.next()
	rc.send(request(pingSID, proto.ReqPing, [16]byte{}, nil))
	if h, _, _ := rc.read(); h.StreamID != pingSID || h.Status != proto.StatusOK {
		t.Fatalf("ping while draining: %v %v", h.StreamID, h.Status)
	}
	st := proto.StatRequest{Path: "/f"}
	statSID := rc.next()
	rc.send(st.Append(nil, statSID))
	if h, body, _ := rc.read(); h.StreamID != statSID || h.Status != proto.StatusWait {
		t.Fatalf("stat while draining: %v %v %q, want kXR_wait", h.StreamID, h.Status, body)
	}
	// The deadline: the read still blocked is answered, then the
	// connection closes.
	cancel()
	h, body, _ := rc.read()
	secs, msg, err := proto.DecodeWait(body)
	if h.StreamID != readSID || h.Status != proto.StatusWait || err != nil || secs < 1 {
		t.Fatalf("read at the shutdown deadline: %v %v %d %q %v, want kXR_wait", h.StreamID, h.Status, secs, msg, err)
	}
	if err := <-shut; !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown: %v", err)
	}
	if _, err := rc.br.ReadByte(); err == nil {
		t.Fatal("connection open after Shutdown")
	}
}

// fakeAuth is a two-step security protocol: a challenge, then the answer
// "secret" logs the client in as alice.
type fakeAuth struct{}

func (fakeAuth) Params(c ConnInfo) string { return "&P=fake,v:1" }

func (fakeAuth) Authenticate(ctx context.Context, c ConnInfo, credType string, cred []byte) (*Identity, []byte, error) {
	switch {
	case credType != "fake":
		return nil, nil, fmt.Errorf("unknown protocol %q", credType)
	case string(cred) == "hello":
		return nil, []byte("challenge"), nil
	case string(cred) == "secret":
		return &Identity{Name: "alice", Attrs: "vo=cms"}, nil, nil
	}
	return nil, nil, errors.New("wrong answer")
}

func TestAuthenticator(t *testing.T) {
	var seenP atomic.Pointer[Identity]
	ts := startServer(t, "", func(c *Config, r *recorder) {
		c.Authenticator = fakeAuth{}
		c.Authorizer = AuthorizerFunc(func(ctx context.Context, op Op, req backend.Request) error {
			seenP.Store(IdentityFrom(ctx))
			return nil
		})
	})
	writeRandom(t, ts.dir, "f", 10)
	auth := func(rc *rawClient, cred string) (proto.ResponseHeader, []byte) {
		r := proto.AuthRequest{Cred: []byte(cred)}
		copy(r.CredType[:], "fake")
		return rc.call(r.Append(nil, rc.next()))
	}
	rc := dialRaw(t, ts.addr, false)
	b := proto.AppendClientHandshake(nil)
	lr := proto.LoginRequest{Username: "tester", CapVer: proto.LoginVer005}
	rc.send(lr.Append(b, rc.next()))
	var hs [proto.ServerHandshakeLen]byte
	io.ReadFull(rc.br, hs[:])
	_, body, _ := rc.read()
	if resp, err := proto.DecodeLoginResponse(body); err != nil || string(resp.Sec) != "&P=fake,v:1" {
		t.Fatalf("login answer %q %v: want the security parameters", resp.Sec, err)
	}
	h, body := auth(rc, "wrong")
	expectError(t, h, body, proto.ErrAuthFailed)
	h, body = auth(rc, "hello")
	if h.Status != proto.StatusAuthMore || string(body) != "challenge" {
		t.Fatalf("auth step 1: %v %q", h.Status, body)
	}
	if h, body = auth(rc, "secret"); h.Status != proto.StatusOK {
		t.Fatalf("auth step 2: %v %q", h.Status, body)
	}
	rc.open("/f")
	if seen := seenP.Load(); seen == nil || seen.Name != "alice" || !seen.Authenticated || seen.Protocol != "fake" || seen.Attrs != "vo=cms" {
		t.Fatalf("authorizer saw identity %+v", seenP.Load())
	}
	if reqs := ts.rec.requests(); reqs[len(reqs)-1].User != "alice" {
		t.Fatalf("backend request user %q", reqs[len(reqs)-1].User)
	}

	// Without authentication, nothing but auth, ping and protocol works.
	rc2 := dialRaw(t, ts.addr, false)
	rc2.send(lr.Append(proto.AppendClientHandshake(nil), rc2.next()))
	io.ReadFull(rc2.br, hs[:])
	rc2.read()
	r := proto.StatRequest{Path: "/f"}
	h, body = rc2.call(r.Append(nil, rc2.next()))
	expectError(t, h, body, proto.ErrInvalidRequest)
}

// TestCloseCancelsRequests checks that Close does not wait for a request
// stuck in the backend: it is answered with kXR_wait (issue 29 item 9) and
// its context is cancelled.
func TestCloseCancelsRequests(t *testing.T) {
	gate, started := make(chan struct{}), make(chan struct{}, 1)
	defer close(gate)
	ts := startServer(t, "", func(c *Config, r *recorder) { r.readGate, r.streaming = gate, started })
	writeRandom(t, ts.dir, "f", 5000)
	rc := dialRaw(t, ts.addr, true)
	fh := rc.open("/f")
	r := proto.ReadRequest{FHandle: fh, Length: 5000}
	rc.send(r.Append(nil, rc.next()))
	<-started
	if err := ts.srv.Close(); err != nil {
		t.Fatal(err)
	}
	if h, _, _ := rc.read(); h.Status != proto.StatusWait {
		t.Fatalf("the read at Close: %v, want kXR_wait", h.Status)
	}
	if _, err := rc.br.ReadByte(); err == nil {
		t.Fatal("connection open after Close")
	}
}
