package xrootd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/realclient"
)

// pyBindings exercises the XRootD Python bindings and prints one JSON
// object with what it saw. Data is compared through sha256 digests.
const pyBindings = `
import hashlib, json, sys
from XRootD import client
from XRootD.client.flags import OpenFlags, DirListFlags, QueryCode, StatInfoFlags
url, path = sys.argv[1], sys.argv[2]
out = {}
def check(name, st):
    if not st.ok:
        raise SystemExit(name + ": " + st.message)
f = client.File()
check("open", f.open(url + "/" + path, OpenFlags.READ)[0])
st, info = f.stat(); check("stat", st)
out["size"] = info.size
st, data = f.read(); check("read", st)
out["sha"] = hashlib.sha256(data).hexdigest()
st, data = f.read(1000, 5000); check("read part", st)
out["part"] = hashlib.sha256(data).hexdigest()
st, data = f.read(info.size - 10, 100); check("read over the end", st)
out["tail"] = len(data)
segs = [(0, 10), (77777, 1), (4096, 8192), (info.size - 100, 100), (123, 0)]
st, vr = f.vector_read(segs); check("vector_read", st)
out["vr"] = [[c.offset, c.length, hashlib.sha256(c.buffer).hexdigest()] for c in vr.chunks]
many = [(i * 997, 113) for i in range(1000)]
st, vr = f.vector_read(many); check("vector_read 1000", st)
out["vr1000"] = hashlib.sha256(b"".join(c.buffer for c in vr.chunks)).hexdigest()
st, _ = f.vector_read([(info.size - 5, 10)])
out["vr_past_end"] = st.ok
check("close", f.close()[0])
fs = client.FileSystem(url)
st, dl = fs.dirlist("/dir", DirListFlags.STAT); check("dirlist", st)
out["ls"] = sorted([e.name, e.statinfo.size, bool(e.statinfo.flags & StatInfoFlags.IS_DIR)] for e in dl)
st, dl = fs.dirlist("/dir"); check("dirlist plain", st)
out["ls_plain"] = sorted(e.name for e in dl)
st, info = fs.stat(path); check("fs stat", st)
out["fs_size"] = info.size
st, r = fs.query(QueryCode.CONFIG, "readv_iov_max readv_ior_max"); check("query config", st)
out["config"] = r.decode()
st, r = fs.query(QueryCode.CHECKSUM, path); check("query checksum", st)
out["cksum"] = r.decode().rstrip("\x00")
st, _ = fs.stat("/nope")
out["missing"] = [st.ok, st.errno, st.code]
print(json.dumps(out))
`

func TestPythonBindings(t *testing.T) {
	ts := startServer(t, "", nil)
	const size = 3_000_001
	writeRandom(t, ts.dir, "data/f.bin", size)
	data, _ := os.ReadFile(filepath.Join(ts.dir, "data/f.bin"))
	writeRandom(t, ts.dir, "dir/a", 10)
	writeRandom(t, ts.dir, "dir/b", 20)
	os.Mkdir(filepath.Join(ts.dir, "dir/c"), 0o755)

	sha := func(b []byte) string { return sha256hex(b) }
	var many []byte
	for i := 0; i < 1000; i++ {
		many = append(many, data[i*997:i*997+113]...)
	}
	for _, py := range []struct{ name, bin string }{
		{"debian 5.5", realclient.DebianPython},
		{"venv", realclient.VenvPython()},
	} {
		t.Run(py.name, func(t *testing.T) {
			python := realclient.Python(t, py.bin, "XRootD.client")
			r := realclient.MustRunPython(t, realclient.Env(), python, pyBindings, ts.url, "/data/f.bin")
			var got struct {
				Size, Tail        int
				FsSize            int `json:"fs_size"`
				Sha, Part, Vr1000 string
				Vr                [][]any
				VrPastEnd         bool `json:"vr_past_end"`
				Ls                [][]any
				LsPlain           []string `json:"ls_plain"`
				Config, Cksum     string
				Missing           []any
			}
			if err := json.Unmarshal(bytes.TrimSpace(r.Stdout), &got); err != nil {
				t.Fatalf("%v: %v", err, r)
			}
			if got.Size != size || got.FsSize != size || got.Sha != sha(data) || got.Part != sha(data[1000:6000]) || got.Tail != 10 {
				t.Fatalf("size/read results %+v", got)
			}
			wantVR := [][]any{
				{0.0, 10.0, sha(data[:10])},
				{77777.0, 1.0, sha(data[77777:77778])},
				{4096.0, 8192.0, sha(data[4096:12288])},
				{float64(size - 100), 100.0, sha(data[size-100:])},
				{123.0, 0.0, sha(nil)},
			}
			if fmt.Sprint(got.Vr) != fmt.Sprint(wantVR) || got.Vr1000 != sha(many) {
				t.Fatalf("vector_read %v, want %v", got.Vr, wantVR)
			}
			if got.VrPastEnd {
				t.Fatal("vector_read past the end of the file succeeded")
			}
			if fmt.Sprint(got.Ls) != "[[a 10 false] [b 20 false] [c 4096 true]]" && !strings.HasPrefix(fmt.Sprint(got.Ls), "[[a 10 false] [b 20 false] [c ") {
				t.Fatalf("dirlist %v", got.Ls)
			}
			if strings.Join(got.LsPlain, " ") != "a b c" {
				t.Fatalf("plain dirlist %v", got.LsPlain)
			}
			if got.Config != "1024\n2097136\n" || !strings.HasPrefix(got.Cksum, "adler32 ") {
				t.Fatalf("query answers %q %q", got.Config, got.Cksum)
			}
			if fmt.Sprint(got.Missing) != "[false 3011 400]" && fmt.Sprint(got.Missing) != "[false 3011 400.0]" {
				// errno 3011 is kXR_NotFound; code 400 is errErrorResponse.
				t.Fatalf("stat of a missing file: %v", got.Missing)
			}
		})
	}
}

// pyUproot writes a ROOT file with a TTree (with uproot) when asked, or
// reads it back through root:// with uproot's fsspec (fsspec-xrootd)
// handler and prints sums of its branches.
const pyUproot = `
import json, sys
import numpy as np
import uproot
mode, target = sys.argv[1], sys.argv[2]
if mode == "write":
    n = 200000
    with uproot.recreate(target) as f:
        f["events"] = {"px": np.arange(n, dtype=np.float64) * 0.5,
                       "nhits": (np.arange(n) % 17).astype(np.int32)}
    sys.exit(0)
with uproot.open(target, handler=uproot.source.fsspec.FSSpecSource) as f:
    t = f["events"]
    arrs = t.arrays(["px", "nhits"], library="np")
    part = t.arrays(["nhits"], entry_start=1000, entry_stop=1500, library="np")
    print(json.dumps({"entries": int(t.num_entries), "px": float(arrs["px"].sum()),
                      "nhits": int(arrs["nhits"].sum()), "part": int(part["nhits"].sum())}))
`

func TestUproot(t *testing.T) {
	python := realclient.Python(t, realclient.VenvPython(), "uproot", "fsspec_xrootd", "numpy")
	ts := startServer(t, "", nil)
	local := filepath.Join(ts.dir, "events.root")
	realclient.MustRunPython(t, realclient.Env(), python, pyUproot, "write", local)
	r := realclient.MustRunPython(t, realclient.Env(), python, pyUproot, "read", ts.url+"//events.root")
	var got struct {
		Entries, Nhits, Part int
		Px                   float64
	}
	if err := json.Unmarshal(bytes.TrimSpace(r.Stdout), &got); err != nil {
		t.Fatalf("%v: %v", err, r)
	}
	const n = 200000
	nhits, part := 0, 0
	for i := 0; i < n; i++ {
		nhits += i % 17
		if i >= 1000 && i < 1500 {
			part += i % 17
		}
	}
	if got.Entries != n || got.Px != 0.5*float64(n)*float64(n-1)/2 || got.Nhits != nhits || got.Part != part {
		t.Fatalf("uproot read %+v, want entries %d nhits %d part %d", got, n, nhits, part)
	}
	if len(ts.rec.requests()) == 0 {
		t.Fatal("the backend saw no request")
	}
}
