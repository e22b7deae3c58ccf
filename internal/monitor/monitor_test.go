package monitor

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/internal/monitor/decode"
	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/syncbuf"
	"github.com/hepcache/hepcache/origin"
	"github.com/hepcache/hepcache/origin/posix"
)

// collect receives datagrams on a loopback UDP port into a decode.Collector.
func collect(t *testing.T) (string, *decode.Collector) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	c := decode.NewCollector()
	go func() {
		buf := make([]byte, 1<<16)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			c.Add(buf[:n])
		}
	}()
	return pc.LocalAddr().String(), c
}

// TestStreamsRoundTrip: what the encoders send, the decoder reads back:
// identity, user mapping, open/transfer/close with read and readv counts,
// the g-stream record and the summary report.
func TestStreamsRoundTrip(t *testing.T) {
	for _, jsonHdr := range []bool{false, true} {
		t.Run(map[bool]string{false: "binary-gstream", true: "json-gstream"}[jsonHdr], func(t *testing.T) {
			addr, col := collect(t)
			dir := t.TempDir()
			data := strings.Repeat("x", 300000)
			if err := os.WriteFile(filepath.Join(dir, "f.root"), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
			o, err := posix.New(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer o.Close()
			be := backend.FromOrigin(o)
			m, err := New(Config{Summary: addr, FStream: addr, GStream: addr, Host: "cache.example", Port: 1094, Site: "T2_Test",
				SummaryInterval: 50 * time.Millisecond, FStreamFlush: 50 * time.Millisecond, GStreamFlush: 50 * time.Millisecond,
				XfrInterval: 10 * time.Millisecond, GStreamJSONHeader: jsonHdr,
				Stats: func() Figures {
					return Figures{Connections: 1, ConnectionsTotal: 3, BytesOut: 300000, Misses: 1, Ops: Ops{Open: 1, Read: 2, ReadV: 1}}
				}})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			ctx := context.Background()
			req := backend.Request{Path: "/f.root", Client: "127.0.0.1:40000", User: "alice", Protocol: "root",
				Auth: "ztn", ClientPID: 4242, ClientLogin: "xrd.cc=us&xrd.appname=my&app\n&xrd.rn=v5.5.3"}
			f, err := m.Wrap(be).Open(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 100000)
			if _, err := f.ReadAt(ctx, buf, 0); err != nil {
				t.Fatal(err)
			}
			eventually.True(t, func() bool { return len(col.Files()) == 1 && col.Files()[0].Xfrs > 0 }, "a transfer record")
			// One client vector read answered in two parts (the front end
			// calls ReadV per part): one readv of 2 segments and 1500 bytes.
			segs := []origin.Segment{{Offset: 100000, Buf: make([]byte, 1000)}, {Offset: 200000, Buf: make([]byte, 500)}}
			vr := &backend.VectorRead{}
			rv := f.(interface {
				ReadV(context.Context, []origin.Segment) error
			})
			for i := range segs {
				vr.Last = i == len(segs)-1
				if err := rv.ReadV(backend.WithVectorRead(ctx, vr), segs[i:i+1]); err != nil {
					t.Fatal(err)
				}
			}
			f.Close()
			m.Disconnected("root", "127.0.0.1:40000")
			now := time.Now()
			m.Access(cache.AccessRecord{Time: now, OpenTime: now.Add(-time.Second), Path: "/f.root", Origin: "root://origin.example:1094",
				Size: 300000, BytesHit: 1000, BytesMissed: 100500, BlockSize: 131072, BlocksDone: 2})

			eventually.True(t, func() bool {
				fs := col.Files()
				return len(fs) == 1 && fs[0].Closed && len(col.FileCloses()) == 1 && len(col.Summaries()) > 0 && len(col.Idents()) > 0 &&
					len(col.Disconnects()) == 1
			}, "every stream")
			if err := col.Err(); err != nil {
				t.Fatal(err)
			}
			fr := col.Files()[0]
			if fr.LFN != "/f.root" || fr.Size != 300000 || fr.Read != 100000 || fr.ReadV != 1500 {
				t.Errorf("file %+v", fr)
			}
			if o := fr.Ops; o == nil || o.Read != 1 || o.ReadV != 1 || o.RSegs != 2 || o.RdMax != 100000 || o.RvMin != 1500 || o.RsMax != 2 {
				t.Errorf("ops %+v", fr.Ops)
			}
			if u := fr.User; u.Prot != "xroot" || u.Name != "alice" || u.Host != "127.0.0.1" || u.SID != m.sidText || u.Pid != "4242" ||
				!strings.HasPrefix(u.Info, "&p=ztn&n=alice&h=127.0.0.1&") || !strings.HasSuffix(u.Info, "&R=v5.5.3&x=my&y=&I=4") {
				t.Errorf("user %+v", u)
			}
			if d := col.Disconnects()[0]; d != fr.User {
				t.Errorf("disconnect of %+v, want %+v", d, fr.User)
			}
			id := col.Idents()[0]
			if !strings.HasPrefix(id, "=/") || !strings.Contains(id, ":"+m.sidText+"@cache.example\n") || !strings.Contains(id, "&site=T2_Test&port=1094") {
				t.Errorf("ident %q", id)
			}
			gc := col.FileCloses()[0]
			if gc.LFN != "/f.root" || gc.Size != 300000 || gc.BlkSize != 131072 || gc.NBlks != 3 || gc.NBlksDone != 2 ||
				gc.BHit != 1000 || gc.BMiss != 100500 || gc.AccessCnt != 1 || gc.DetachT-gc.AttachT != 1 ||
				len(gc.Remotes) != 1 || gc.Remotes[0] != "origin.example:1094" {
				t.Errorf("g-stream %+v", gc)
			}
			s := col.Summaries()[0]
			for k, want := range map[string]string{"link.num": "1", "link.tot": "3", "link.out": "300000", "info.port": "1094",
				"cache.rd.miss": "1", "info.host": "cache.example", "xrootd.ops.open": "1", "xrootd.ops.rd": "2", "xrootd.ops.rv": "1",
				"xrootd.lgn.num": "0", "xrootd.dly": "0", "xrootd.rdr": "0"} {
				if s.Values[k] != want {
					t.Errorf("summary %s = %q, want %q", k, s.Values[k], want)
				}
			}
			if s.Types["cache"] != "pfc" || s.Attr["site"] != "T2_Test" || s.Attr["pgm"] != "xrootd" {
				t.Errorf("summary %+v", s)
			}
		})
	}
}

// TestSummaryReadByMpxstats: XRootD's own summary reader (mpxstats, from
// xrootd-server) reads hepcache's summary report.
func TestSummaryReadByMpxstats(t *testing.T) {
	bin := realclient.Require(t, "mpxstats")
	// mpxstats takes a port, not an address: find a free one.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := pc.LocalAddr().(*net.UDPAddr).Port
	pc.Close()
	cmd := exec.Command(bin, "-f", "flat", "-p", strconv.Itoa(port))
	var out syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	m, err := New(Config{Summary: "127.0.0.1:" + strconv.Itoa(port), SummaryInterval: 20 * time.Millisecond, Host: "cache.example", Port: 1094,
		Stats: func() Figures {
			return Figures{Connections: 2, ConnectionsTotal: 7, BytesOut: 12345, BytesHit: 10000, BytesMissed: 2345, Hits: 3, Misses: 1, Files: 4,
				Ops: Ops{Open: 4, Read: 9}}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	want := []string{"pgm xrootd", "info.host cache.example", "info.port 1094", "link.num 2", "link.tot 7", "link.out 12345",
		"cache.rd.out 12345", "cache.rd.hits 3", "cache.rd.miss 1", "cache.files.now 4", "xrootd.ops.open 4", "xrootd.ops.rd 9"}
	eventually.True(t, func() bool {
		got := out.String()
		for _, w := range want {
			if !strings.Contains(got, "\n"+w+"\n") {
				return false
			}
		}
		return true
	}, "mpxstats to print %q", want)
}
