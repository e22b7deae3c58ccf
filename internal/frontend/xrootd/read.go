package xrootd

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/xrootd/proto"
	"github.com/hepcache/hepcache/origin"
)

// segmentReader is an optional interface of backend.File: a vector read in
// one call (the cache can fetch the missing blocks of all segments at
// once). Files without it are read segment by segment with ReadAt.
type segmentReader interface {
	ReadV(ctx context.Context, segs []origin.Segment) error
}

// readLength returns how many bytes of a read of length at off exist in a
// file of size: reads are answered up to the end of file.
func readLength(off int64, length int64, size int64) int64 {
	if off >= size {
		return 0
	}
	return min(length, size-off)
}

// streamFailed reports whether a Stream failed because writing to the
// client failed (the connection is closing; nothing more to send).
func (c *conn) streamFailed(err error) bool { return err != nil && c.w.failed() != nil }

// doRead answers kXR_read. The data is streamed from File.Stream as it
// arrives: each chunk goes out as a kXR_oksofar message (at most MaxMessage
// bytes), the last one as kXR_ok. The path id of read_args is ignored: the
// server grants no kXR_bind, so every answer goes on this connection.
func (c *conn) doRead(ctx context.Context, h proto.RequestHeader, body []byte) error {
	var r proto.ReadRequest
	if err := r.Decode(&h, body); err != nil {
		return c.decodeErr(h.StreamID, err)
	}
	of := c.files.acquire(r.FHandle)
	if of == nil {
		return c.fail(h.StreamID, proto.ErrFileNotOpen, "read does not refer to an open file")
	}
	defer of.ops.Done()
	if err := c.authorizeRead(ctx, of); err != nil {
		return c.sendErr(h.StreamID, err)
	}
	n := readLength(r.Offset, int64(r.Length), of.f.Info().Size)
	if n == 0 {
		c.sendOK(h.StreamID, nil)
		return nil
	}
	var sent int64
	var hdr [proto.ResponseHeaderLen]byte
	max := int64(c.cfg.MaxMessage)
	if c.sendFile(of, h.StreamID, r.Offset, n) {
		return nil
	}
	// status is that of the message carrying k more bytes: kXR_ok for the
	// last.
	status := func(k int64) proto.Status {
		if sent+k == n {
			return proto.StatusOK
		}
		return proto.StatusOKSoFar
	}
	bytes := func(p []byte) error {
		for len(p) > 0 && sent < n {
			k := min(int64(len(p)), max, n-sent)
			proto.AppendResponseHeader(hdr[:0], h.StreamID, status(k), int(k))
			if err := c.w.write(hdr[:], p[:k]); err != nil {
				return err
			}
			sent += k
			p = p[k:]
		}
		return nil
	}
	var err error
	if fs, ok := of.f.(backend.FileStreamer); ok && c.w.canSendFile() {
		// The parts of a cold read already on the cache's disk go out
		// with sendfile, the rest as it arrives.
		_, err = fs.StreamFile(ctx, r.Offset, n, bytes, func(f *os.File, off, k int64) error {
			for k > 0 && sent < n {
				m := min(k, max, n-sent)
				proto.AppendResponseHeader(hdr[:0], h.StreamID, status(m), int(m))
				if err := c.w.writeFile(hdr[:], f, off, int(m)); err != nil {
					return err
				}
				sent, off, k = sent+m, off+m, k-m
			}
			return nil
		})
	} else {
		_, err = of.f.Stream(backend.WithPacer(ctx, c.w), r.Offset, n, bytes)
	}
	c.srv.stats.BytesSent.Add(sent)
	switch {
	case err != nil && c.streamFailed(err):
		return errClientGone
	case err != nil:
		return c.sendErr(h.StreamID, fmt.Errorf("read %d@%d of %s: %w", r.Length, r.Offset, of.req.String(), err))
	case sent < n:
		c.sendOK(h.StreamID, nil) // the file ended early: close the answer
	}
	return nil
}

// authorizeRead checks, before a read of of moves a byte, that what
// authorized its open has not ended since: a client may keep a file open
// for days, and a handle is no credential. Past of's authUntil the
// Authorizer is asked again (OpRead, with the open's request) and the read
// is refused unless reading is still allowed, and downloading too when the
// open allowed it (the backend file keeps the open's NoFetch). Until then
// a read costs one clock reading.
func (c *conn) authorizeRead(ctx context.Context, of *openFile) error {
	until := of.authUntil.Load()
	a := c.cfg.Authorizer
	if until == 0 || a == nil || time.Now().UnixNano() <= until {
		return nil
	}
	req := of.req
	req.NoFetch, req.AuthUntil = false, time.Time{}
	var err error
	if ra, ok := a.(RequestAuthorizer); ok {
		err = ra.AuthorizeRequest(ctx, OpRead, &req)
	} else {
		err = a.Authorize(ctx, OpRead, req)
	}
	ended := time.Unix(0, until).UTC().Format(time.RFC3339)
	switch {
	case err != nil && !errors.Is(err, backend.ErrForbidden):
		return fmt.Errorf("read %s: the authorization of its open ended at %s: %w", of.req.String(), ended, errors.Join(backend.ErrForbidden, err))
	case err != nil:
		return fmt.Errorf("read %s: the authorization of its open ended at %s: %w", of.req.String(), ended, err)
	case req.NoFetch && !of.req.NoFetch:
		return fmt.Errorf("read %s: the credential that let it be downloaded expired at %s; open it again (with a fresh credential to download): %w", of.req.String(), ended, backend.ErrForbidden)
	}
	next := int64(0)
	if !req.AuthUntil.IsZero() {
		next = req.AuthUntil.UnixNano()
	}
	of.authUntil.CompareAndSwap(until, next)
	return nil
}

// sendFile answers a read of n bytes at off with sendfile(2) when the
// backend keeps them all in a local file and the connection is plain TCP.
// It reports whether it handled the read.
func (c *conn) sendFile(of *openFile, sid proto.StreamID, off, n int64) bool {
	osf, ok := of.f.(backend.OSFiler)
	if !ok || !c.w.canSendFile() {
		return false
	}
	f, ok := osf.OSFile(off, n)
	if !ok {
		return false
	}
	var hdr [proto.ResponseHeaderLen]byte
	for sent := int64(0); sent < n; {
		k := min(n-sent, int64(c.cfg.MaxMessage))
		status := proto.StatusOKSoFar
		if sent+k == n {
			status = proto.StatusOK
		}
		proto.AppendResponseHeader(hdr[:0], sid, status, int(k))
		if c.w.writeFile(hdr[:], f, off+sent, int(k)) != nil {
			return true
		}
		sent += k
		c.srv.stats.BytesSent.Add(k)
	}
	return true
}

// pgSender turns the chunks of a Stream into kXR_pgread status messages.
// A message carries whole pages only (XrdCl requires every part but the
// last to end on a page boundary), each preceded by its CRC32C; the first
// page of the request is cut at the next 4 KiB boundary of the file. A
// chunk that ends inside a page leaves the partial page in carry until the
// next chunk completes it. Pages point into the caller's chunk, so a
// message goes out with writev and no copy.
type pgSender struct {
	c        *conn
	sid      proto.StreamID
	off      int64 // file offset of the first byte not yet sent
	end      int64 // end of the request (after clamping to the file size)
	maxBytes int

	carry  [pageSize]byte // incomplete page starting at off
	carryN int

	hdr   []byte
	crcs  []byte   // 4 bytes per page of the current message
	bufs  [][]byte // header, then crc and page for each page
	bytes int      // file bytes in the current message
	sent  int64
}

var pgSenders = sync.Pool{New: func() any { return new(pgSender) }}

func newPgSender(c *conn, sid proto.StreamID, off, end int64) *pgSender {
	s := pgSenders.Get().(*pgSender)
	maxPages := c.cfg.MaxMessage/pageSize + 2
	if cap(s.crcs) < 4*maxPages {
		s.crcs = make([]byte, 0, 4*maxPages)
		s.bufs = make([][]byte, 0, 1+2*maxPages)
	}
	s.c, s.sid, s.off, s.end, s.maxBytes = c, sid, off, end, c.cfg.MaxMessage
	s.carryN, s.sent = 0, 0
	return s
}

func (s *pgSender) release() {
	clear(s.bufs[:cap(s.bufs)])
	s.c = nil
	pgSenders.Put(s)
}

// pageLen is the length of the page starting at file offset pos.
func (s *pgSender) pageLen(pos int64) int {
	next := (pos/pageSize + 1) * pageSize
	return int(min(next, s.end) - pos)
}

func (s *pgSender) addPage(p []byte) {
	i := len(s.crcs)
	s.crcs = binary.BigEndian.AppendUint32(s.crcs, proto.CRC32C(p))
	s.bufs = append(s.bufs, s.crcs[i:i+4], p)
	s.bytes += len(p)
}

// flush sends the pages collected so far, which cover [s.off, s.off+bytes).
func (s *pgSender) flush(final bool) error {
	s.hdr = proto.AppendPgReadHeader(s.hdr[:0], s.sid, final, s.off, s.bytes)
	s.bufs[0] = s.hdr
	err := s.c.w.write(s.bufs...)
	s.off += int64(s.bytes)
	s.sent += int64(s.bytes)
	s.bufs, s.crcs, s.bytes = s.bufs[:1], s.crcs[:0], 0
	return err
}

// feed sends the pages completed by chunk p (file bytes at s.off+carryN).
func (s *pgSender) feed(p []byte) error {
	for {
		s.bufs, s.crcs, s.bytes = append(s.bufs[:0], nil), s.crcs[:0], 0
		pos := s.off
		if s.carryN > 0 {
			plen := s.pageLen(pos)
			take := min(plen-s.carryN, len(p))
			copy(s.carry[s.carryN:plen], p[:take])
			s.carryN += take
			p = p[take:]
			if s.carryN < plen {
				return nil // p is used up and the page is still incomplete
			}
			s.addPage(s.carry[:plen])
			pos += int64(plen)
			s.carryN = 0
		}
		for len(p) > 0 && s.bytes < s.maxBytes {
			plen := s.pageLen(pos)
			if len(p) < plen {
				break
			}
			s.addPage(p[:plen])
			p = p[plen:]
			pos += int64(plen)
		}
		if s.bytes > 0 {
			if err := s.flush(pos == s.end); err != nil {
				return err
			}
		}
		if len(p) == 0 {
			return nil
		}
		if len(p) < s.pageLen(pos) {
			s.carryN = copy(s.carry[:], p)
			return nil
		}
		// The message was full; start another with the rest of p.
	}
}

// finish ends an answer that Stream cut short (end of file): the partial
// page left over, or an empty final message.
func (s *pgSender) finish() error {
	s.bufs, s.crcs, s.bytes = append(s.bufs[:0], nil), s.crcs[:0], 0
	if s.carryN > 0 {
		s.addPage(s.carry[:s.carryN])
		s.carryN = 0
	}
	return s.flush(true)
}

// doPgRead answers kXR_pgread with kXR_status messages of whole pages and
// their CRC32C, streamed as the data arrives. kXR_pgRetry (a client asking
// again for a page whose checksum failed) needs nothing special: every
// answer is computed from the data just read.
func (c *conn) doPgRead(ctx context.Context, h proto.RequestHeader, body []byte) error {
	var r proto.PgReadRequest
	if err := r.Decode(&h, body); err != nil {
		return c.decodeErr(h.StreamID, err)
	}
	if r.Length <= 0 {
		return c.fail(h.StreamID, proto.ErrArgInvalid, "Read length is invalid")
	}
	of := c.files.acquire(r.FHandle)
	if of == nil {
		return c.fail(h.StreamID, proto.ErrFileNotOpen, "pgread does not refer to an open file")
	}
	defer of.ops.Done()
	if err := c.authorizeRead(ctx, of); err != nil {
		return c.sendErr(h.StreamID, err)
	}
	n := readLength(r.Offset, int64(r.Length), of.f.Info().Size)
	if n == 0 {
		c.w.write(proto.AppendPgReadHeader(nil, h.StreamID, true, r.Offset, 0))
		return nil
	}
	s := newPgSender(c, h.StreamID, r.Offset, r.Offset+n)
	defer s.release()
	_, err := of.f.Stream(backend.WithPacer(ctx, c.w), r.Offset, n, s.feed)
	c.srv.stats.BytesSent.Add(s.sent)
	switch {
	case err != nil && c.streamFailed(err):
		return errClientGone
	case err != nil:
		return c.sendErr(h.StreamID, fmt.Errorf("pgread %d@%d of %s: %w", r.Length, r.Offset, of.req.String(), err))
	case s.off < s.end:
		s.finish()
	}
	return nil
}

// Buffers for readv answers, in size classes (powers of two from 4 KiB).
var readvBufs [12]sync.Pool // 4 KiB ... 8 MiB

func getReadvBuf(n int) *[]byte {
	for i := range readvBufs {
		size := 4096 << i
		if n <= size {
			if bp, ok := readvBufs[i].Get().(*[]byte); ok {
				*bp = (*bp)[:n]
				return bp
			}
			b := make([]byte, n, size)
			return &b
		}
	}
	b := make([]byte, n)
	return &b
}

func putReadvBuf(bp *[]byte) {
	for i := range readvBufs {
		if cap(*bp) == 4096<<i {
			readvBufs[i].Put(bp)
			return
		}
	}
}

// doReadV answers kXR_readv: for every segment a 16-byte header (handle,
// length, offset) and its data. Segments are never split across messages
// (XrdCl matches each header to a requested chunk), so a message holds
// whole segments up to MaxMessage bytes, or one larger segment. A segment
// that reaches past the end of its file fails the request, as in XRootD.
func (c *conn) doReadV(ctx context.Context, h proto.RequestHeader, body []byte) error {
	if h.Dlen == 0 || h.Dlen%proto.ReadListItemLen != 0 {
		return c.fail(h.StreamID, proto.ErrArgInvalid, "Read vector is invalid")
	}
	if n := int(h.Dlen) / proto.ReadListItemLen; n > c.cfg.MaxReadVSegments {
		return c.fail(h.StreamID, proto.ErrArgTooLong, fmt.Sprintf("Read vector is too long: %d segments, at most %d (readv_iov_max)", n, c.cfg.MaxReadVSegments))
	}
	var r proto.ReadVRequest
	if err := r.Decode(&h, body); err != nil {
		return c.decodeErr(h.StreamID, err)
	}
	var total int64
	for _, s := range r.Segs {
		if int(s.Length) > c.cfg.MaxReadVSegmentSize {
			return c.fail(h.StreamID, proto.ErrArgTooLong, fmt.Sprintf("readv segment of %d bytes is longer than %d (readv_ior_max)", s.Length, c.cfg.MaxReadVSegmentSize))
		}
		total += int64(s.Length) + proto.ReadListItemLen
	}
	if total > 1<<31-1 {
		return c.fail(h.StreamID, proto.ErrArgTooLong, fmt.Sprintf("readv of %d bytes in total is longer than 2 GiB", total))
	}
	// Hold every file for the whole request.
	files := make(map[proto.FHandle]*openFile, 1)
	defer func() {
		for _, of := range files {
			of.ops.Done()
		}
	}()
	for _, s := range r.Segs {
		if _, ok := files[s.FHandle]; ok {
			continue
		}
		of := c.files.acquire(s.FHandle)
		if of == nil {
			return c.fail(h.StreamID, proto.ErrFileNotOpen, "readv does not refer to an open file")
		}
		files[s.FHandle] = of
	}
	for _, of := range files {
		if err := c.authorizeRead(ctx, of); err != nil {
			return c.sendErr(h.StreamID, err)
		}
	}

	segs := r.Segs
	var sent int64
	// One request answered in parts: counted once (backend.VectorRead).
	vr := &backend.VectorRead{}
	pctx := backend.WithVectorRead(ctx, vr)
	for len(segs) > 0 {
		n, size := 0, 0
		for n < len(segs) && (n == 0 || size+proto.ReadListItemLen+int(segs[n].Length) <= c.cfg.MaxMessage) {
			size += proto.ReadListItemLen + int(segs[n].Length)
			n++
		}
		final := n == len(segs)
		vr.Last = final
		bp := getReadvBuf(proto.ResponseHeaderLen + size)
		err := c.fillReadV(pctx, files, segs[:n], (*bp)[proto.ResponseHeaderLen:])
		if err != nil {
			putReadvBuf(bp)
			return c.sendErr(h.StreamID, err)
		}
		status := proto.StatusOKSoFar
		if final {
			status = proto.StatusOK
		}
		proto.AppendResponseHeader((*bp)[:0], h.StreamID, status, size)
		err = c.w.write(*bp)
		putReadvBuf(bp)
		if err != nil {
			return errClientGone
		}
		sent += int64(size - n*proto.ReadListItemLen)
		segs = segs[n:]
	}
	c.srv.stats.BytesSent.Add(sent)
	return nil
}

// fillReadV reads segs into out: per segment its header and data.
func (c *conn) fillReadV(ctx context.Context, files map[proto.FHandle]*openFile, segs []proto.ReadSeg, out []byte) error {
	// Lay out the headers and collect the data slices per file.
	byFile := make(map[*openFile][]origin.Segment, 1)
	pos := 0
	for _, s := range segs {
		proto.AppendReadSeg(out[pos:pos], s)
		pos += proto.ReadListItemLen
		of := files[s.FHandle]
		size := of.f.Info().Size
		if s.Offset+int64(s.Length) > size {
			return codeError(proto.ErrIOError, "readv segment %d@%d of %s reaches past the end of the file (%d bytes)",
				s.Length, s.Offset, of.req.String(), size)
		}
		byFile[of] = append(byFile[of], origin.Segment{Offset: s.Offset, Buf: out[pos : pos+int(s.Length)]})
		pos += int(s.Length)
	}
	for of, fsegs := range byFile {
		if sr, ok := of.f.(segmentReader); ok {
			if err := sr.ReadV(ctx, fsegs); err != nil {
				return fmt.Errorf("readv of %s: %w", of.req.String(), err)
			}
			continue
		}
		for _, s := range fsegs {
			if len(s.Buf) == 0 {
				continue
			}
			n, err := of.f.ReadAt(ctx, s.Buf, s.Offset)
			if err == io.EOF && n == len(s.Buf) {
				err = nil
			}
			if err == nil && n < len(s.Buf) {
				err = errPastEOF
			}
			if err != nil {
				return fmt.Errorf("readv segment %d@%d of %s: %w", len(s.Buf), s.Offset, of.req.String(), err)
			}
		}
	}
	return nil
}

// errClientGone is the outcome of a request whose answer could not be
// written: the client went away.
var errClientGone = fmt.Errorf("xrootd: writing the answer failed: %w", context.Canceled)

// errPastEOF is a read that the file cannot satisfy completely.
var errPastEOF = &codedError{code: proto.ErrIOError, msg: "read past the end of the file"}
