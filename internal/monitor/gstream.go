package monitor

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/url"
	"sync"

	"github.com/hepcache/hepcache/internal/cache"
)

// Access reports a closed cache file on the g-stream as XrdPfc does: one
// file_close record per last close (the access from attach to detach).
func (m *Monitor) Access(r cache.AccessRecord) {
	if m == nil || m.gs == nil {
		return
	}
	m.gs.add(r)
}

// gStream buffers file_close records, one JSON object per line, behind a
// binary XrdXrootdMonGS header or XRootD's JSON header line; the last byte
// of a packet is a NUL (in place of the last newline).
type gStream struct {
	m *Monitor

	// mu protects the fields below.
	mu         sync.Mutex
	buf        []byte
	first      int // where records start in buf
	tBeg, tEnd uint32
	seq        int
	// accesses counts the closes per path (access_cnt); bounded like
	// fileStream.users.
	accesses map[string]int
}

func newGStream(m *Monitor) *gStream {
	gs := &gStream{m: m, accesses: map[string]int{}}
	gs.buf = make([]byte, 0, maxGPkt)
	if !m.cfg.GStreamJSONHeader {
		gs.buf = gs.buf[:gsHdrLen]
	} else {
		gs.buf = gs.appendJSONHeader(gs.buf)
	}
	gs.first = len(gs.buf)
	return gs
}

// jsonHeaderFmt is XRootD's header line (mongstream ... send json
// dflthdr); pseq and the times are fixed-width so the line can be
// rewritten in place.
const jsonHeaderFmt = `{"code":"g","pseq":%3d,"stod":%d,"sid":%d,"gs":{"type":"C","tbeg":%10d,"tend":%10d}}` + "\n"

func (gs *gStream) appendJSONHeader(b []byte) []byte {
	return fmt.Appendf(b, jsonHeaderFmt, gs.seq, gs.m.stod(), gs.m.sid, gs.tBeg, gs.tEnd)
}

// fileClose is XrdPfc's file_close record, in its field order.
type fileClose struct {
	Event     string   `json:"event"`
	LFN       string   `json:"lfn"`
	Size      int64    `json:"size"`
	BlkSize   int64    `json:"blk_size"`
	NBlks     int64    `json:"n_blks"`
	NBlksDone int64    `json:"n_blks_done"`
	AccessCnt int      `json:"access_cnt"`
	AttachT   int64    `json:"attach_t"`
	DetachT   int64    `json:"detach_t"`
	Remotes   []string `json:"remotes"`
	BHit      int64    `json:"b_hit"`
	BMiss     int64    `json:"b_miss"`
	BBypass   int64    `json:"b_bypass"`
	NCksErrs  int      `json:"n_cks_errs"`
}

func (gs *gStream) add(r cache.AccessRecord) {
	rec := fileClose{Event: "file_close", LFN: r.Path, Size: r.Size, BlkSize: r.BlockSize,
		NBlksDone: int64(r.BlocksDone), AttachT: r.OpenTime.Unix(), DetachT: r.Time.Unix(),
		Remotes: []string{}, BHit: r.BytesHit, BMiss: r.BytesMissed, BBypass: r.BytesBypassed}
	if r.BlockSize > 0 {
		rec.NBlks = (r.Size + r.BlockSize - 1) / r.BlockSize
	}
	// Like XrdPfc, list the origin only if this access read from it.
	if h := remote(r.Origin); h != "" && r.BytesMissed+r.BytesBypassed > 0 {
		rec.Remotes = append(rec.Remotes, h)
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if len(gs.accesses) >= maxUsers {
		clear(gs.accesses)
	}
	gs.accesses[r.Path]++
	rec.AccessCnt = gs.accesses[r.Path]
	line, err := json.Marshal(rec)
	if err != nil || gs.first+len(line)+1 > maxGPkt {
		return
	}
	if len(gs.buf)+len(line)+1 > maxGPkt {
		gs.flushLocked()
	}
	now := uint32(gs.m.cfg.now().Unix())
	if len(gs.buf) == gs.first {
		gs.tBeg = now
	}
	gs.tEnd = now
	gs.buf = append(gs.buf, line...)
	gs.buf = append(gs.buf, '\n')
}

// remote is the host:port of an origin URL, as XrdPfc lists the data
// servers it read from.
func remote(origin string) string {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return ""
	}
	return u.Host
}

func (gs *gStream) flush() {
	gs.mu.Lock()
	gs.flushLocked()
	gs.mu.Unlock()
}

func (gs *gStream) flushLocked() {
	if len(gs.buf) == gs.first {
		return
	}
	m := gs.m
	gs.buf[len(gs.buf)-1] = 0
	if m.cfg.GStreamJSONHeader {
		gs.seq = (gs.seq + 1) % 1000
		copy(gs.buf, gs.appendJSONHeader(nil))
	} else {
		gs.seq = (gs.seq + 1) % 256
		putHeader(gs.buf, codeGStream, uint8(gs.seq), len(gs.buf), m.stod())
		binary.BigEndian.PutUint32(gs.buf[hdrLen:], gs.tBeg)
		binary.BigEndian.PutUint32(gs.buf[hdrLen+4:], gs.tEnd)
		binary.BigEndian.PutUint64(gs.buf[hdrLen+8:], m.sid|uint64(gsTypePFC)<<56)
	}
	m.gstream.send(gs.buf)
	gs.buf = gs.buf[:gs.first]
	gs.tBeg, gs.tEnd = 0, 0
}
