package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"time"
)

// The soak's clients: each operation is one run of a real client (xrdcp,
// the XRootD Python bindings, curl) whose output the soak compares with
// the origin's bytes.

// soakKinds are the client operations, each equally likely.
var soakKinds = []string{"xrdcp-pgread", "xrdcp-read", "py-range", "py-readv", "curl-full", "curl-range"}

// soakPy reads a range ("range OFF LEN") or a vector of ranges ("readv
// OFF:LEN,...") with the Python bindings and writes the bytes to stdout.
const soakPy = `
import sys
from XRootD import client
from XRootD.client.flags import OpenFlags
url, mode = sys.argv[1], sys.argv[2]
f = client.File()
st, _ = f.open(url, OpenFlags.READ)
if not st.ok:
    sys.exit("open: " + st.message)
out = sys.stdout.buffer
if mode == "range":
    st, data = f.read(int(sys.argv[3]), int(sys.argv[4]))
    if not st.ok:
        sys.exit("read: " + st.message)
    out.write(data)
else:
    chunks = [tuple(int(x) for x in c.split(":")) for c in sys.argv[3].split(",")]
    st, vr = f.vector_read(chunks)
    if not st.ok:
        sys.exit("readv: " + st.message)
    for c in vr.chunks:
        out.write(c.buffer)
f.close()
`

// soakFile is one origin file: its path under the origin and where its
// bytes are on this machine.
type soakFile struct {
	path  string
	local string
	size  int64
}

// soakOp is one planned client operation.
type soakOp struct {
	kind string
	file soakFile
	// ranges are the (offset, length) pieces the client reads, in order;
	// one covering the file for full reads.
	ranges [][2]int64
	// cancelAfter > 0 kills the client that long after its start.
	cancelAfter time.Duration
}

// Outcomes of an operation.
const (
	outOK        = "ok"
	outError     = "error"
	outCancelled = "cancelled"
	outStuck     = "stuck"
	outWrong     = "wrong"
)

// soakResult is what one operation came to.
type soakResult struct {
	outcome string
	bytes   int64         // bytes verified
	detail  string        // the error's first line, or what was wrong
	dur     time.Duration // from the client's start to its end
}

// planOp draws an operation on a random file.
func planOp(r *rand.Rand, files []soakFile, cancelShare float64) soakOp {
	op := soakOp{kind: soakKinds[r.IntN(len(soakKinds))], file: files[r.IntN(len(files))]}
	size := op.file.size
	switch op.kind {
	case "py-range", "curl-range":
		off := r.Int64N(size)
		op.ranges = [][2]int64{{off, 1 + r.Int64N(min(size-off, 8<<20))}}
	case "py-readv":
		for range 1 + r.IntN(16) {
			n := 1 + r.Int64N(min(size, 256<<10))
			op.ranges = append(op.ranges, [2]int64{r.Int64N(size - n + 1), n})
		}
	default:
		op.ranges = [][2]int64{{0, size}}
	}
	if r.Float64() < cancelShare {
		op.cancelAfter = time.Duration(5+r.IntN(300)) * time.Millisecond
	}
	return op
}

// soakEndpoints are where the clients read from.
type soakEndpoints struct {
	root, http string // "root://host:port", "http://host:port"
	python     string // the interpreter with the XRootD bindings
	script     string // soakPy's file
}

// runOp runs op with a real client, at most timeout (then it is stuck),
// and checks every byte it returned against the origin's.
func runOp(ctx context.Context, ep soakEndpoints, op soakOp, timeout time.Duration) soakResult {
	start := time.Now()
	r := runOpOnce(ctx, ep, op, timeout)
	r.dur = time.Since(start)
	return r
}

func runOpOnce(ctx context.Context, ep soakEndpoints, op soakOp, timeout time.Duration) soakResult {
	url := ep.root + "/" + op.file.path
	var name string
	var args, env []string
	switch op.kind {
	case "xrdcp-pgread", "xrdcp-read":
		name, args = "xrdcp", []string{"-f", "-s", url, "-"}
		if op.kind == "xrdcp-read" {
			env = append(env, "XRD_CPUSEPGWRTRD=0") // plain kXR_read, as ROOT and uproot
		}
	case "py-range":
		name, args = ep.python, []string{ep.script, url, "range", fmt.Sprint(op.ranges[0][0]), fmt.Sprint(op.ranges[0][1])}
	case "py-readv":
		var segs []string
		for _, rg := range op.ranges {
			segs = append(segs, fmt.Sprintf("%d:%d", rg[0], rg[1]))
		}
		name, args = ep.python, []string{ep.script, url, "readv", strings.Join(segs, ",")}
	case "curl-full":
		name, args = "curl", []string{"-sS", "--fail", ep.http + op.file.path}
	case "curl-range":
		rg := op.ranges[0]
		name, args = "curl", []string{"-sS", "--fail", "-r", fmt.Sprintf("%d-%d", rg[0], rg[0]+rg[1]-1), ep.http + op.file.path}
	default:
		return soakResult{outcome: outError, detail: "unknown client " + op.kind}
	}
	octx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(octx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	var killed atomic.Bool
	if op.cancelAfter > 0 {
		t := time.AfterFunc(op.cancelAfter, func() {
			killed.Store(true)
			cancel()
		})
		defer t.Stop()
	}
	err := cmd.Run()
	switch {
	case err != nil && killed.Load():
		return soakResult{outcome: outCancelled}
	case ctx.Err() != nil:
		return soakResult{outcome: outCancelled} // the soak is ending
	case errors.Is(octx.Err(), context.DeadlineExceeded):
		return soakResult{outcome: outStuck, detail: fmt.Sprintf("%s %s: no answer within %v", name, strings.Join(args, " "), timeout)}
	case err != nil:
		return soakResult{outcome: outError, detail: firstLine(errb.String(), err)}
	}
	return verifyRanges(op, out.Bytes())
}

// verifyRanges compares got with the origin file's bytes of op's ranges.
func verifyRanges(op soakOp, got []byte) soakResult {
	f, err := os.Open(op.file.local)
	if err != nil {
		return soakResult{outcome: outError, detail: "origin file: " + err.Error()}
	}
	defer f.Close()
	var want int64
	for _, rg := range op.ranges {
		want += rg[1]
	}
	if int64(len(got)) != want {
		return soakResult{outcome: outWrong, detail: fmt.Sprintf("%s %s: %d bytes, want %d", op.kind, op.file.path, len(got), want)}
	}
	buf := make([]byte, 0, 1<<20)
	pos := 0
	for _, rg := range op.ranges {
		for off, left := rg[0], rg[1]; left > 0; {
			n := min(left, int64(cap(buf)))
			b := buf[:n]
			if _, err := f.ReadAt(b, off); err != nil {
				return soakResult{outcome: outError, detail: "origin file: " + err.Error()}
			}
			if i := mismatch(b, got[pos:pos+int(n)]); i >= 0 {
				return soakResult{outcome: outWrong, detail: fmt.Sprintf("%s %s: wrong byte at offset %d", op.kind, op.file.path, off+int64(i))}
			}
			off, left, pos = off+n, left-n, pos+int(n)
		}
	}
	return soakResult{outcome: outOK, bytes: want}
}

// mismatch returns the index of the first byte where a and b differ, -1.
func mismatch(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return len(a)
}

// firstLine is the first non-empty line of a client's stderr, else err.
func firstLine(stderr string, err error) string {
	for _, l := range strings.Split(stderr, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			if len(l) > 160 {
				l = l[:160] + "..."
			}
			return l
		}
	}
	return err.Error()
}
