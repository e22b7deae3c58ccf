package xrootd

import (
	"context"
	"strings"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/xrootd/proto"
)

// doPrepare answers kXR_prepare. A cache has one useful reading of it:
// fetch these files now (xrdfs prepare -s, FTS bring-online, a workflow
// warming its inputs). Every prepare but a cancel therefore stages, and
// the answer is the job's request id, which query prepare and a cancel
// take. kXR_evict (the files are no longer needed) is accepted as a hint
// and does nothing: the LRU will find them.
func (c *conn) doPrepare(ctx context.Context, h proto.RequestHeader, body []byte) error {
	var r proto.PrepareRequest
	if err := r.Decode(&h, body); err != nil {
		return c.decodeErr(h.StreamID, err)
	}
	st := c.cfg.Stager
	if st == nil {
		return c.fail(h.StreamID, proto.ErrUnsupported, "kXR_prepare is not enabled on this server")
	}
	if r.Options&proto.PrepareCancel != 0 {
		if !st.CancelStage(r.Paths[0]) {
			return c.fail(h.StreamID, proto.ErrArgInvalid, "unknown prepare request id "+r.Paths[0])
		}
		return c.sendOK(h.StreamID, nil)
	}
	if r.OptionX&proto.PrepareEvict != 0 {
		return c.sendOK(h.StreamID, nil)
	}
	reqs := make([]backend.Request, 0, len(r.Paths))
	for _, p := range r.Paths {
		req, err := c.pathRequest(ctx, h.StreamID, OpOpen, p)
		if err != nil {
			return err
		}
		if req.NoFetch {
			return c.fail(h.StreamID, proto.ErrNotAuthorized, "prepare of "+req.Path+": this identity may read cached data but not start downloads")
		}
		reqs = append(reqs, req)
	}
	id, err := st.Stage(reqs)
	if err != nil {
		return c.sendErr(h.StreamID, err)
	}
	return c.sendOK(h.StreamID, []byte(id))
}

// queryPrepare answers query prepare: args are the request id, then
// optionally paths (ignored: the answer covers the whole job), one per
// line. The answer is the job's text (backend.StageJob.Text).
func (c *conn) queryPrepare(sid proto.StreamID, args string) error {
	if c.cfg.Stager == nil {
		return c.fail(sid, proto.ErrUnsupported, "kXR_prepare is not enabled on this server")
	}
	id, _, _ := strings.Cut(strings.TrimSpace(args), "\n")
	id = strings.TrimSpace(id)
	if id == "" {
		return c.fail(sid, proto.ErrArgMissing, "query prepare needs a request id")
	}
	j, ok := c.cfg.Stager.StageStatus(id)
	if !ok {
		return c.fail(sid, proto.ErrArgInvalid, "unknown prepare request id "+id)
	}
	return c.sendOK(sid, []byte(j.Text()))
}
