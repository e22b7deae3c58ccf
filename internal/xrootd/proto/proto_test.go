package proto

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGolden(t *testing.T) {
	sid := StreamID{0x01, 0x02}
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{"client handshake", AppendClientHandshake(nil),
			"00000000 00000000 00000000 00000004 000007dc"},
		{"server handshake", AppendServerHandshake(nil, ProtocolVersion, DataServer),
			"0000 0000 00000008 00000511 00000001"},
		{"protocol request", (&ProtocolRequest{ClientPV: ProtocolVersion, Flags: ProtoSecReqs | ProtoBifReqs | ProtoAbleTLS, Expect: ExpectLogin}).Append(nil, sid),
			"0102 0bbe 00000511 0b 03 00000000000000000000 00000000"},
		{"protocol response", AppendProtocolResponse(nil, sid, &ProtocolResponse{PVal: ProtocolVersion, Flags: IsServer | SupPgRW}),
			"0102 0000 00000008 00000511 00200001"},
		{"login request", (&LoginRequest{PID: 42, Username: "alice", CapVer: CapAsync | LoginVer005, Ability: AbilityFullURL}).Append(nil, sid),
			"0102 0bbf 0000002a 616c696365000000 00 01 85 00 00000000"},
		{"open request", (&OpenRequest{Options: OpenRead | OpenRetStat, Path: "/a"}).Append(nil, sid),
			"0102 0bc2 0000 0410 000000000000000000000000 00000002 2f61"},
		{"open response", AppendOpenResponse(nil, sid, FHandle{0, 0, 0, 7}, nil),
			"0102 0000 00000004 00000007"},
		{"open response retstat", AppendOpenResponse(nil, sid, FHandle{0, 0, 0, 7}, &StatInfo{ID: 1, Size: 2, Flags: 16, MTime: 3}),
			"0102 0000 00000015 00000007 0000000000000000 3120322031362033 00"},
		{"read request", (&ReadRequest{FHandle: FHandle{0, 0, 0, 7}, Offset: 4096, Length: 1 << 20}).Append(nil, sid),
			"0102 0bc5 00000007 0000000000001000 00100000 00000000"},
		{"readv request", (&ReadVRequest{Segs: []ReadSeg{{FHandle{0, 0, 0, 7}, 10, 20}}}).Append(nil, sid),
			"0102 0bd1 000000000000000000000000000000 00 00000010 00000007 0000000a 0000000000000014"},
		{"stat by handle", (&StatRequest{FHandle: FHandle{0, 0, 0, 7}}).Append(nil, sid),
			"0102 0bc9 00 0000000000000000000000 00000007 00000000"},
		{"dirlist dstat", (&DirlistRequest{Options: DirlistDStat, Path: "/d"}).Append(nil, sid),
			"0102 0bbc 000000000000000000000000000000 02 00000002 2f64"},
		{"query checksum", (&QueryRequest{Type: QueryChecksum, Args: "/f"}).Append(nil, sid),
			"0102 0bb9 0003 0000 00000000 0000000000000000 00000002 2f66"},
		{"error", AppendError(nil, sid, ErrNotFound, "no"),
			"0102 0fa3 00000007 00000bc3 6e6f00"},
		{"redirect", AppendRedirect(nil, sid, 1094, "h?x"),
			"0102 0fa4 00000007 00000446 683f78"},
		{"wait", AppendWait(nil, sid, 5, ""),
			"0102 0fa5 00000004 00000005"},
		{"waitresp", AppendWaitResp(nil, sid, 30),
			"0102 0fa6 00000004 0000001e"},
		{"asynresp", AppendAsynResp(nil, sid, StatusOK, []byte("ok")),
			"0000 0fa1 00000012 00001390 00000000 0102 0000 00000002 6f6b"},
		{"stat response", AppendStatResponse(nil, sid, &StatInfo{ID: 66306, Size: 1234, Flags: StatReadable, MTime: 1700000000}),
			"0102 0000 00000019" + hex.EncodeToString([]byte("66306 1234 16 1700000000\x00"))},
		{"locate", AppendLocateResponse(nil, sid, []LocateEntry{{'S', 'r', "127.0.0.1:1094"}}),
			"0102 0000 00000011" + hex.EncodeToString([]byte("Sr127.0.0.1:1094\x00"))},
		{"dirlist dstat final", AppendDirlist(nil, sid, true, true, true, []DirEntry{{Name: "f", Stat: StatInfo{ID: 1, Size: 2, Flags: 16, MTime: 3}}}),
			"0102 0000 00000015" + hex.EncodeToString([]byte(".\n0 0 0 0\nf\n1 2 16 3\x00"))},
		{"dirlist sofar", AppendDirlist(nil, sid, false, false, false, []DirEntry{{Name: "a"}, {Name: "b"}}),
			"0102 0fa0 00000004" + hex.EncodeToString([]byte("a\nb\n"))},
		{"dirlist empty final", AppendDirlist(nil, sid, true, false, false, nil),
			"0102 0000 00000000"},
		// The crc32c below was computed independently over bytes 4..31 of
		// the status body+info after the crc field.
		{"pgread status", AppendPgReadHeader(nil, sid, true, 4092, 8),
			"0102 0fa7 00000018 " + "%CRC%" + " 0102 1e 00 00000000 00000010 0000000000000ffc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.want
			if strings.Contains(want, "%CRC%") {
				body := unhex(t, "0102 1e 00 00000000 00000010 0000000000000ffc")
				want = strings.Replace(want, "%CRC%", hex.EncodeToString(be.AppendUint32(nil, CRC32C(body))), 1)
			}
			if w := unhex(t, want); !bytes.Equal(tt.got, w) {
				t.Errorf("got  % x\nwant % x", tt.got, w)
			}
		})
	}
}

func TestCRC32CVector(t *testing.T) {
	if got := CRC32C([]byte("123456789")); got != 0xe3069283 {
		t.Fatalf("crc32c(123456789) = %08x, want e3069283", got)
	}
}

func decodeReq(t *testing.T, b []byte) (RequestHeader, []byte) {
	t.Helper()
	h, err := DecodeRequestHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	if int(h.Dlen) != len(b)-RequestHeaderLen {
		t.Fatalf("dlen %d, %d data bytes", h.Dlen, len(b)-RequestHeaderLen)
	}
	return h, b[RequestHeaderLen:]
}

type request interface {
	Append(dst []byte, sid StreamID) []byte
	Decode(h *RequestHeader, data []byte) error
}

func TestRequestRoundTrip(t *testing.T) {
	sid := StreamID{9, 8}
	tests := []struct {
		name      string
		in, empty request
	}{
		{"protocol", &ProtocolRequest{ClientPV: 0x511, Flags: ProtoSecReqs, Expect: ExpectLogin}, &ProtocolRequest{}},
		{"login", &LoginRequest{PID: 7, Username: "nobody12", Ability: AbilityFullURL | AbilityReadRdOK, CapVer: 0x85, Token: "&xrd.cc=ch"}, &LoginRequest{}},
		{"auth", &AuthRequest{CredType: [4]byte{'u', 'n', 'i', 'x'}, Cred: []byte("unix\x00nobody")}, &AuthRequest{}},
		{"open", &OpenRequest{Mode: ModeUserRead, Options: OpenRead | OpenRetStat, Path: "/store/f.root?xrd.wantprot=unix"}, &OpenRequest{}},
		{"read", &ReadRequest{FHandle: FHandle{1, 2, 3, 4}, Offset: 1 << 40, Length: 1 << 24}, &ReadRequest{}},
		{"read args", &ReadRequest{FHandle: FHandle{1, 2, 3, 4}, Offset: 5, Length: 6, HasArgs: true, PathID: 3}, &ReadRequest{}},
		{"readv", &ReadVRequest{PathID: 1, Segs: []ReadSeg{{FHandle{1}, 10, 0}, {FHandle{1}, 20, 1 << 33}}}, &ReadVRequest{}},
		{"pgread", &PgReadRequest{FHandle: FHandle{0, 0, 0, 1}, Offset: 4095, Length: 100000}, &PgReadRequest{}},
		{"pgread args", &PgReadRequest{FHandle: FHandle{0, 0, 0, 1}, Offset: 0, Length: 1, NArgs: 2, PathID: 2, ReqFlags: PgRetry}, &PgReadRequest{}},
		{"stat path", &StatRequest{Path: "/store"}, &StatRequest{}},
		{"stat handle", &StatRequest{FHandle: FHandle{0, 0, 0, 9}}, &StatRequest{}},
		{"close", &CloseRequest{FHandle: FHandle{0, 0, 0, 9}}, &CloseRequest{}},
		{"dirlist", &DirlistRequest{Options: DirlistDStat, Path: "/store"}, &DirlistRequest{}},
		{"query", &QueryRequest{Type: QueryConfig, Args: "readv_iov_max readv_ior_max"}, &QueryRequest{}},
		{"locate", &LocateRequest{Options: LocateRefresh | Locate4Dirlist, Path: "/store"}, &LocateRequest{}},
		{"ping", &PingRequest{}, &PingRequest{}},
		{"endsess", &EndsessRequest{SessID: [16]byte{1, 2, 3}}, &EndsessRequest{}},
		{"set", &SetRequest{Data: "appid hepcache"}, &SetRequest{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.in.Append([]byte("prefix"), sid)
			if string(b[:6]) != "prefix" {
				t.Fatalf("Append clobbered dst")
			}
			h, data := decodeReq(t, b[6:])
			if h.StreamID != sid {
				t.Errorf("stream id %v", h.StreamID)
			}
			if err := tt.empty.Decode(&h, data); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(tt.in, tt.empty) {
				t.Errorf("round trip:\n got %+v\nwant %+v", tt.empty, tt.in)
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	sid := StreamID{}
	tests := []struct {
		name string
		b    []byte
		into request
	}{
		{"wrong id", (&PingRequest{}).Append(nil, sid), &CloseRequest{}},
		{"readv partial", func() []byte {
			b := (&ReadVRequest{Segs: []ReadSeg{{}}}).Append(nil, sid)
			b = append(b, 0)
			be.PutUint32(b[20:], uint32(len(b)-RequestHeaderLen))
			return b
		}(), &ReadVRequest{}},
		{"readv empty", (&ReadVRequest{}).Append(nil, sid), &ReadVRequest{}},
		{"readv too long", (&ReadVRequest{Segs: make([]ReadSeg, MaxReadVSegs+1)}).Append(nil, sid), &ReadVRequest{}},
		{"read negative", (&ReadRequest{Length: -1}).Append(nil, sid), &ReadRequest{}},
		{"open no path", (&OpenRequest{}).Append(nil, sid), &OpenRequest{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, data := decodeReq(t, tt.b)
			if err := tt.into.Decode(&h, data); !errors.Is(err, ErrMalformed) {
				t.Fatalf("Decode = %v, want ErrMalformed", err)
			}
		})
	}
	if _, err := DecodeRequestHeader(make([]byte, 23)); !errors.Is(err, ErrShort) {
		t.Errorf("short header: %v", err)
	}
	neg := AppendRequestHeader(nil, &RequestHeader{Dlen: -1})
	if _, err := DecodeRequestHeader(neg); !errors.Is(err, ErrMalformed) {
		t.Errorf("negative dlen: %v", err)
	}
}

func TestHandshake(t *testing.T) {
	if err := CheckClientHandshake(AppendClientHandshake(nil)); err != nil {
		t.Fatal(err)
	}
	bad := AppendClientHandshake(nil)
	bad[19] = 0
	if err := CheckClientHandshake(bad); !errors.Is(err, ErrMalformed) {
		t.Fatalf("bad handshake: %v", err)
	}
	pv, typ, err := DecodeServerHandshake(AppendServerHandshake(nil, ProtocolVersion, DataServer))
	if err != nil || pv != ProtocolVersion || typ != DataServer {
		t.Fatalf("server handshake: %x %d %v", pv, typ, err)
	}
}

func TestResponseRoundTrip(t *testing.T) {
	sid := StreamID{3, 4}
	body := func(b []byte, status Status) []byte {
		t.Helper()
		h, err := DecodeResponseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		if h.StreamID != sid && status != StatusAttn || h.Status != status || int(h.Dlen) != len(b)-8 {
			t.Fatalf("header %+v for %d bytes", h, len(b))
		}
		return b[8:]
	}
	t.Run("error", func(t *testing.T) {
		code, msg, err := DecodeError(body(AppendError(nil, sid, ErrIsDirectory, "is a dir"), StatusError))
		if err != nil || code != ErrIsDirectory || msg != "is a dir" {
			t.Fatalf("%v %q %v", code, msg, err)
		}
	})
	t.Run("redirect", func(t *testing.T) {
		port, host, err := DecodeRedirect(body(AppendRedirect(nil, sid, 2094, "host.example?tried=x"), StatusRedirect))
		if err != nil || port != 2094 || host != "host.example?tried=x" {
			t.Fatalf("%d %q %v", port, host, err)
		}
	})
	t.Run("wait", func(t *testing.T) {
		s, msg, err := DecodeWait(body(AppendWait(nil, sid, 3, "busy"), StatusWait))
		if err != nil || s != 3 || msg != "busy" {
			t.Fatalf("%d %q %v", s, msg, err)
		}
	})
	t.Run("waitresp", func(t *testing.T) {
		s, err := DecodeWaitResp(body(AppendWaitResp(nil, sid, 9), StatusWaitResp))
		if err != nil || s != 9 {
			t.Fatalf("%d %v", s, err)
		}
	})
	t.Run("asynresp", func(t *testing.T) {
		act, inner, data, err := DecodeAttn(body(AppendAsynResp(nil, sid, StatusOK, []byte("adler32 0a0b0c0d\x00")), StatusAttn))
		if err != nil || act != AttnAsynResp || inner.StreamID != sid || inner.Status != StatusOK || string(data) != "adler32 0a0b0c0d\x00" {
			t.Fatalf("%v %+v %q %v", act, inner, data, err)
		}
	})
	t.Run("login", func(t *testing.T) {
		in := LoginResponse{SessID: [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, Sec: []byte("&P=unix")}
		out, err := DecodeLoginResponse(body(AppendLoginResponse(nil, sid, &in), StatusOK))
		if err != nil || !reflect.DeepEqual(in, out) {
			t.Fatalf("%+v %v", out, err)
		}
	})
	t.Run("protocol", func(t *testing.T) {
		in := ProtocolResponse{PVal: 0x511, Flags: IsServer | SupPgRW, Rest: []byte{'S', 0, 0, 0, 2, 0}}
		out, err := DecodeProtocolResponse(body(AppendProtocolResponse(nil, sid, &in), StatusOK))
		if err != nil || !reflect.DeepEqual(in, out) {
			t.Fatalf("%+v %v", out, err)
		}
		if lvl, _, ok := out.SecReqs(); !ok || lvl != 2 {
			t.Fatalf("SecReqs = %d %v", lvl, ok)
		}
	})
	t.Run("open retstat", func(t *testing.T) {
		st := StatInfo{ID: 1, Size: 1 << 40, Flags: StatReadable, MTime: 99}
		fh, got, has, err := DecodeOpenResponse(body(AppendOpenResponse(nil, sid, FHandle{1, 2, 3, 4}, &st), StatusOK))
		if err != nil || !has || fh != (FHandle{1, 2, 3, 4}) || got != st {
			t.Fatalf("%v %+v %v %v", fh, got, has, err)
		}
	})
	t.Run("locate", func(t *testing.T) {
		in := []LocateEntry{{'S', 'r', "[::1]:1094"}, {'M', 'w', "h:1"}}
		out, err := ParseLocateResponse(body(AppendLocateResponse(nil, sid, in), StatusOK))
		if err != nil || !reflect.DeepEqual(in, out) {
			t.Fatalf("%+v %v", out, err)
		}
	})
}

func TestStatInfo(t *testing.T) {
	tests := []struct {
		name string
		in   StatInfo
		text string
	}{
		{"basic", StatInfo{ID: 66306, Size: 0, Flags: StatIsDir | StatReadable, MTime: 1}, "66306 0 18 1"},
		{"extended", StatInfo{ID: 5, Size: 6, Flags: 48, MTime: 7, Extended: true, CTime: 8, ATime: 9, Mode: 0644, Owner: "nobody", Group: "nogroup"},
			"5 6 48 7 8 9 0644 nobody nogroup"},
		{"extended mode 0", StatInfo{Extended: true, Owner: "a", Group: "b"}, "0 0 0 0 0 0 0000 a b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(AppendStatInfo(nil, &tt.in)); got != tt.text {
				t.Fatalf("AppendStatInfo = %q, want %q", got, tt.text)
			}
			out, err := ParseStatInfo([]byte(tt.text + "\x00"))
			if err != nil || out != tt.in {
				t.Fatalf("ParseStatInfo = %+v %v", out, err)
			}
		})
	}
	// As the C++ 5.5.3 server sends it, including a checksum suffix.
	st, err := ParseStatInfo([]byte("2049 1048576 16 1700000000 1700000001 1700000002 0644 nobody nogroup [ adler32:0a0b0c0d ]\x00"))
	if err != nil || st.Size != 1048576 || !st.Extended || st.Mode != 0644 || st.Group != "nogroup" {
		t.Fatalf("%+v %v", st, err)
	}
	for _, bad := range []string{"", "1 2 3", "1 x 3 4", "1 2 3 4 5 6 0z99 a b"} {
		if _, err := ParseStatInfo([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseStatInfo(%q) = %v, want ErrMalformed", bad, err)
		}
	}
}

func TestDirlist(t *testing.T) {
	entries := []DirEntry{
		{Name: "a.root", Stat: StatInfo{ID: 1, Size: 10, Flags: 16, MTime: 5}, HasStat: true},
		{Name: "sub dir", Stat: StatInfo{ID: 2, Size: 4096, Flags: 18, MTime: 6}, HasStat: true},
	}
	// Two responses: oksofar with the lead-in and one entry, then the final.
	var wire []byte
	r1 := AppendDirlist(nil, StreamID{}, false, true, true, entries[:1])
	r2 := AppendDirlist(nil, StreamID{}, true, false, true, entries[1:])
	wire = append(append(wire, r1[8:]...), r2[8:]...)
	got, err := ParseDirlist(nil, wire)
	if err != nil || !reflect.DeepEqual(got, entries) {
		t.Fatalf("dstat: %+v %v", got, err)
	}
	plain := AppendDirlist(nil, StreamID{}, true, false, false, entries)
	got, err = ParseDirlist(nil, plain[8:])
	if err != nil || len(got) != 2 || got[0].Name != "a.root" || got[1].Name != "sub dir" || got[1].HasStat {
		t.Fatalf("plain: %+v %v", got, err)
	}
	// An empty dstat listing is just the lead-in with its last \n as NUL.
	empty := AppendDirlist(nil, StreamID{}, true, true, true, nil)
	if got, err = ParseDirlist(nil, empty[8:]); err != nil || len(got) != 0 {
		t.Fatalf("empty dstat: %+v %v", got, err)
	}
}

func TestPgRead(t *testing.T) {
	for _, tc := range []struct {
		off   int64
		n     int
		pages int
	}{{0, 0, 0}, {0, 1, 1}, {0, 4096, 1}, {0, 4097, 2}, {4095, 1, 1}, {4095, 2, 2}, {4092, 8, 2}, {100, 8192, 3}, {4096, 8192, 2}} {
		if got := PgReadPages(tc.off, tc.n); got != tc.pages {
			t.Errorf("PgReadPages(%d, %d) = %d, want %d", tc.off, tc.n, got, tc.pages)
		}
	}
	data := make([]byte, 3*PageSize+77)
	for i := range data {
		data[i] = byte(i * 7)
	}
	const off = 1000
	sid := StreamID{5, 6}
	resp := AppendPgReadResponse(nil, sid, true, off, data)
	h, err := DecodeResponseHeader(resp)
	if err != nil || h.Status != StatusStatus || h.Dlen != StatusBodyLen+8 {
		t.Fatalf("header %+v %v", h, err)
	}
	sb, info, err := DecodeStatus(resp[8 : 8+h.Dlen])
	if err != nil {
		t.Fatal(err)
	}
	if sb.StreamID != sid || sb.RequestID != ReqPgRead || sb.RespType != FinalResult || int(sb.Dlen) != PgReadDataLen(off, len(data)) {
		t.Fatalf("status body %+v", sb)
	}
	if o, _ := PgReadOffset(info); o != off {
		t.Fatalf("offset %d", o)
	}
	wire := resp[8+h.Dlen:]
	if len(wire) != int(sb.Dlen) {
		t.Fatalf("data %d bytes, dlen %d", len(wire), sb.Dlen)
	}
	// First page is cut at the 4 KiB boundary: its crc precedes 3096 bytes.
	if got := be.Uint32(wire); got != CRC32C(data[:PageSize-off]) {
		t.Fatalf("first page crc %08x", got)
	}
	out := make([]byte, len(data))
	n, err := UnpackPgRead(out, wire, off)
	if err != nil || n != len(data) || !bytes.Equal(out, data) {
		t.Fatalf("unpack %d %v", n, err)
	}
	wire[4+PageSize-off+4+10] ^= 1 // corrupt the second page
	var crcErr *ErrPageCRC
	if _, err := UnpackPgRead(out, wire, off); !errors.As(err, &crcErr) || crcErr.Offset != PageSize {
		t.Fatalf("corrupt page: %v", err)
	}
	resp[10] ^= 1 // corrupt the status body
	if _, _, err := DecodeStatus(resp[8 : 8+h.Dlen]); !errors.Is(err, ErrMalformed) {
		t.Fatalf("corrupt status: %v", err)
	}
}

func TestErrno(t *testing.T) {
	for code := ErrArgInvalid; code <= ErrReqTimedOut; code++ {
		if code.String() == "" || strings.HasPrefix(code.String(), "kXR_error(") {
			t.Errorf("%d has no name", code)
		}
	}
	for _, en := range []syscall.Errno{syscall.ENOENT, syscall.EACCES, syscall.EISDIR, syscall.EIO, syscall.ETIMEDOUT, syscall.EBADF} {
		if back := CodeFromErrno(en).Errno(); back != en {
			t.Errorf("%v -> %v -> %v", en, CodeFromErrno(en), back)
		}
	}
	if CodeFromErrno(syscall.EPERM) != ErrNotAuthorized || CodeFromErrno(syscall.E2BIG) != ErrFSError {
		t.Error("EPERM/E2BIG mapping")
	}
	err := error(&Error{Code: ErrNotFound, Message: "no such file"})
	if !errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EACCES) {
		t.Error("Error.Is")
	}
	if err.Error() != "kXR_NotFound: no such file" {
		t.Errorf("Error() = %q", err.Error())
	}
	if ReqPgRead.String() != "kXR_pgread" || StatusWaitResp.String() != "kXR_waitresp" || StatusOK.String() != "kXR_ok" {
		t.Error("names")
	}
}

func TestAllocs(t *testing.T) {
	buf := make([]byte, 0, 1<<16)
	data := make([]byte, 8192)
	var rv ReadVRequest
	req := (&ReadVRequest{Segs: make([]ReadSeg, 64)}).Append(nil, StreamID{})
	h, _ := DecodeRequestHeader(req)
	_ = rv.Decode(&h, req[24:])
	allocs := testing.AllocsPerRun(100, func() {
		buf = AppendPgReadResponse(buf[:0], StreamID{}, true, 100, data)
		buf = (&ReadRequest{Length: 10}).Append(buf[:0], StreamID{})
		buf = AppendError(buf[:0], StreamID{}, ErrNotFound, "x")
		_ = rv.Decode(&h, req[24:])
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per run, want 0", allocs)
	}
}

func TestPrepareRoundTrip(t *testing.T) {
	in := PrepareRequest{Options: PrepareStage | PrepareNoErrs, Priority: 1, OptionX: PrepareEvict, Paths: []string{"/a", "/b?x=1"}}
	buf := in.Append(nil, StreamID{1, 2})
	h, err := DecodeRequestHeader(buf)
	if err != nil {
		t.Fatal(err)
	}
	var out PrepareRequest
	if err := out.Decode(&h, buf[RequestHeaderLen:]); err != nil {
		t.Fatal(err)
	}
	if out.Options != in.Options || out.Priority != 1 || out.OptionX != PrepareEvict || strings.Join(out.Paths, ",") != "/a,/b?x=1" {
		t.Fatalf("got %+v", out)
	}
	empty := PrepareRequest{Options: PrepareStage, Paths: []string{"\n", ""}}
	buf = empty.Append(nil, StreamID{1, 2})
	h, _ = DecodeRequestHeader(buf)
	if err := out.Decode(&h, buf[RequestHeaderLen:]); !errors.Is(err, ErrMalformed) {
		t.Fatalf("empty prepare: %v", err)
	}
}
