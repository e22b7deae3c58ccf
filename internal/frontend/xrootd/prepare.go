package xrootd

import (
	"context"
	"errors"
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
		if err := st.CancelStage(c.stageOwner(ctx), r.Paths[0]); err != nil {
			return c.stageErr(h.StreamID, r.Paths[0], err)
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
	id, err := st.Stage(c.stageOwner(ctx), reqs)
	if err != nil {
		return c.sendErr(h.StreamID, err)
	}
	return c.sendOK(h.StreamID, []byte(id))
}

// queryPrepare answers query prepare: args are the request id, then
// optionally paths (ignored: the answer covers the whole job), one per
// line. The answer is the job's text (backend.StageJob.Text).
func (c *conn) queryPrepare(ctx context.Context, sid proto.StreamID, args string) error {
	if c.cfg.Stager == nil {
		return c.fail(sid, proto.ErrUnsupported, "kXR_prepare is not enabled on this server")
	}
	id, _, _ := strings.Cut(strings.TrimSpace(args), "\n")
	id = strings.TrimSpace(id)
	if id == "" {
		return c.fail(sid, proto.ErrArgMissing, "query prepare needs a request id")
	}
	j, err := c.cfg.Stager.StageStatus(c.stageOwner(ctx), id)
	if err != nil {
		return c.stageErr(sid, id, err)
	}
	return c.sendOK(sid, []byte(j.Text()))
}

// stageOwner is who this connection's prepare jobs belong to: the
// authenticated identity, else the client's host (a login name is only
// what the client claims).
func (c *conn) stageOwner(ctx context.Context) backend.Owner {
	if id := IdentityFrom(ctx); id != nil && id.Authenticated && id.Name != "" {
		return backend.UserOwner(id.Name)
	}
	return backend.HostOwner(c.remote)
}

// stageErr answers a query or cancel of a job that is unknown
// (kXR_ArgInvalid) or someone else's (kXR_NotAuthorized).
func (c *conn) stageErr(sid proto.StreamID, id string, err error) error {
	if errors.Is(err, backend.ErrUnknownJob) {
		return c.fail(sid, proto.ErrArgInvalid, "unknown prepare request id "+id)
	}
	return c.sendErr(sid, err)
}
