package xrdtest

import (
	"bufio"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/hepcache/hepcache/internal/xrootd/proto"
)

// FakeHandler answers one request of a FakeServer. It returns the bytes to
// send (any number of whole or partial responses) and whether to close the
// connection afterwards. When it returns nothing for kXR_protocol or
// kXR_login, the server answers like a v5 data server without security.
type FakeHandler func(h proto.RequestHeader, data []byte) (resp []byte, hangup bool)

// FakeServer is a scripted root:// server for failure-path tests: it does
// the handshake, kXR_protocol and kXR_login like a v5 data server and hands
// every later request to its handler, in order, one connection at a time
// per goroutine.
type FakeServer struct {
	// Addr is "127.0.0.1:port".
	Addr string
	ln   net.Listener

	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

// StartFake starts a FakeServer on a free loopback port; it stops at
// cleanup.
func StartFake(tb testing.TB, handler FakeHandler) *FakeServer {
	tb.Helper()
	return StartFakeStream(tb, func(w io.Writer, h proto.RequestHeader, data []byte) bool {
		resp, hangup := handler(h, data)
		if resp == nil && !hangup {
			resp = DefaultAnswer(h)
		}
		if len(resp) > 0 {
			if _, err := w.Write(resp); err != nil {
				return true
			}
		}
		return hangup
	})
}

// FakeStreamHandler answers one request by writing to w itself, so that it
// can trickle a response, pause inside it or cut it; it returns whether to
// close the connection. DefaultAnswer gives the login exchange.
type FakeStreamHandler func(w io.Writer, h proto.RequestHeader, data []byte) (hangup bool)

// DefaultAnswer is a v5 data server's answer to kXR_protocol and kXR_login
// without security, nil for other requests.
func DefaultAnswer(h proto.RequestHeader) []byte {
	switch h.RequestID {
	case proto.ReqProtocol:
		return proto.AppendProtocolResponse(nil, h.StreamID, &proto.ProtocolResponse{PVal: proto.ProtocolVersion, Flags: proto.IsServer})
	case proto.ReqLogin:
		return proto.AppendLoginResponse(nil, h.StreamID, &proto.LoginResponse{SessID: [16]byte{1}})
	}
	return nil
}

// StartFakeStream is StartFake with a handler that writes its answers.
func StartFakeStream(tb testing.TB, handler FakeStreamHandler) *FakeServer {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("xrdtest: %v", err)
	}
	s := &FakeServer{Addr: ln.Addr().String(), ln: ln, conns: map[net.Conn]bool{}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns[c] = true
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serve(c, handler)
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				c.Close()
			}()
		}
	}()
	tb.Cleanup(s.Close)
	return s
}

// DropConns closes every open connection (the listener stays).
func (s *FakeServer) DropConns() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.Close()
	}
}

// Close stops the server and waits for its goroutines.
func (s *FakeServer) Close() {
	s.ln.Close()
	s.DropConns()
	s.wg.Wait()
}

func (s *FakeServer) serve(c net.Conn, handler FakeStreamHandler) {
	br := bufio.NewReader(c)
	hs := make([]byte, proto.ClientHandshakeLen)
	if _, err := io.ReadFull(br, hs); err != nil || proto.CheckClientHandshake(hs) != nil {
		return
	}
	if _, err := c.Write(proto.AppendServerHandshake(nil, proto.ProtocolVersion, proto.DataServer)); err != nil {
		return
	}
	hb := make([]byte, proto.RequestHeaderLen)
	for {
		if _, err := io.ReadFull(br, hb); err != nil {
			return
		}
		h, err := proto.DecodeRequestHeader(hb)
		if err != nil || h.Dlen > 1<<20 {
			return
		}
		data := make([]byte, h.Dlen)
		if _, err := io.ReadFull(br, data); err != nil {
			return
		}
		if handler(c, h, data) {
			return
		}
	}
}
