package e2e

import (
	"bytes"
	"crypto/sha256"
	hexpkg "encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/realclient"
)

// pyCheckRead reads url through the Python bindings, whole with read() or
// as a vector read of 1 MiB chunks with vector_read(), and prints the
// sha256 of what it got (or the error).
const pyCheckRead = `
import sys, hashlib
from XRootD import client
from XRootD.client.flags import OpenFlags
url, how = sys.argv[1], sys.argv[2]
f = client.File()
st, _ = f.open(url, OpenFlags.READ)
assert st.ok, st.message
st, info = f.stat()
assert st.ok, st.message
if how == "read":
    st, data = f.read(0, info.size)
    assert st.ok, st.message
else:
    chunks = [(off, min(1 << 20, info.size - off)) for off in range(0, info.size, 1 << 20)]
    st, vr = f.vector_read(chunks)
    assert st.ok, st.message
    data = b"".join(c.buffer for c in vr.chunks)
f.close()
print(hashlib.sha256(data).hexdigest())
`

// TestCorruptedBlocksNeverServed: blocks of a cached file are corrupted on
// the disk of a running cache, through the page cache (as dd does) and
// with O_DIRECT behind it, and the file is read with every client: xrdcp
// with pgread and with plain reads, the Python bindings' read and
// vector_read, curl. Each gets the origin's bytes; each corrupted block is
// counted in hepcache_blocks_corrupt_total and fetched again. The cache's
// RAM holds 16 blocks of 64 KiB and the file has 129: after a read of the
// whole file only blocks near its end are in RAM, and the blocks corrupted
// (in its first half) are read from disk (a block in RAM is served from
// there: its bytes are right whatever happens to the disk).
func TestCorruptedBlocksNeverServed(t *testing.T) {
	data := t.TempDir()
	const size = 8<<20 + 777
	want := writeFile(t, data, "store/c/f.root", size, 71)
	s := startStack(t, data, func(c *config.Config) {
		withHTTP(c)
		c.Cache.BlockSize, c.Cache.PieceSize = 64<<10, 64<<10
		c.Cache.RAM = 1 << 20
		c.Cache.FetchMemory = 512 << 10
		c.Cache.Prefetch = 4
	})
	env := realclient.Env()
	py := realclient.Python(t, realclient.DebianPython, "XRootD.client")
	if got := xrdcpSum(t, env, s.url+"//store/c/f.root"); got != want {
		t.Fatalf("cold read: %s", hex(got))
	}
	s.originBytes()
	dataFile := cache.DataPath(s.cfg.Cache.Dir, cache.Key{Origin: s.cfg.Origin.Default, Path: "/store/c/f.root"})
	original, err := os.ReadFile(dataFile)
	if err != nil || !bytes.Equal(original, mustRead(t, filepath.Join(data, "store/c/f.root"))) {
		t.Fatalf("data file %s: %v", dataFile, err)
	}

	clients := []struct {
		name string
		read func() [32]byte
	}{
		{"xrdcp-pgread", func() [32]byte { return xrdcpSum(t, env, s.url+"//store/c/f.root") }},
		{"xrdcp-plain", func() [32]byte {
			return xrdcpSum(t, append(env, "XRD_CPUSEPGWRTRD=0"), s.url+"//store/c/f.root")
		}},
		{"python-read", func() [32]byte { return pySum(t, env, py, s.url+"//store/c/f.root", "read") }},
		{"python-readv", func() [32]byte { return pySum(t, env, py, s.url+"//store/c/f.root", "readv") }},
		{"curl", func() [32]byte { return curlSum(t, s.httpURL()+"/store/c/f.root") }},
	}
	corrupt := 0.0
	for i, cl := range clients {
		for _, direct := range []bool{false, true} {
			block := int64(1 + 2*i + map[bool]int{false: 0, true: 1}[direct])
			off := block<<16 + 4096*int64(i+1)
			if direct {
				writeDirect(t, dataFile, off, original[off:off+4096])
			} else {
				f, err := os.OpenFile(dataFile, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				f.WriteAt([]byte("fourteen bytes"), off+100)
				f.Close()
			}
			if got := cl.read(); got != want {
				t.Fatalf("%s after corrupting block %d (direct %v): sha256 %s, want %s", cl.name, block, direct, hex(got), hex(want))
			}
			s.originBytes()
			corrupt++
			if n := s.scrape(t)["hepcache_blocks_corrupt_total"]; n != corrupt {
				t.Fatalf("%s: hepcache_blocks_corrupt_total %v, want %v", cl.name, n, corrupt)
			}
		}
	}
	// The bad blocks were fetched again: the data file is the origin's.
	now, _ := os.ReadFile(dataFile)
	if sha256.Sum256(now) != want {
		t.Fatal("the data file still differs from the origin's after the refetches")
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeDirect writes a corrupted copy of page (4 KiB, the bytes at off) at
// off with O_DIRECT, behind the page cache.
func writeDirect(t *testing.T, name string, off int64, page []byte) {
	t.Helper()
	buf := make([]byte, 8192)
	a := int(uintptr(unsafe.Pointer(&buf[0])) % 4096)
	if a != 0 {
		a = 4096 - a
	}
	b := buf[a : a+4096]
	copy(b, page)
	b[1234] ^= 0x5a
	f, err := os.OpenFile(name, os.O_RDWR|syscall.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func pySum(t *testing.T, env []string, py, url, how string) [32]byte {
	t.Helper()
	r := realclient.MustRunPython(t, env, py, pyCheckRead, url, how)
	var out [32]byte
	b, err := hexpkg.DecodeString(strings.TrimSpace(string(r.Stdout)))
	if err != nil || len(b) != len(out) {
		t.Fatalf("python: %q", r.Stdout)
	}
	copy(out[:], b)
	return out
}
