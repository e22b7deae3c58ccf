package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hepcache/hepcache/internal/xrootd/proto"
	"github.com/hepcache/hepcache/origin"
)

// File is a file open for reading on one server.
//
// # Handles per connection
//
// An XRootD file handle is only valid on the connection that opened it, so a
// File keeps one handle per connection of its server's pool: the open
// answers on one connection, and the first read that lands on another
// connection opens the file there too (one round trip, once). Reads go
// round-robin over the connections, so one file can keep several server
// threads busy. When a connection dies, its handle dies with it; the next
// read on the redialed connection opens the file again and checks that size
// and modification time have not changed.
//
// A File is safe for concurrent use.
type File struct {
	c       *Client
	h       *host
	addr    string
	path    string
	info    proto.StatInfo
	handles []fileHandle
	next    atomic.Uint32
	closed  atomic.Bool

	// warmOnce starts, at the first read, the opens on the pool's other
	// connections; warmCtx ends them at Close, warmWG waits for them.
	// warmMu orders warmWG.Add against Close's Wait.
	warmOnce   sync.Once
	warmCtx    context.Context
	warmCancel context.CancelFunc
	warmMu     sync.Mutex
	warmWG     sync.WaitGroup
}

// fileHandle is the file's handle on one connection of the pool.
type fileHandle struct {
	// mu protects the fields below.
	mu      sync.Mutex
	cn      *conn
	fh      proto.FHandle
	opening chan struct{} // closed when the open in progress ends
	err     error
}

// ErrFileChanged reports that a file reopened after a lost connection no
// longer has the size or modification time it had at open.
var ErrFileChanged = errors.New("client: file changed at the server since open")

// ErrFileClosed is returned by operations on a closed File.
var ErrFileClosed = errors.New("client: file closed")

const openOpts = proto.OpenRead | proto.OpenRetStat

// Open opens path at addr for reading, following redirects.
func (c *Client) Open(ctx context.Context, addr, path string) (*File, error) {
	var (
		cn0   *conn
		slot0 int
		fh0   proto.FHandle
		st    proto.StatInfo
	)
	faddr, fpath, err := c.pathRequest(ctx, "open", addr, path,
		func(dst []byte, sid proto.StreamID, p string) []byte {
			return (&proto.OpenRequest{Options: openOpts, Path: p}).Append(dst, sid)
		},
		func(cn *conn, slot int, body []byte) error {
			fh, s, has, err := proto.DecodeOpenResponse(body)
			if err != nil {
				return err
			}
			if !has {
				return fmt.Errorf("open answer without the stat asked for: %w", proto.ErrMalformed)
			}
			cn0, slot0, fh0, st = cn, slot, fh, s
			return nil
		})
	if err != nil {
		return nil, err
	}
	h, err := c.host(faddr)
	if err != nil {
		return nil, err
	}
	f := &File{c: c, h: h, addr: faddr, path: fpath, info: st, handles: make([]fileHandle, len(h.slots))}
	f.handles[slot0].cn, f.handles[slot0].fh = cn0, fh0
	f.next.Store(uint32(slot0))
	f.warmCtx, f.warmCancel = context.WithCancel(context.Background())
	return f, nil
}

// warmMinSize is the smallest file warm opens on other connections: a
// smaller one is read in a few requests that one connection carries as
// well, and each extra open and close is an origin round trip and work
// on both ends (for a 4 KiB file, six requests more than its open, read
// and close).
const warmMinSize = 8 << 20

// warm opens the file on the pool's other connections in the background
// (dialing them if needed), once, at the first read, when it is larger
// than warmMinSize. Until a connection has its handle, reads go to
// connections that have one, so the first reads of a file never wait for
// the extra round trips: on a 150 ms link, dialing, logging in and opening
// on three more connections costs over half a second.
func (f *File) warm() {
	if f.info.Size < warmMinSize {
		return
	}
	f.warmOnce.Do(func() {
		for i := range f.handles {
			hd := &f.handles[i]
			hd.mu.Lock()
			has := hd.cn != nil || hd.opening != nil
			hd.mu.Unlock()
			if has {
				continue
			}
			go func(i int) {
				// The dial belongs to the pool and outlives this file.
				dctx, cancel := context.WithTimeout(context.Background(), f.c.cfg.DialTimeout)
				_, err := f.h.conn(dctx, i)
				cancel()
				if err != nil {
					return // the slot is left to lazy opening
				}
				f.warmMu.Lock()
				if f.closed.Load() {
					f.warmMu.Unlock()
					return
				}
				f.warmWG.Add(1)
				f.warmMu.Unlock()
				defer f.warmWG.Done()
				f.handle(f.warmCtx, i)
			}(i)
		}
	})
}

// readySlot returns the next slot, round-robin, whose connection already
// has the file open; if none has, the next slot (opened lazily).
func (f *File) readySlot() int {
	n := len(f.handles)
	start := int(f.next.Add(1)-1) % n
	for k := 0; k < n; k++ {
		i := (start + k) % n
		hd := &f.handles[i]
		hd.mu.Lock()
		ready := hd.cn != nil && hd.opening == nil && !hd.cn.failed()
		hd.mu.Unlock()
		if ready {
			return i
		}
	}
	return start
}

// Info returns the stat information returned by the open.
func (f *File) Info() proto.StatInfo { return f.info }

// Addr returns the server ("host:port") the file is open on, after
// redirects.
func (f *File) Addr() string { return f.addr }

// Path returns the path as opened on Addr (with any redirect opaque).
func (f *File) Path() string { return f.path }

func (f *File) errorf(op string, err error) error {
	return fmt.Errorf("%s root://%s/%s: %w", op, f.addr, f.path, err)
}

// handle returns a connection of slot i and the file's handle on it,
// opening the file on that connection if needed.
func (f *File) handle(ctx context.Context, i int) (*conn, proto.FHandle, error) {
	cn, err := f.h.conn(ctx, i)
	if err != nil {
		return nil, proto.FHandle{}, err
	}
	hd := &f.handles[i]
	for {
		hd.mu.Lock()
		if hd.cn == cn {
			fh := hd.fh
			hd.mu.Unlock()
			return cn, fh, nil
		}
		if ch := hd.opening; ch != nil {
			hd.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return nil, proto.FHandle{}, ctx.Err()
			}
			hd.mu.Lock()
			ok, err := hd.cn == cn, hd.err
			hd.mu.Unlock()
			if !ok && err != nil {
				return nil, proto.FHandle{}, err
			}
			continue
		}
		ch := make(chan struct{})
		hd.opening = ch
		hd.mu.Unlock()
		fh, err := f.openOn(ctx, cn)
		hd.mu.Lock()
		if err == nil {
			hd.cn, hd.fh = cn, fh
		}
		hd.err, hd.opening = err, nil
		close(ch)
		hd.mu.Unlock()
		return cn, fh, err
	}
}

// openOn opens the file on connection cn (no redirects: f.addr is where
// the file lives).
func (f *File) openOn(ctx context.Context, cn *conn) (proto.FHandle, error) {
	for waits := 1; ; waits++ {
		cl, err := cn.roundTrip(ctx, kindBuffered, func(dst []byte, sid proto.StreamID) []byte {
			return (&proto.OpenRequest{Options: openOpts, Path: f.path}).Append(dst, sid)
		})
		if err != nil {
			return proto.FHandle{}, f.errorf("reopen", err)
		}
		switch cl.status {
		case proto.StatusOK:
			fh, st, has, err := proto.DecodeOpenResponse(cl.body)
			putCall(cl)
			if err != nil {
				return fh, f.errorf("reopen", err)
			}
			if has && (st.Size != f.info.Size || st.MTime != f.info.MTime) {
				cn.closeHandle(ctx, fh)
				return fh, f.errorf("reopen", fmt.Errorf("size %d mtime %d, was %d %d: %w", st.Size, st.MTime, f.info.Size, f.info.MTime, ErrFileChanged))
			}
			return fh, nil
		case proto.StatusWait:
			secs, _, _ := proto.DecodeWait(cl.body)
			putCall(cl)
			if err := f.c.sleepWait(ctx, waits, secs); err != nil {
				return proto.FHandle{}, f.errorf("reopen", err)
			}
		default:
			err := answerError(cl)
			if cl.status == proto.StatusRedirect {
				err = errors.New("redirected when reopening on the data server")
			}
			putCall(cl)
			return proto.FHandle{}, f.errorf("reopen", err)
		}
	}
}

// closeHandle sends kXR_close for fh and waits for the answer.
func (cn *conn) closeHandle(ctx context.Context, fh proto.FHandle) error {
	cl, err := cn.roundTrip(ctx, kindBuffered, (&proto.CloseRequest{FHandle: fh}).Append)
	if err != nil {
		return err
	}
	defer putCall(cl)
	if cl.status != proto.StatusOK {
		return answerError(cl)
	}
	return nil
}

// ReadAt reads len(p) bytes at off into p, like io.ReaderAt: it returns
// n < len(p) only with an error, io.EOF at the end of the file. The payload
// is read from the socket straight into p. Reads longer than MaxReadSize
// are split into requests sent together over the pool. The caller owns p;
// it is not touched after ReadAt returns, even when ctx ends early.
func (f *File) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if f.closed.Load() {
		return 0, f.errorf("read", ErrFileClosed)
	}
	if off < 0 {
		return 0, f.errorf("read", fmt.Errorf("negative offset %d", off))
	}
	if len(p) == 0 {
		return 0, nil
	}
	maxRead := f.c.cfg.MaxReadSize
	if len(p) <= maxRead {
		cn, cl, err := f.startRead(ctx, p, off, nil)
		if err != nil {
			return 0, f.errorf("read "+rng(off, len(p)), err)
		}
		n, err := f.finishRead(ctx, cn, cl, p, off, nil)
		if err == nil && n < len(p) {
			err = io.EOF
		}
		return n, err
	}
	const group = 8
	total := 0
	for len(p) > 0 {
		var pend [group]struct {
			cn *conn
			cl *call
			p  []byte
		}
		k := 0
		var err error
		for ; k < group && k*maxRead < len(p); k++ {
			q := p[k*maxRead : min((k+1)*maxRead, len(p))]
			pend[k].p = q
			if pend[k].cn, pend[k].cl, err = f.startRead(ctx, q, off+int64(k*maxRead), nil); err != nil {
				break
			}
		}
		short := false
		for j := 0; j < k; j++ {
			n, rerr := f.finishRead(ctx, pend[j].cn, pend[j].cl, pend[j].p, off+int64(j*maxRead), nil)
			if err == nil && rerr != nil {
				err = rerr
			}
			if err == nil && !short {
				total += n
				short = n < len(pend[j].p)
			}
		}
		if err != nil {
			return total, f.errorf("read "+rng(off, len(p)), err)
		}
		if short {
			return total, io.EOF
		}
		adv := min(group*maxRead, len(p))
		p, off = p[adv:], off+int64(adv)
	}
	return total, nil
}

// ReadAtProgress is ReadAt that reports, as the answer arrives, how many
// bytes of p are filled (progress, called from the connection's read
// goroutine, must not block, and is never called once ReadAtProgress has
// returned). p longer than MaxReadSize is read with ReadAt and reported
// when done.
func (f *File) ReadAtProgress(ctx context.Context, p []byte, off int64, progress func(int)) (int, error) {
	if len(p) > f.c.cfg.MaxReadSize || f.closed.Load() || off < 0 || len(p) == 0 {
		n, err := f.ReadAt(ctx, p, off)
		if n > 0 {
			progress(n)
		}
		return n, err
	}
	cn, cl, err := f.startRead(ctx, p, off, progress)
	if err != nil {
		return 0, f.errorf("read "+rng(off, len(p)), err)
	}
	n, err := f.finishRead(ctx, cn, cl, p, off, progress)
	if err != nil {
		return n, f.errorf("read "+rng(off, len(p)), err)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func rng(off int64, n int) string {
	return strconv.Itoa(n) + "@" + strconv.FormatInt(off, 10)
}

// startRead sends one kXR_read for p at off on the next connection.
func (f *File) startRead(ctx context.Context, p []byte, off int64, progress func(int)) (*conn, *call, error) {
	f.warm()
	cn, fh, err := f.handle(ctx, f.readySlot())
	if err != nil {
		return nil, nil, err
	}
	cl := getCall(kindRead)
	cl.dst, cl.progress = p, progress
	err = cn.start(ctx, cl, func(dst []byte, sid proto.StreamID) []byte {
		r := proto.ReadRequest{FHandle: fh, Offset: off, Length: int32(len(p))}
		return r.Append(dst, sid)
	})
	if err != nil {
		putCall(cl)
		return nil, nil, err
	}
	return cn, cl, nil
}

// finishRead waits for a read started by startRead, retrying after
// kXR_wait. It returns the bytes read (fewer than len(p) at end of file).
func (f *File) finishRead(ctx context.Context, cn *conn, cl *call, p []byte, off int64, progress func(int)) (int, error) {
	for waits := 1; ; waits++ {
		owned, err := cn.wait(ctx, cl)
		if err != nil {
			if owned {
				putCall(cl)
			}
			return 0, err
		}
		switch cl.status {
		case proto.StatusOK:
			n := cl.n
			putCall(cl)
			return n, nil
		case proto.StatusWait:
			secs, _, _ := proto.DecodeWait(cl.body)
			putCall(cl)
			if err := f.c.sleepWait(ctx, waits, secs); err != nil {
				return 0, err
			}
			if cn, cl, err = f.startRead(ctx, p, off, progress); err != nil {
				return 0, err
			}
		default:
			err := answerError(cl)
			putCall(cl)
			return 0, err
		}
	}
}

// readvLimits returns the server's kXR_readv limits (elements per request,
// bytes per element), asked once per server with kXR_query config.
func (f *File) readvLimits(ctx context.Context) (maxSegs, maxSegSz int) {
	h := f.h
	h.rv.Lock()
	defer h.rv.Unlock()
	if h.rv.known {
		return h.rv.maxSegs, h.rv.maxSegSz
	}
	// Defaults of the C++ server when it cannot tell us.
	h.rv.maxSegs, h.rv.maxSegSz = proto.MaxReadVSegs, 256<<10-proto.ReadListItemLen
	vals, err := f.c.QueryConfig(ctx, f.addr, "readv_iov_max", "readv_ior_max")
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(vals[0])); err == nil && n > 0 {
			h.rv.maxSegs = min(n, proto.MaxReadVSegs)
		}
		if n, err := strconv.Atoi(strings.TrimSpace(vals[1])); err == nil && n > 0 {
			h.rv.maxSegSz = n
		}
		h.rv.known = true
	}
	return h.rv.maxSegs, h.rv.maxSegSz
}

// ReadV fills every segment with kXR_readv requests, splitting elements
// and requests at the server's limits and sending the requests together
// over the pool. A segment past the end of the file is an error. The
// caller owns the segments' buffers.
func (f *File) ReadV(ctx context.Context, segs []origin.Segment) error {
	if f.closed.Load() {
		return f.errorf("readv", ErrFileClosed)
	}
	if len(segs) == 0 {
		return nil
	}
	maxSegs, maxSegSz := f.readvLimits(ctx)
	// Split elements above the per-element limit and drop empty ones.
	split := false
	for _, s := range segs {
		if len(s.Buf) > maxSegSz || len(s.Buf) == 0 || s.Offset < 0 {
			split = true
			break
		}
	}
	if split {
		var out []origin.Segment
		for _, s := range segs {
			if s.Offset < 0 {
				return f.errorf("readv", fmt.Errorf("negative offset %d", s.Offset))
			}
			for b, o := s.Buf, s.Offset; len(b) > 0; {
				n := min(len(b), maxSegSz)
				out = append(out, origin.Segment{Offset: o, Buf: b[:n]})
				b, o = b[n:], o+int64(n)
			}
		}
		segs = out
	}
	// Requests of at most maxSegs elements and about MaxReadSize bytes, so
	// that a large vector read also spreads over the connections.
	type req struct {
		cn   *conn
		cl   *call
		segs []origin.Segment
	}
	var reqs []req
	var err error
	for len(segs) > 0 && err == nil {
		k, bytes := 0, 0
		for k < len(segs) && k < maxSegs && (k == 0 || bytes+len(segs[k].Buf) <= f.c.cfg.MaxReadSize) {
			bytes += len(segs[k].Buf)
			k++
		}
		r := req{segs: segs[:k]}
		segs = segs[k:]
		r.cn, r.cl, err = f.startReadV(ctx, r.segs)
		if err == nil {
			reqs = append(reqs, r)
		}
	}
	for _, r := range reqs {
		if rerr := f.finishReadV(ctx, r.cn, r.cl, r.segs); err == nil {
			err = rerr
		}
	}
	if err != nil {
		return f.errorf("readv", err)
	}
	return nil
}

func (f *File) startReadV(ctx context.Context, segs []origin.Segment) (*conn, *call, error) {
	f.warm()
	cn, fh, err := f.handle(ctx, f.readySlot())
	if err != nil {
		return nil, nil, err
	}
	cl := getCall(kindReadV)
	cl.segs = segs
	err = cn.start(ctx, cl, func(dst []byte, sid proto.StreamID) []byte {
		h := proto.RequestHeader{StreamID: sid, RequestID: proto.ReqReadV, Dlen: int32(len(segs) * proto.ReadListItemLen)}
		dst = proto.AppendRequestHeader(dst, &h)
		for _, s := range segs {
			dst = proto.AppendReadSeg(dst, proto.ReadSeg{FHandle: fh, Length: int32(len(s.Buf)), Offset: s.Offset})
		}
		return dst
	})
	if err != nil {
		putCall(cl)
		return nil, nil, err
	}
	return cn, cl, nil
}

func (f *File) finishReadV(ctx context.Context, cn *conn, cl *call, segs []origin.Segment) error {
	for waits := 1; ; waits++ {
		owned, err := cn.wait(ctx, cl)
		if err != nil {
			if owned {
				putCall(cl)
			}
			return err
		}
		switch cl.status {
		case proto.StatusOK:
			short := cl.short || cl.seg != len(segs)
			putCall(cl)
			if short {
				return fmt.Errorf("short vector read (past end of file?): %w", io.ErrUnexpectedEOF)
			}
			return nil
		case proto.StatusWait:
			secs, _, _ := proto.DecodeWait(cl.body)
			putCall(cl)
			if err := f.c.sleepWait(ctx, waits, secs); err != nil {
				return err
			}
			if cn, cl, err = f.startReadV(ctx, segs); err != nil {
				return err
			}
		default:
			err := answerError(cl)
			putCall(cl)
			return err
		}
	}
}

// Stat asks the server for the current stat of the open file.
func (f *File) Stat(ctx context.Context) (proto.StatInfo, error) {
	if f.closed.Load() {
		return proto.StatInfo{}, f.errorf("stat", ErrFileClosed)
	}
	cn, fh, err := f.handle(ctx, f.readySlot())
	if err != nil {
		return proto.StatInfo{}, f.errorf("stat", err)
	}
	cl, err := cn.roundTrip(ctx, kindBuffered, (&proto.StatRequest{FHandle: fh}).Append)
	if err != nil {
		return proto.StatInfo{}, f.errorf("stat", err)
	}
	defer putCall(cl)
	if cl.status != proto.StatusOK {
		return proto.StatInfo{}, f.errorf("stat", answerError(cl))
	}
	st, err := proto.ParseStatInfo(cl.body)
	if err != nil {
		return st, f.errorf("stat", err)
	}
	return st, nil
}

// Close closes the file's handles on every live connection. Later calls
// return nil.
func (f *File) Close(ctx context.Context) error {
	if f.closed.Swap(true) {
		return nil
	}
	// Stop the background opens and wait for them, so that every handle
	// they made is closed below.
	f.warmOnce.Do(func() {})
	f.warmMu.Lock() // no open starts after this
	f.warmMu.Unlock()
	f.warmCancel()
	f.warmWG.Wait()
	type pend struct {
		cn *conn
		cl *call
	}
	var ps []pend
	var errs []error
	for i := range f.handles {
		hd := &f.handles[i]
		hd.mu.Lock()
		cn, fh := hd.cn, hd.fh
		hd.cn = nil
		hd.mu.Unlock()
		if cn == nil || cn.failed() {
			continue
		}
		cl := getCall(kindBuffered)
		if err := cn.start(ctx, cl, (&proto.CloseRequest{FHandle: fh}).Append); err != nil {
			putCall(cl)
			errs = append(errs, err)
			continue
		}
		ps = append(ps, pend{cn, cl})
	}
	for _, p := range ps {
		owned, err := p.cn.wait(ctx, p.cl)
		switch {
		case err != nil:
			errs = append(errs, err)
		case p.cl.status != proto.StatusOK:
			errs = append(errs, answerError(p.cl))
		}
		if owned {
			putCall(p.cl)
		}
	}
	if len(errs) > 0 {
		return f.errorf("close", errors.Join(errs...))
	}
	return nil
}
