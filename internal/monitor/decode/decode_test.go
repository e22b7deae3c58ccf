package decode

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// readCapture reads packets stored with a 4-byte big-endian length each
// (internal/monitor's TestCompareWithXCache writes them with
// HEPCACHE_MONITOR_CAPTURE=DIR).
func readCapture(t *testing.T, name string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for len(b) > 0 {
		if len(b) < 4 || int(binary.BigEndian.Uint32(b)) > len(b)-4 {
			t.Fatalf("%s: truncated capture", name)
		}
		n := binary.BigEndian.Uint32(b)
		out = append(out, b[4:4+n])
		b = b[4+n:]
	}
	return out
}

// TestCaptures decodes what XCache 5.5.3 and hepcache sent for the same
// reads (xrdcp of /a.root and /b.root, the Python bindings reading
// /a.root with read and readv, then reading /b.root and exiting without
// closing it) and checks what a collector relies on: the
// server id of the identification record is the one of every f-stream time
// record and g-stream header, the user and file dictionaries resolve, and
// every stream decodes.
func TestCaptures(t *testing.T) {
	for _, tc := range []struct {
		file, pgm, cacheType string
	}{
		{"xcache-5.5.3.packets", "xrootd", "pfc"},
		{"hepcache.packets", "hepcache", "hepcache"},
	} {
		t.Run(tc.pgm, func(t *testing.T) {
			packets := readCapture(t, tc.file)
			c := NewCollector()
			sids := map[uint64]bool{}
			for _, p := range packets {
				c.Add(p)
				if p[0] == '<' {
					continue
				}
				pk, err := Parse(p)
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case pk.TOD != nil:
					sids[pk.TOD.SID] = true
				case pk.GStream != nil:
					if pk.GStream.Type != 'C' {
						t.Errorf("g-stream provider %q, want C (pfc)", pk.GStream.Type)
					}
					sids[pk.GStream.SID] = true
				}
			}
			if err := c.Err(); err != nil {
				t.Fatal(err)
			}
			idents := c.Idents()
			if len(idents) == 0 {
				t.Fatal("no identification record")
			}
			id, err := ParseUser(strings.TrimPrefix(idents[0], "="))
			if err != nil || !strings.Contains(id.Info, "&pgm="+tc.pgm) {
				t.Fatalf("identification %q: %+v %v", idents[0], id, err)
			}
			sid, err := strconv.ParseUint(id.SID, 10, 64)
			if err != nil || len(sids) != 1 || !sids[sid] {
				t.Errorf("server id %q named, packets carry %v", id.SID, sids)
			}

			want := []struct {
				lfn        string
				size       int64
				readv, seg int64
			}{{"/a.root", 3<<20 + 17, 0, 0}, {"/b.root", 1 << 20, 0, 0}, {"/a.root", 3<<20 + 17, 3000, 2}, {"/b.root", 1 << 20, 0, 0}}
			files := c.Files()
			if len(files) != len(want) {
				t.Fatalf("%d files, want %d", len(files), len(want))
			}
			for i, f := range files {
				w := want[i]
				if f.LFN != w.lfn || f.Size != w.size || !f.Closed || f.ReadV != w.readv || f.Ops == nil || f.Ops.RSegs != w.seg ||
					f.User.Prot != "xroot" || f.User.Name != "root" || f.User.SID != id.SID || f.Forced != (i == 3) {
					t.Errorf("file %d: %+v user %+v ops %+v", i, f, f.User, f.Ops)
				}
			}
			if d := c.Disconnects(); len(d) != len(want) {
				t.Errorf("%d disconnects, want %d", len(d), len(want))
			}

			gs := c.FileCloses()
			if len(gs) != len(want) {
				t.Fatalf("%d file_close records, want %d", len(gs), len(want))
			}
			for i, g := range gs {
				// n_blks_done: all blocks once the file is complete (from
				// the second access on); hepcache counts at the client's
				// close, when a block may still be on its way to disk.
				if g.LFN != want[i].lfn || g.Size != want[i].size || g.BlkSize != 1<<20 || g.NBlks != (g.Size+g.BlkSize-1)/g.BlkSize ||
					g.NBlksDone > g.NBlks || (i >= 2 && g.NBlksDone != g.NBlks) || g.AccessCnt != int64(map[int]int{0: 1, 1: 1, 2: 2, 3: 2}[i]) {
					t.Errorf("file_close %d: %+v", i, g)
				}
			}
			for i, hit := range map[int]int64{2: 103000, 3: 1000} {
				if g := gs[i]; g.BHit != hit || g.BMiss != 0 || len(g.Remotes) != 0 {
					t.Errorf("file_close of hit %d: %+v", i, g)
				}
			}

			sums := c.Summaries()
			if len(sums) == 0 {
				t.Fatal("no summary report")
			}
			s := sums[len(sums)-1]
			if s.Attr["pgm"] != tc.pgm || s.Types["cache"] != tc.cacheType || s.Values["info.port"] == "" {
				t.Errorf("summary %+v", s)
			}
			// XRootD 5.5.3 writes "<hits>N></hits>": the value is N.
			if _, err := strconv.Atoi(s.Values["cache.rd.hits"]); err != nil {
				t.Errorf("cache.rd.hits = %q", s.Values["cache.rd.hits"])
			}
		})
	}
}

func TestParseRejectsBadPackets(t *testing.T) {
	for _, b := range [][]byte{
		nil,
		{'f', 0, 0, 9, 0, 0, 0, 0},               // plen longer than the datagram
		{'f', 0, 0, 12, 0, 0, 0, 0, 1, 0, 0, 40}, // record longer than the packet
		{'u', 0, 0, 10, 0, 0, 0, 0, 1, 2},        // no room for a dictid
		[]byte(`{"code":"g","pseq":1}` + "\n" + `{"event":` + "\x00"), // record not JSON
	} {
		if _, err := Parse(b); err == nil {
			t.Errorf("Parse(%q) succeeded", b)
		}
	}
	if _, err := ParseSummary([]byte(`<statistics><stats id="link"><num>1</num>`)); err == nil {
		t.Error("ParseSummary of a truncated report succeeded")
	}
}

// FuzzDecodePacket: a collector decodes whatever arrives on its UDP port;
// no datagram may make it panic.
func FuzzDecodePacket(f *testing.F) {
	for _, name := range []string{"xcache-5.5.3.packets", "hepcache.packets"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		for len(b) >= 4 && int(binary.BigEndian.Uint32(b)) <= len(b)-4 {
			n := binary.BigEndian.Uint32(b)
			f.Add(b[4 : 4+n])
			b = b[4+n:]
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		Parse(b)
		ParseSummary(b)
		NewCollector().Add(b)
	})
}
