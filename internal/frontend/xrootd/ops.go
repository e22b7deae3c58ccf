package xrootd

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/xrootd/proto"
	"github.com/hepcache/hepcache/origin"
)

const (
	pageSize     = proto.PageSize
	maxReadVSegs = proto.MaxReadVSegs
	// dirlistChunk is the size of one dirlist response message.
	dirlistChunk = 64 << 10
	// waitRespSeconds is the time announced in kXR_waitresp: how long the
	// client should be prepared to wait for the asynchronous answer.
	waitRespSeconds = 600
)

// writeModes are the open options that would modify a file.
const writeModes = proto.OpenUpdate | proto.OpenWriteOnly | proto.OpenNew | proto.OpenDelete | proto.OpenAppend

// fileID is the "id" of a stat answer. XRootD uses device and inode; a
// cache has neither, so it hashes origin and path, which keeps the id
// stable across restarts and non-zero (zero marks offline files).
func fileID(originURL, path string) int64 {
	h := fnv.New64a()
	h.Write([]byte(originURL))
	h.Write([]byte{0})
	h.Write([]byte(path))
	id := int64(h.Sum64() >> 1)
	if id == 0 {
		id = 1
	}
	return id
}

// statInfo converts backend metadata to the stat answer. The server is
// read-only, so kXR_writable is never set.
func (c *conn) statInfo(originURL, path string, fi origin.FileInfo) proto.StatInfo {
	var flags proto.StatFlags
	perm := fi.Mode.Perm()
	switch {
	case fi.IsDir():
		flags |= proto.StatIsDir
	case fi.Mode&fs.ModeType != 0:
		flags |= proto.StatOther
	}
	if perm&0o444 != 0 {
		flags |= proto.StatReadable
	}
	if perm&0o111 != 0 {
		flags |= proto.StatXset
	}
	if fi.Offline {
		flags |= proto.StatOffline
	}
	mt := fi.ModTime.Unix()
	if fi.ModTime.IsZero() {
		mt = 0
	}
	return proto.StatInfo{
		ID: fileID(originURL, path), Size: fi.Size, Flags: flags, MTime: mt,
		Extended: true, CTime: mt, ATime: mt, Mode: uint32(perm),
		Owner: c.cfg.Owner, Group: c.cfg.Group,
	}
}

// decodeErr answers a request whose body does not decode.
func (c *conn) decodeErr(sid proto.StreamID, err error) error {
	code := proto.ErrArgInvalid
	if errors.Is(err, proto.ErrMalformed) && strings.Contains(err.Error(), "without a path") {
		code = proto.ErrArgMissing
	}
	return c.fail(sid, code, err.Error())
}

func (c *conn) doOpen(ctx context.Context, h proto.RequestHeader, body []byte) error {
	var r proto.OpenRequest
	if err := r.Decode(&h, body); err != nil {
		return c.decodeErr(h.StreamID, err)
	}
	if r.Options&writeModes != 0 {
		p, _, _ := strings.Cut(r.Path, "?")
		return c.fail(h.StreamID, proto.ErrFSReadOnly, fmt.Sprintf("open %s for writing refused: hepcache serves files read-only", p))
	}
	raw, retry := c.localFallback(r.Path)
	req, err := c.pathRequest(ctx, h.StreamID, OpOpen, raw)
	if err != nil {
		return err
	}
	if retry {
		// The client failed where it was sent (perhaps the local file
		// of a redirect, without the mount): serve it here.
		req.FollowsFileRedirect = false
	}
	f, err := c.cfg.Backend.Open(ctx, req)
	if err != nil {
		c.noteLocalRedirect(err, raw)
		return c.sendErr(h.StreamID, err)
	}
	of := c.files.add(f, req)
	if of == nil {
		f.Close()
		return c.fail(h.StreamID, proto.ErrOverloaded, fmt.Sprintf("too many open files on this connection (at most %d)", c.cfg.MaxOpenFiles))
	}
	var st *proto.StatInfo
	if r.Options&proto.OpenRetStat != 0 {
		s := c.statInfo(req.Origin, req.Path, f.Info())
		st = &s
	}
	c.w.write(proto.AppendOpenResponse(nil, h.StreamID, of.fh, st))
	c.client.SetActivity("read " + req.String())
	return nil
}

func (c *conn) doClose(ctx context.Context, h proto.RequestHeader, body []byte) error {
	var r proto.CloseRequest
	if err := r.Decode(&h, body); err != nil {
		return c.decodeErr(h.StreamID, err)
	}
	of := c.files.remove(r.FHandle)
	if of == nil {
		return c.fail(h.StreamID, proto.ErrFileNotOpen, "close does not refer to an open file")
	}
	of.ops.Wait()
	if c.files.count() == 0 {
		c.client.SetActivity("")
	}
	if err := of.f.Close(); err != nil {
		return c.sendErr(h.StreamID, fmt.Errorf("close %s: %w", of.req.String(), err))
	}
	c.sendOK(h.StreamID, nil)
	return nil
}

func (c *conn) doSync(ctx context.Context, h proto.RequestHeader) error {
	var fh proto.FHandle
	copy(fh[:], h.Body[0:4])
	of := c.files.acquire(fh)
	if of == nil {
		return c.fail(h.StreamID, proto.ErrFileNotOpen, "sync does not refer to an open file")
	}
	of.ops.Done()
	c.sendOK(h.StreamID, nil) // nothing to sync on a read-only file
	return nil
}

// appendStatText appends the stat text and its NUL as a kXR_ok response.
func appendStatResponse(dst []byte, sid proto.StreamID, st *proto.StatInfo) []byte {
	return proto.AppendStatResponse(dst, sid, st)
}

func (c *conn) doStat(ctx context.Context, h proto.RequestHeader, body []byte) error {
	var r proto.StatRequest
	if err := r.Decode(&h, body); err != nil {
		return c.decodeErr(h.StreamID, err)
	}
	if r.ByHandle() {
		if r.Options&proto.StatVFS != 0 {
			return c.fail(h.StreamID, proto.ErrArgMissing, "Required argument not present")
		}
		of := c.files.acquire(r.FHandle)
		if of == nil {
			return c.fail(h.StreamID, proto.ErrFileNotOpen, "stat does not refer to an open file")
		}
		st := c.statInfo(of.req.Origin, of.req.Path, of.f.Info())
		of.ops.Done()
		c.w.write(appendStatResponse(nil, h.StreamID, &st))
		return nil
	}
	req, err := c.pathRequest(ctx, h.StreamID, OpStat, r.Path)
	if err != nil {
		return err
	}
	if r.Options&proto.StatVFS != 0 {
		// "nodes free utilisation" for writable and staging space, in MB
		// and %, as XrdOss reports it. A cache has no space for clients
		// to write to: XRootD answers a read-only export the same way.
		c.w.write(proto.AppendOKString(nil, h.StreamID, "0 0 0 0 0 0"))
		return nil
	}
	fi, err := c.cfg.Backend.Stat(ctx, req)
	if err != nil {
		return c.sendErr(h.StreamID, err)
	}
	st := c.statInfo(req.Origin, req.Path, fi)
	c.w.write(appendStatResponse(nil, h.StreamID, &st))
	return nil
}

func (c *conn) doDirlist(ctx context.Context, h proto.RequestHeader, body []byte) error {
	var r proto.DirlistRequest
	if err := r.Decode(&h, body); err != nil {
		return c.decodeErr(h.StreamID, err)
	}
	req, err := c.pathRequest(ctx, h.StreamID, OpList, r.Path)
	if err != nil {
		return err
	}
	withStat := r.WantStat()
	dir := strings.TrimSuffix(req.Path, "/")
	// Entries go out in messages of complete entries (XrdCl parses each
	// kXR_oksofar part of a dstat listing as name/stat line pairs) as the
	// listing arrives (backend.ListEach): a directory of any size is never
	// held whole. A full message is sent only once another entry shows
	// that more follow, so the last one is always kXR_ok with entries.
	first := true
	var pending []proto.DirEntry
	size := 0
	buf := make([]byte, 0, dirlistChunk+512)
	send := func(final bool) error {
		buf = proto.AppendDirlist(buf[:0], h.StreamID, final, first && withStat, withStat, pending)
		first, pending, size = false, pending[:0], 0
		return c.w.write(buf)
	}
	err = backend.ListEach(ctx, c.cfg.Backend, req, withStat, func(fi origin.FileInfo) error {
		if fi.Name == "." || fi.Name == ".." || fi.Name == "" {
			return nil
		}
		if size >= dirlistChunk {
			if err := send(false); err != nil {
				return errClientGone
			}
		}
		e := proto.DirEntry{Name: fi.Name, HasStat: withStat}
		if withStat {
			e.Stat = c.statInfo(req.Origin, dir+"/"+fi.Name, fi)
		}
		pending = append(pending, e)
		size += len(fi.Name) + 120
		return nil
	})
	switch {
	case errors.Is(err, errClientGone):
		return err
	case err != nil:
		return c.sendErr(h.StreamID, err)
	}
	send(true)
	return nil
}

// localAddr is the address the client connected to, as "ip:port" or
// "[ip6]:port".
func (c *conn) localAddr() string {
	a := c.netConn().LocalAddr()
	if ta, ok := a.(*net.TCPAddr); ok {
		ip := ta.IP
		if v4 := ip.To4(); v4 != nil {
			ip = v4
		}
		return net.JoinHostPort(ip.String(), strconv.Itoa(ta.Port))
	}
	return a.String()
}

func (c *conn) doLocate(ctx context.Context, h proto.RequestHeader, body []byte) error {
	var r proto.LocateRequest
	if err := r.Decode(&h, body); err != nil {
		return c.decodeErr(h.StreamID, err)
	}
	addr := c.localAddr()
	if r.Options&proto.LocatePrefName != 0 && c.cfg.AdvertiseHost != "" {
		_, port, _ := net.SplitHostPort(addr)
		addr = net.JoinHostPort(c.cfg.AdvertiseHost, port)
	}
	// "*path" asks for any server that has path (xrdfs ls sends it), "*"
	// for any server at all.
	p := strings.TrimPrefix(r.Path, "*")
	if p != "" {
		req, err := c.pathRequest(ctx, h.StreamID, OpLocate, p)
		if err != nil {
			return err
		}
		if _, err := c.cfg.Backend.Stat(ctx, req); err != nil {
			// A cluster backend names the node that owns the file.
			var re *backend.RedirectError
			if !errors.As(err, &re) || re.Host == "" || re.Port <= 0 {
				return c.sendErr(h.StreamID, err)
			}
			addr = net.JoinHostPort(re.Host, strconv.Itoa(re.Port))
		}
	}
	loc := []proto.LocateEntry{{Type: 'S', Access: 'r', Addr: addr}}
	c.w.write(proto.AppendLocateResponse(nil, h.StreamID, loc))
	return nil
}

func (c *conn) doQuery(ctx context.Context, h proto.RequestHeader, body []byte) error {
	var r proto.QueryRequest
	if err := r.Decode(&h, body); err != nil {
		return c.decodeErr(h.StreamID, err)
	}
	switch r.Type {
	case proto.QueryConfig:
		return c.queryConfig(h.StreamID, r.Args)
	case proto.QueryChecksum:
		return c.queryChecksum(ctx, h.StreamID, r.Args)
	case proto.QueryCkscan:
		c.sendOK(h.StreamID, nil) // cancel a checksum: nothing to cancel
	case proto.QuerySpace:
		// The space clients could write to: none (xrdfs spaceinfo).
		c.w.write(proto.AppendOKString(nil, h.StreamID, "oss.cgroup=default&oss.space=0&oss.free=0&oss.maxf=0&oss.used=0&oss.quota=-1"))
	case proto.QueryPrep:
		return c.queryPrepare(ctx, h.StreamID, r.Args)
	case proto.QueryStats, proto.QueryXattr,
		proto.QueryVisa, proto.QueryOpaque, proto.QueryOpaquf, proto.QueryOpaqug:
		return c.fail(h.StreamID, proto.ErrUnsupported, fmt.Sprintf("query type %d is not supported by hepcache", r.Type))
	default:
		return c.fail(h.StreamID, proto.ErrArgInvalid, "Invalid information query type code")
	}
	return nil
}

// queryConfig answers "query config KEY..." with one line per key, as
// XRootD does; unknown keys are echoed, which clients read as "not set".
func (c *conn) queryConfig(sid proto.StreamID, args string) error {
	keys := strings.Fields(args)
	if len(keys) == 0 {
		return c.fail(sid, proto.ErrArgMissing, "query config argument not specified.")
	}
	if keys[0] == "xrootd" || keys[0] == "cmsd" {
		if len(keys) > 1 {
			return c.fail(sid, proto.ErrArgInvalid, "too many query config arguments.")
		}
		c.sendOK(sid, []byte("\n\x00"))
		return nil
	}
	var b strings.Builder
	for _, k := range keys {
		v := k
		switch k {
		case "bind_max":
			v = "0" // no kXR_bind: one connection carries everything
		case "chksum":
			var algs []string
			for i, a := range c.cfg.ChecksumAlgorithms {
				algs = append(algs, strconv.Itoa(i)+":"+a)
			}
			v = strings.Join(algs, ",")
		case "pio_max":
			v = "0"
		case "readv_ior_max":
			v = strconv.Itoa(c.cfg.MaxReadVSegmentSize)
		case "readv_iov_max":
			v = strconv.Itoa(c.cfg.MaxReadVSegments)
		case "role":
			v = "server"
		case "sitename":
			if c.cfg.SiteName != "" {
				v = c.cfg.SiteName
			}
		case "start":
			v = c.srv.start.Format("060102_150405") // XRootD's startUP format
		case "version":
			v = c.cfg.Version
		case "window":
			v = "0"
		}
		b.WriteString(v)
		b.WriteByte('\n')
	}
	c.sendOK(sid, []byte(b.String()))
	return nil
}

// queryChecksum answers "query checksum PATH[?cks.type=ALG]". When the
// backend needs longer than ChecksumWait (it may have to read a whole
// file), the client gets kXR_waitresp and the answer later as kXR_attn
// with kXR_asynresp, so that the connection is not held up.
func (c *conn) queryChecksum(ctx context.Context, sid proto.StreamID, args string) error {
	req, err := c.pathRequest(ctx, sid, OpChecksum, args)
	if err != nil {
		return err
	}
	algo := c.cfg.ChecksumAlgorithms[0]
	for _, kv := range strings.Split(req.Opaque, "&") {
		if v, ok := strings.CutPrefix(kv, "cks.type="); ok && v != "" {
			algo = strings.ToLower(v)
		}
	}
	if !slices.Contains(c.cfg.ChecksumAlgorithms, algo) {
		return c.fail(sid, proto.ErrServerError, fmt.Sprintf("%s checksum not supported.", algo))
	}
	type result struct {
		sum string
		err error
	}
	done := make(chan result, 1)
	go func() {
		sum, err := c.cfg.Backend.Checksum(ctx, req, algo)
		done <- result{sum, err}
	}()
	// answer returns the response to res and the error it reports.
	answer := func(res result) ([]byte, error) {
		if res.err != nil {
			err := fmt.Errorf("checksum %s of %s: %w", algo, req.String(), res.err)
			return c.errResponse(nil, sid, err), err
		}
		return proto.AppendOKString(nil, sid, algo+" "+res.sum), nil
	}
	if !c.asyncOK {
		b, err := answer(<-done)
		c.w.write(b)
		return err
	}
	t := time.NewTimer(c.cfg.ChecksumWait)
	defer t.Stop()
	select {
	case res := <-done:
		b, err := answer(res)
		c.w.write(b)
		return err
	case <-t.C:
	}
	if c.w.write(proto.AppendWaitResp(nil, sid, waitRespSeconds)) != nil {
		return nil
	}
	if hook := c.srv.afterWaitResp; hook != nil {
		hook()
	}
	b, err := answer(<-done) // the backend honours ctx, which ends with the connection
	c.w.write(appendAsynResp(nil, b))
	return err
}

// appendAsynResp wraps a complete response (header and body) into the
// kXR_attn / kXR_asynresp message that delivers it after kXR_waitresp.
func appendAsynResp(dst, inner []byte) []byte {
	dst = proto.AppendResponseHeader(dst, proto.StreamID{}, proto.StatusAttn, 8+len(inner))
	dst = binary.BigEndian.AppendUint32(dst, uint32(proto.AttnAsynResp))
	dst = append(dst, 0, 0, 0, 0)
	return append(dst, inner...)
}
