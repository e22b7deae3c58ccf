package xrootd

import (
	"github.com/hepcache/hepcache/internal/connlimit"
	"github.com/hepcache/hepcache/internal/xrootd/proto"
)

// tellBusy answers a request on a connection over a bound with kXR_wait,
// saying which bound. kXR_Overloaded, answered before, is final for a
// client with no redirector to go back to (XrdCl retries it only at a
// load balancer): the client gave up on a busy server instead of waiting
// for its turn.
func (c *conn) tellBusy(sid proto.StreamID) {
	c.w.write(appendBusy(nil, sid, connlimit.RetryAfter, c.pass.Reason()))
}
