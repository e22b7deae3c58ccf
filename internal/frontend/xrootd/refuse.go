package xrootd

import (
	"fmt"
	"io"

	"github.com/hepcache/hepcache/internal/xrootd/proto"
)

// maxRefusing bounds the connections over MaxConnections that are kept
// open to be told why (within the handshake timeout); beyond it, further
// connections are closed at once.
const maxRefusing = 64

// refuseFull answers a connection over MaxConnections: kXR_protocol and
// kXR_login as usual (XrdCl drops the text of an error to either), then
// kXR_Overloaded with a message saying why to the first real request, so
// that the client reports the reason instead of a dropped connection.
func (c *conn) refuseFull() {
	for i := 0; i < 3; i++ {
		var hb [proto.RequestHeaderLen]byte
		if _, err := io.ReadFull(c.br, hb[:]); err != nil {
			return
		}
		h, err := proto.DecodeRequestHeader(hb[:])
		if err != nil || int(h.Dlen) > c.cfg.MaxRequestBody {
			return
		}
		if _, err := io.CopyN(io.Discard, c.br, int64(h.Dlen)); err != nil {
			return
		}
		if h.RequestID == proto.ReqProtocol && i == 0 {
			resp := proto.ProtocolResponse{PVal: proto.ProtocolVersion, Flags: proto.IsServer | proto.SupPgRW}
			if c.w.write(proto.AppendProtocolResponse(nil, h.StreamID, &resp)) != nil {
				return
			}
			continue
		}
		if h.RequestID == proto.ReqLogin && i <= 1 {
			var resp proto.LoginResponse // a session id of zeros: never registered
			if c.w.write(proto.AppendLoginResponse(nil, h.StreamID, &resp)) != nil {
				return
			}
			continue
		}
		why := c.refuseWhy
		if why == "" {
			why = fmt.Sprintf("server busy: it serves at most %d connections; retry later", c.cfg.MaxConnections)
		}
		c.sendError(h.StreamID, proto.ErrOverloaded, why)
		return
	}
}
