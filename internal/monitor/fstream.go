package monitor

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/origin"
)

// Wrap returns be with its opens, reads and closes reported on the
// f-stream; be itself when the f-stream is off. Wrap only what clients
// read through (the front ends), not internal readers such as prestaging.
func (m *Monitor) Wrap(be backend.Backend) backend.Backend {
	if m == nil || m.fs == nil {
		return be
	}
	return &observed{Backend: be, fs: m.fs}
}

type observed struct {
	backend.Backend
	fs *fileStream
}

// ListEach passes listings in parts through (backend.EachLister).
func (o *observed) ListEach(ctx context.Context, req backend.Request, withStat bool, fn func(origin.FileInfo) error) error {
	return backend.ListEach(ctx, o.Backend, req, withStat, fn)
}

func (o *observed) Open(ctx context.Context, req backend.Request) (backend.File, error) {
	f, err := o.Backend.Open(ctx, req)
	if err != nil {
		return f, err
	}
	return o.fs.opened(f, req), nil
}

// fileStream buffers f-stream records into packets: the header, a time
// record, then records until the packet is full or the flush interval ends.
type fileStream struct {
	m *Monitor

	// mu protects the fields below.
	mu         sync.Mutex
	buf        []byte // whole packet; records start at hdrLen+todLen
	nRec, nXfr int
	tBeg       uint32
	seq        uint8
	mapSeq     uint8
	// users maps a client session to its dictid ('u' record sent);
	// sessions lists the users' keys of a connection (protocol, address)
	// for its disconnect record.
	users    map[string]uint32
	sessions map[string][]string
	// open holds the files for transfer records.
	open map[*file]struct{}
}

// maxUsers bounds the remembered sessions; when full the map starts over
// (a session seen again gets a new 'u' record, which collectors accept).
const maxUsers = 1 << 16

func newFileStream(m *Monitor) *fileStream {
	fs := &fileStream{m: m, users: map[string]uint32{}, sessions: map[string][]string{}, open: map[*file]struct{}{}}
	fs.buf = make([]byte, hdrLen+todLen, maxFPkt)
	return fs
}

// add appends one record, flushing first if it does not fit. mu held.
func (fs *fileStream) addLocked(rec []byte, isXfr bool) {
	if len(fs.buf)+len(rec) > maxFPkt {
		fs.flushLocked()
	}
	if fs.nRec == 0 {
		fs.tBeg = uint32(fs.m.cfg.now().Unix())
	}
	fs.buf = append(fs.buf, rec...)
	fs.nRec++
	if isXfr {
		fs.nXfr++
	}
}

func (fs *fileStream) flush() {
	fs.mu.Lock()
	fs.flushLocked()
	fs.mu.Unlock()
}

func (fs *fileStream) flushLocked() {
	if fs.nRec == 0 {
		return
	}
	m := fs.m
	putHeader(fs.buf, codeFStream, fs.seq, len(fs.buf), m.stod())
	putTOD(fs.buf[hdrLen:], fs.nXfr, fs.nRec, fs.tBeg, uint32(m.cfg.now().Unix()), m.sid)
	fs.seq++
	m.fstream.send(fs.buf)
	fs.buf = fs.buf[:hdrLen+todLen]
	fs.nRec, fs.nXfr = 0, 0
}

// sendMap sends a dictionary packet at once (XRootD does not buffer them:
// a collector must know the id before the records that use it).
func (fs *fileStream) sendMapLocked(code byte, dictid uint32, text string) {
	fs.m.fstream.send(mapPacket(code, fs.mapSeq, fs.m.stod(), dictid, text))
	fs.mapSeq++
}

// sendIdent sends the server identification record ('='): who runs the
// server and where, keyed by the server id the other packets carry.
func (m *Monitor) sendIdent() {
	uname := strconv.Itoa(os.Getuid())
	if u, err := user.Current(); err == nil {
		uname = u.Username
	}
	c := &m.cfg
	text := fmt.Sprintf("=/%s.%d:%s@%s\n&site=%s&port=%d&inst=%s&pgm=hepcache&ver=%s",
		uname, os.Getpid(), m.sidText, c.Host, c.Site, c.Port, c.Name, m.version)
	m.fs.mu.Lock()
	m.fs.sendMapLocked(codeIdent, 0, text)
	m.fs.mu.Unlock()
}

// userID returns the dictid of the request's client session (one
// connection), sending its 'u' record the first time: "prot/user.pid:sid@host"
// then the authentication and login information. Without a login pid (HTTP)
// the client's port stands in for it. mu held.
func (fs *fileStream) userIDLocked(req backend.Request) uint32 {
	conn := req.Protocol + "\x00" + req.Client
	key := conn + "\x00" + req.User
	if id, ok := fs.users[key]; ok {
		return id
	}
	if len(fs.users) >= maxUsers {
		clear(fs.users)
		clear(fs.sessions)
	}
	id := fs.m.nextDictID()
	fs.users[key] = id
	fs.sessions[conn] = append(fs.sessions[conn], key)
	host, pid, err := net.SplitHostPort(req.Client)
	if err != nil {
		host, pid = req.Client, "0"
	}
	if req.ClientPID > 0 {
		pid = strconv.Itoa(req.ClientPID)
	}
	ipv := '4'
	if ip := net.ParseIP(host); ip != nil && ip.To4() == nil {
		host, ipv = "["+host+"]", '6'
	}
	name, moninfo := monitorName(req.User)
	prot := "xroot"
	if req.Protocol == "http" || req.Protocol == "https" {
		prot = req.Protocol
	}
	// XRootD's form with authentication (p, n, h, o: VO, r: role, g:
	// group, m), then what the client said at login (R: version, x:
	// application, y: info).
	// A client that did not authenticate has no authentication part, as
	// XRootD 5.5.3 sends it (its p= and n= were empty here).
	login := loginCGI(req.ClientLogin)
	auth := ""
	if req.Auth != "" {
		auth = fmt.Sprintf("&p=%s&n=%s&h=%s&o=%s&r=%s&g=%s&m=%s", req.Auth, name, host, cgiValue(req.VO), cgiValue(req.Role), cgiValue(req.Group), moninfo)
	}
	text := fmt.Sprintf("%s/%s.%s:%s@%s\n%s&R=%s&x=%s&y=%s&I=%c",
		prot, name, pid, fs.m.sidText, host, auth, login["xrd.rn"], login["xrd.appname"], login["xrd.info"], ipv)
	fs.sendMapLocked(codeUser, id, text)
	return id
}

// Disconnected reports the end of a client connection: a disc record for
// each user session of it that opened a file. Front ends call it through
// metrics.Clients.SetOnRemove, after closing the connection's files.
func (m *Monitor) Disconnected(protocol, addr string) {
	if m == nil || m.fs == nil {
		return
	}
	fs := m.fs
	conn := protocol + "\x00" + addr
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for _, key := range fs.sessions[conn] {
		if id, ok := fs.users[key]; ok {
			fs.addLocked(appendRecHdr(nil, recDisc, 0, 8, id), false)
			delete(fs.users, key)
		}
	}
	delete(fs.sessions, conn)
}

// loginCGI splits a login CGI ("&xrd.rn=v5.5.3&xrd.appname=xrdcp") into
// its values, keeping only characters that cannot break the record's own
// CGI.
// cgiValue keeps v from breaking the record's CGI form (& = newline,
// controls), as loginCGI does with the client's values.
func cgiValue(v string) string {
	return strings.Map(func(r rune) rune {
		if r == '&' || r == '=' || r == '\n' || r < ' ' || r > '~' {
			return -1
		}
		return r
	}, v)
}

func loginCGI(s string) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Split(s, "&") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		m[k] = strings.Map(func(r rune) rune {
			if r == '&' || r == '=' || r == '\n' || r < ' ' || r > '~' {
				return -1
			}
			return r
		}, v)
	}
	return m
}

func (fs *fileStream) opened(f backend.File, req backend.Request) backend.File {
	path := req.Path
	if len(path) > maxLFN-1 {
		path = path[:maxLFN-1]
	}
	of := &file{File: f, fs: fs, id: fs.m.nextDictID()}
	fs.mu.Lock()
	uid := fs.userIDLocked(req)
	fs.addLocked(appendOpen(nil, of.id, uid, f.Info().Size, path), false)
	fs.open[of] = struct{}{}
	fs.mu.Unlock()
	return of
}

// transfers adds a transfer record for every open file that read
// something since the last one (monitor fstat ... xfr).
func (fs *fileStream) transfers() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for f := range fs.open {
		f.mu.Lock()
		active, x := f.active, f.x
		f.active = false
		f.mu.Unlock()
		if active {
			fs.addLocked(appendXfr(nil, f.id, x), true)
		}
	}
}

// file is an open file seen by the f-stream: it counts the bytes and
// operations a close record reports.
type file struct {
	backend.File
	fs *fileStream
	id uint32

	// mu protects the counts.
	mu     sync.Mutex
	x      xfr
	o      ops
	active bool // read since the last transfer record
	closed bool
}

func (f *file) countRead(n int64) {
	if n <= 0 {
		return
	}
	k := int32(min(n, 1<<31-1))
	f.mu.Lock()
	f.x.read += n
	if f.o.read == 0 || k < f.o.rdMin {
		f.o.rdMin = k
	}
	f.o.rdMax = max(f.o.rdMax, k)
	f.o.read++
	f.active = true
	f.mu.Unlock()
}

func (f *file) countReadV(n int64, segs int) {
	k := int32(min(n, 1<<31-1))
	s := int16(min(segs, 1<<15-1))
	f.mu.Lock()
	f.x.readv += n
	if f.o.readv == 0 {
		f.o.rvMin, f.o.rsMin = k, s
	}
	f.o.rvMin, f.o.rvMax = min(f.o.rvMin, k), max(f.o.rvMax, k)
	f.o.rsMin, f.o.rsMax = min(f.o.rsMin, s), max(f.o.rsMax, s)
	f.o.readv++
	f.o.rsegs += int64(segs)
	f.active = true
	f.mu.Unlock()
}

// ReadAt implements backend.File.
func (f *file) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(ctx, p, off)
	f.countRead(int64(n))
	return n, err
}

// Stream implements backend.File.
func (f *file) Stream(ctx context.Context, off, n int64, fn func([]byte) error) (int64, error) {
	k, err := f.File.Stream(ctx, off, n, fn)
	f.countRead(k)
	return k, err
}

// StreamFile implements backend.FileStreamer, with the wrapped file's
// StreamFile when it has one, else its Stream.
func (f *file) StreamFile(ctx context.Context, off, n int64, bytes func([]byte) error, file func(*os.File, int64, int64) error) (int64, error) {
	var k int64
	var err error
	if fs, ok := f.File.(backend.FileStreamer); ok {
		k, err = fs.StreamFile(ctx, off, n, bytes, file)
	} else {
		k, err = f.File.Stream(ctx, off, n, bytes)
	}
	f.countRead(k)
	return k, err
}

// OSFile implements backend.OSFiler when the wrapped file does; the bytes
// are counted as read (the front end sends them all).
func (f *file) OSFile(off, n int64) (*os.File, bool) {
	osf, ok := f.File.(backend.OSFiler)
	if !ok {
		return nil, false
	}
	of, ok := osf.OSFile(off, n)
	if ok {
		f.countRead(n)
	}
	return of, ok
}

type segmentReader interface {
	ReadV(ctx context.Context, segs []origin.Segment) error
}

// ReadV serves a vector read with the wrapped file's ReadV, or segment by
// segment, and counts it as one readv: a client request answered in parts
// (backend.VectorRead) once, with all its parts' bytes and segments, at
// its last part.
func (f *file) ReadV(ctx context.Context, segs []origin.Segment) error {
	var total int64
	for _, s := range segs {
		total += int64(len(s.Buf))
	}
	if sr, ok := f.File.(segmentReader); ok {
		if err := sr.ReadV(ctx, segs); err != nil {
			return err
		}
	} else {
		for _, s := range segs {
			n, err := f.File.ReadAt(ctx, s.Buf, s.Offset)
			if err == io.EOF && n == len(s.Buf) {
				err = nil
			}
			if err != nil {
				return err
			}
		}
	}
	if vr := backend.VectorReadOf(ctx); vr != nil {
		t := vr.Tally(f)
		t.Bytes += total
		t.Segments += len(segs)
		if vr.Last {
			f.countReadV(t.Bytes, t.Segments)
		}
		return nil
	}
	f.countReadV(total, len(segs))
	return nil
}

// Close implements backend.File: the close record carries the counts.
func (f *file) Close() error { return f.close(false) }

// CloseAtDisconnect implements backend.DisconnectCloser: the close record
// is marked forced.
func (f *file) CloseAtDisconnect() error { return f.close(true) }

func (f *file) close(forced bool) error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return f.File.Close()
	}
	f.closed = true
	x, o := f.x, f.o
	f.mu.Unlock()
	fs := f.fs
	fs.mu.Lock()
	delete(fs.open, f)
	fs.addLocked(appendClose(nil, f.id, x, o, forced), false)
	fs.mu.Unlock()
	return f.File.Close()
}

// monitorName returns the user name a 'u' record carries and its m=
// (moninfo) field. A name that would break the record's
// "prot/user.pid:sid@host" form or its CGI (an X.509 DN has '/', '=',
// spaces, maybe '@') travels as its hash, as XrdSecgsi names a DN without
// a gridmap ("%08x.0"), and the DN itself goes into m= (where XRootD puts
// it) with the CGI separator removed.
func monitorName(user string) (name, moninfo string) {
	if user == "" {
		return "nobody", ""
	}
	if !strings.ContainsAny(user, "/.:@&= \n") {
		return user, ""
	}
	h := fnv.New32a()
	h.Write([]byte(user))
	return fmt.Sprintf("%08x.0", h.Sum32()), strings.NewReplacer("&", "", "\n", " ").Replace(user)
}
