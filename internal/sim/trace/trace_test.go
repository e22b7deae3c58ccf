package trace

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func mustRead(t *testing.T, in string, opt Options) *Trace {
	t.Helper()
	tr, err := Read(strings.NewReader(in), opt)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return tr
}

func TestReadHepcacheLog(t *testing.T) {
	// Lines as the server writes them (docs/access-log.md), out of order, with an
	// unknown field, an escaped path and a record without bytes_read.
	in := `{"time":"2026-11-21T23:59:01.5Z","open_time":"2026-11-21T23:58:59Z","path":"/store/a.root","origin":"root://o:1094","size":2000,"bytes_read":100,"new_field":{"x":[1,2]},"status":"ok"}
{"time":"2026-11-21T23:58:00Z","open_time":"2026-11-21T23:59:30Z","path":"/store/b\u00e9\".root","origin":"root://o:1094","size":3000,"bytes_read":0}

{"time":"2026-11-21T23:59:02Z","open_time":"2026-11-21T23:50:00Z","path":"/store/a.root","origin":"root://o:1094","size":2000,"bytes_read":2000}
{"time":"2026-11-21T23:59:03Z","path":"/store/a.root","origin":"root://other:1094","size":2000}
`
	tr := mustRead(t, in, Options{})
	if tr.Info.Format != FormatHepcache || tr.Len() != 4 || tr.NumFiles() != 3 || tr.Info.Skipped != 1 {
		t.Fatalf("info %+v, len %d, files %d", tr.Info, tr.Len(), tr.NumFiles())
	}
	if got, want := tr.Name[tr.File[0]], "root://o:1094//store/bé\".root"; got != want {
		t.Errorf("first access (sorted by close time) is %q, want %q", got, want)
	}
	if tr.Bytes[0] != 3000 {
		t.Errorf("bytes_read 0 must mean the whole file, got %d", tr.Bytes[0])
	}
	if tr.File[1] != tr.File[2] || tr.File[3] == tr.File[1] {
		t.Errorf("file identity is origin+path: ids %v", tr.File)
	}
	want := time.Date(2026, 11, 21, 23, 59, 1, 5e8, time.UTC).UnixNano()
	if tr.Time[1] != want {
		t.Errorf("time = %d, want %d", tr.Time[1], want)
	}

	// Ordered by open time, the record without open_time is bad (1 of 4 > 1 %).
	_, err := Read(strings.NewReader(in), Options{OrderByOpen: true})
	if !errors.Is(err, ErrTooManyBad) || !strings.Contains(err.Error(), "line 5: missing open_time") {
		t.Fatalf("order by open: err = %v", err)
	}
	tr = mustRead(t, in, Options{OrderByOpen: true, MaxBadFraction: 0.5})
	if tr.Name[tr.File[0]] != "root://o:1094//store/a.root" || tr.Info.Bad != 1 {
		t.Errorf("by open: first %q, info %+v", tr.Name[tr.File[0]], tr.Info)
	}
}

func TestReadBadLines(t *testing.T) {
	good := `{"time":"2026-01-01T00:00:00Z","path":"/f","size":10,"bytes_read":5}` + "\n"
	tests := []struct {
		name   string
		line   string
		reason string
	}{
		{"not json", "hello", "malformed JSON"},
		{"truncated", `{"time":"2026-01-01T00:00:00Z","path":"/f","si`, "malformed JSON"},
		{"missing path", `{"time":"2026-01-01T00:00:00Z","size":10}`, "missing path"},
		{"missing size", `{"time":"2026-01-01T00:00:00Z","path":"/f"}`, "missing size"},
		{"negative size", `{"time":"2026-01-01T00:00:00Z","path":"/f","size":-3}`, "negative"},
		{"bad time", `{"time":"yesterday","path":"/f","size":3}`, "bad time"},
		{"string size", `{"time":"2026-01-01T00:00:00Z","path":"/f","size":"3"}`, "not a number"},
		{"trailing", `{"time":"2026-01-01T00:00:00Z","path":"/f","size":3} x`, "trailing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := strings.Repeat(good, 3) + tc.line + "\n" + strings.Repeat(good, 6)
			tr, err := Read(strings.NewReader(in), Options{Format: FormatHepcache, MaxBadFraction: 0.2})
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if tr.Info.Bad != 1 || tr.Len() != 9 || len(tr.Info.BadLines) != 1 {
				t.Fatalf("info = %+v", tr.Info)
			}
			bl := tr.Info.BadLines[0]
			if bl.Line != 4 || !strings.Contains(bl.Reason, tc.reason) {
				t.Fatalf("bad line = %+v, want line 4 with %q", bl, tc.reason)
			}
			// At 1 bad of 10 the default limit (1 %) fails the read and names the line.
			_, err = Read(strings.NewReader(in), Options{Format: FormatHepcache})
			if !errors.Is(err, ErrTooManyBad) || !strings.Contains(err.Error(), "line 4") {
				t.Fatalf("default limit: err = %v", err)
			}
		})
	}
}

func TestReadCSV(t *testing.T) {
	in := `# generated
when,lfn,bytes,len
1700000100,/store/x.root,5000000000,
1700000000.5,"/store/with,comma.root",1000,200
2023-11-14T22:15:00Z,/store/x.root,5000000000,42
1700000200,/store/x.root,notanumber,1
1700000300,/store/y.root
`
	opt := Options{CSV: CSVColumns{Time: "when", Path: "lfn", Size: "bytes", BytesRead: "len"}, MaxBadFraction: 0.5}
	tr := mustRead(t, in, opt)
	if tr.Info.Format != FormatCSV || tr.Len() != 3 || tr.Info.Bad != 2 {
		t.Fatalf("info %+v len %d", tr.Info, tr.Len())
	}
	if tr.Info.BadLines[0].Line != 6 || tr.Info.BadLines[1].Line != 7 {
		t.Errorf("bad lines %+v", tr.Info.BadLines)
	}
	if tr.Name[tr.File[0]] != "/store/with,comma.root" || tr.Time[0] != 1700000000_500000000 {
		t.Errorf("first access %q at %d", tr.Name[tr.File[0]], tr.Time[0])
	}
	if tr.Bytes[1] != 5000000000 || tr.Bytes[2] != 42 {
		t.Errorf("bytes %v: empty bytes_read must mean the whole file", tr.Bytes)
	}

	_, err := Read(strings.NewReader("a,b,c\n1,2,3\n"), Options{Format: FormatCSV})
	if err == nil || !strings.Contains(err.Error(), "lacks column") {
		t.Fatalf("missing header columns: err = %v", err)
	}
}

func TestReadGStream(t *testing.T) {
	// Records in the layout XrdPfc.cc (v5.6.9) prints, plus another event type.
	rec := func(lfn string, attach, detach, hit, miss, bypass int64) string {
		return `{"event":"file_close","lfn":"` + lfn + `","size":4000,"blk_size":1048576,"n_blks":1,"n_blks_done":1,` +
			`"access_cnt":2,"attach_t":` + itoa(attach) + `,"detach_t":` + itoa(detach) + `,"remotes":["root://a:1094/"],` +
			`"b_hit":` + itoa(hit) + `,"b_miss":` + itoa(miss) + `,"b_bypass":` + itoa(bypass) + `,"n_cks_errs":0}`
	}
	in := rec("/store/a", 100, 300, 10, 20, 30) + "\n" +
		`{"event":"cache_purge","n_files":3}` + "\n" +
		rec("/store/b", 150, 200, 0, 0, 0) + "\n"
	tr := mustRead(t, in, Options{})
	if tr.Info.Format != FormatGStream || tr.Len() != 2 || tr.Info.Skipped != 1 {
		t.Fatalf("info %+v", tr.Info)
	}
	if tr.Name[tr.File[0]] != "/store/b" || tr.Bytes[0] != 4000 || tr.Bytes[1] != 60 {
		t.Errorf("by detach: %q bytes %v", tr.Name[tr.File[0]], tr.Bytes)
	}
	tr = mustRead(t, in, Options{OrderByOpen: true})
	if tr.Name[tr.File[0]] != "/store/a" || tr.Time[0] != 100e9 {
		t.Errorf("by attach: %q at %d", tr.Name[tr.File[0]], tr.Time[0])
	}
}

func itoa(v int64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestGzipAndCSVRoundTrip(t *testing.T) {
	b := NewBuilder()
	b.Add([]byte("/a"), 3e9, 100, 50)
	b.Add([]byte("/b,c"), 1e9, 70, 70)
	b.Add([]byte("/a"), 2e9, 100, 100)
	tr := b.Finish()
	var csvBuf bytes.Buffer
	if err := WriteCSV(&csvBuf, tr); err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(csvBuf.Bytes())
	zw.Close()
	got, err := Read(&gz, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Len() != 3 || got.NumFiles() != 2 {
		t.Fatalf("round trip: %d accesses %d files", got.Len(), got.NumFiles())
	}
	for i := range tr.File {
		if got.Time[i] != tr.Time[i] || got.Bytes[i] != tr.Bytes[i] || got.Name[got.File[i]] != tr.Name[tr.File[i]] {
			t.Errorf("access %d differs", i)
		}
	}
}

func TestBuilderSortsAndSizeConflicts(t *testing.T) {
	b := NewBuilder()
	b.Add([]byte("/a"), 30, 100, 1)
	b.Add([]byte("/b"), 10, 5, 2)
	b.Add([]byte("/c"), 10, 5, 3)
	if !b.Add([]byte("/a"), 20, 120, 4) {
		t.Error("size change not reported")
	}
	tr := b.Finish()
	if want := []int64{2, 3, 4, 1}; !equal(tr.Bytes, want) {
		t.Errorf("bytes after stable sort = %v, want %v", tr.Bytes, want)
	}
	if tr.Size[0] != 120 {
		t.Errorf("size = %d, want the largest, 120", tr.Size[0])
	}
	if next := tr.NextUse(); next[2] != 3 || next[3] != 4 || next[0] != 4 {
		t.Errorf("NextUse = %v", next)
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSampler(t *testing.T) {
	b := NewBuilder()
	for i := range 20000 {
		b.Add([]byte("/f"+itoa(int64(i%5000))), int64(i), 1, 1)
	}
	tr := b.Finish()
	s1, _ := NewSampler(0.1, 1)
	s2, _ := NewSampler(0.1, 2)
	a, c := Sample(tr, s1), Sample(tr, s2)
	for _, smp := range []*Trace{a, c} {
		if n := smp.NumFiles(); n < 400 || n > 600 {
			t.Errorf("sample kept %d of 5000 files at rate 0.1", n)
		}
		if smp.Len() != 4*smp.NumFiles() {
			t.Errorf("a sampled file keeps all its accesses: %d accesses, %d files", smp.Len(), smp.NumFiles())
		}
	}
	inA := map[string]bool{}
	for _, n := range a.Name {
		inA[n] = true
	}
	both := 0
	for _, n := range c.Name {
		if inA[n] {
			both++
		}
	}
	if both > c.NumFiles()/4 { // independent samples share about 10 %
		t.Errorf("samples with different seeds share %d of %d files", both, c.NumFiles())
	}
	if _, err := NewSampler(0, 1); err == nil {
		t.Error("rate 0 accepted")
	}
}

// TestReadGStreamPackets: a collector storing the UDP payloads of
// `xrootd.mongstream pfc use send json dflthdr` gets a header line per packet
// and a NUL at each packet's end.
func TestReadGStreamPackets(t *testing.T) {
	hdr := `{"code":"g","pseq":1,"stod":1700000000,"sid":123,"gs":{"type":"P","tbeg":1700000100,"tend":1700000200}}`
	r1 := `{"event":"file_close","lfn":"/a","size":10,"blk_size":1048576,"n_blks":1,"n_blks_done":1,"access_cnt":1,"attach_t":1700000100,"detach_t":1700000101,"remotes":["127.0.0.1:1094"],"b_hit":0,"b_miss":10,"b_bypass":0,"n_cks_errs":0}`
	r2 := `{"event":"file_close","lfn":"/a","size":10,"blk_size":1048576,"n_blks":1,"n_blks_done":1,"access_cnt":2,"attach_t":1700000150,"detach_t":1700000151,"remotes":[],"b_hit":10,"b_miss":0,"b_bypass":0,"n_cks_errs":0}`
	ident := `{"code":"=","pseq":1,"stod":1700000000,"sid":123,"src":{"site":"x"}}`
	in := hdr + "\n" + r1 + "\x00" + ident + "\x00" + hdr + "\n" + r2 + "\x00\n"
	tr := mustRead(t, in, Options{})
	if tr.Info.Format != FormatGStream || tr.Len() != 2 || tr.Info.Bad != 0 || tr.Info.Skipped != 3 {
		t.Fatalf("info %+v", tr.Info)
	}
	if tr.NumFiles() != 1 || tr.Bytes[1] != 10 {
		t.Errorf("files %d bytes %v", tr.NumFiles(), tr.Bytes)
	}
}

// TestReadFileSampledHeavy: the first pass finds the most read file, which
// every sample keeps whole with weight 1; other files carry weight M.
func TestReadFileSampledHeavy(t *testing.T) {
	var sb strings.Builder
	sb.WriteString("time,path,size\n")
	for i := range 20000 {
		path := "/hot"
		if i%4 != 0 {
			path = "/f" + itoa(int64(i))
		}
		sb.WriteString(itoa(int64(1700000000+i)) + "," + path + ",100\n")
	}
	path := t.TempDir() + "/t.csv"
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	trs, err := ReadFileSampled(path, Options{}, 0.1, []uint64{1, 2, 3}, 0.3)
	if err != nil {
		t.Fatal(err)
	}
	for i, tr := range trs {
		hot := slices.Index(tr.Name, "/hot")
		if hot < 0 || tr.Weight[hot] != 1 || tr.Scale != 10 {
			t.Fatalf("sample %d: /hot at %d, scale %d", i, hot, tr.Scale)
		}
		acc, files := tr.Estimated()
		if acc < 15000 || acc > 25000 || files < 10000 || files > 20000 {
			t.Errorf("sample %d estimates %d accesses of %d files, want about 20000 of 15001", i, acc, files)
		}
		for id, w := range tr.Weight {
			if id != hot && w != 10 {
				t.Fatalf("sample %d: %s has weight %d", i, tr.Name[id], w)
			}
		}
	}
	// Without the heavy stratum /hot is in a sample only by chance.
	trs, _ = ReadFileSampled(path, Options{}, 0.1, []uint64{1, 2, 3, 4, 5, 6, 7, 8}, 0)
	n := 0
	for _, tr := range trs {
		if slices.Contains(tr.Name, "/hot") {
			n++
		}
	}
	if n == 8 {
		t.Error("/hot in every uniform sample")
	}
}
