package proto

import "testing"

// FuzzDecodeRequest feeds arbitrary bytes to the request decoders the
// server uses: they must return an error or a value, never panic.
func FuzzDecodeRequest(f *testing.F) {
	sid := StreamID{1, 1}
	for _, r := range []request{
		&ProtocolRequest{ClientPV: 0x511}, &LoginRequest{Username: "u"}, &AuthRequest{Cred: []byte("x")},
		&OpenRequest{Path: "/f?a=b"}, &ReadRequest{Length: 1, HasArgs: true}, &ReadVRequest{Segs: []ReadSeg{{}, {}}},
		&PgReadRequest{NArgs: 2}, &StatRequest{Path: "/"}, &CloseRequest{}, &DirlistRequest{Path: "/"},
		&QueryRequest{Args: "x"}, &LocateRequest{Path: "*"}, &PingRequest{}, &EndsessRequest{}, &SetRequest{Data: "x"},
	} {
		f.Add(r.Append(nil, sid))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeRequestHeader(b)
		if err != nil {
			return
		}
		data := b[RequestHeaderLen:]
		if int(h.Dlen) < len(data) {
			data = data[:h.Dlen]
		}
		var r request
		switch h.RequestID {
		case ReqProtocol:
			r = &ProtocolRequest{}
		case ReqLogin:
			r = &LoginRequest{}
		case ReqAuth:
			r = &AuthRequest{}
		case ReqOpen:
			r = &OpenRequest{}
		case ReqRead:
			r = &ReadRequest{}
		case ReqReadV:
			r = &ReadVRequest{}
		case ReqPgRead:
			r = &PgReadRequest{}
		case ReqStat:
			r = &StatRequest{}
		case ReqClose:
			r = &CloseRequest{}
		case ReqDirlist:
			r = &DirlistRequest{}
		case ReqQuery:
			r = &QueryRequest{}
		case ReqLocate:
			r = &LocateRequest{}
		case ReqPing:
			r = &PingRequest{}
		case ReqEndsess:
			r = &EndsessRequest{}
		case ReqSet:
			r = &SetRequest{}
		default:
			return
		}
		if err := r.Decode(&h, data); err != nil {
			return
		}
		// A decoded request re-encodes to a request that decodes the same.
		again := r.Append(nil, h.StreamID)
		h2, err := DecodeRequestHeader(again)
		if err != nil {
			t.Fatalf("re-encoded header: %v", err)
		}
		if err := r.Decode(&h2, again[RequestHeaderLen:]); err != nil {
			t.Fatalf("re-encoded %v: %v", h.RequestID, err)
		}
		_, _ = ParseStatInfo(data)
		_, _ = ParseDirlist(nil, data)
	})
}
