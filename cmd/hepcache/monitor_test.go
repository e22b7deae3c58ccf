package main

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/internal/monitor/decode"
	"github.com/hepcache/hepcache/internal/realclient"
)

// TestSimReplaysOwnGStream: `hepcache serve --monitor` sends its streams
// to a UDP collector: the f-stream names every read of xrdcp (root://) and
// curl (http://) with its user session; the g-stream payloads, stored as
// received (like socat), are a trace `hepcache sim` replays: one access per
// client read, with the file sizes the cache saw.
func TestSimReplaysOwnGStream(t *testing.T) {
	if testing.Short() {
		t.Skip("runs hepcache serve and xrdcp")
	}
	xrdcp := realclient.Require(t, "xrdcp")
	curl := realclient.Require(t, "curl")
	bin := hepcacheBin(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	os.MkdirAll(data, 0o755)
	sizes := map[string]int{"a.root": 2<<20 + 5, "b.root": 300000}
	for name, n := range sizes {
		if err := os.WriteFile(filepath.Join(data, name), bytes.Repeat([]byte{'z'}, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	var mu sync.Mutex // protects packets
	var packets [][]byte
	go func() {
		buf := make([]byte, 1<<16)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			mu.Lock()
			packets = append(packets, bytes.Clone(buf[:n]))
			mu.Unlock()
		}
	}()

	// The JSON header keeps a capture of raw payloads line-oriented (the
	// binary header is for collectors that decode packets).
	cfgPath := filepath.Join(dir, "hepcache.toml")
	if err := os.WriteFile(cfgPath, []byte(`[monitor]
gstream_header = "json"
gstream_flush = "1s"
fstream_flush = "1s"
summary_interval = "1s"
`), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	hln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	haddr := hln.Addr().String()
	hln.Close()
	srv := exec.Command(bin, "serve", "--config", cfgPath, "--origin", "file://"+data, "--cache-dir", filepath.Join(dir, "cache"),
		"--listen", addr, "--http-listen", haddr, "--monitor", pc.LocalAddr().String())
	var slog bytes.Buffer
	srv.Stdout, srv.Stderr = &slog, &slog
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		srv.Process.Signal(os.Interrupt)
		srv.Wait()
		if t.Failed() {
			t.Logf("hepcache serve:\n%s", slog.String())
		}
	}()
	eventually.NoError(t, func() error {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err
	}, "hepcache listening on %s", addr)

	reads := []string{"a.root", "b.root", "a.root"}
	for i, name := range reads {
		cmd := exec.Command(xrdcp, "-f", "-s", "root://"+addr+"//"+name, "/dev/null")
		if i == 1 {
			cmd = exec.Command(curl, "-sS", "--fail", "-o", "/dev/null", "http://"+haddr+"/"+name)
		}
		cmd.Env = realclient.Env()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", cmd.Args[0], name, err, out)
		}
	}
	// The collector gets every stream; the g-stream's payloads (they
	// start with its JSON header) are stored back to back as received,
	// as a collector filing the streams apart would.
	var gs []byte
	eventually.True(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		gs = gs[:0]
		for _, p := range packets {
			if bytes.HasPrefix(p, []byte(`{"code":"g"`)) {
				gs = append(gs, p...)
			}
		}
		return bytes.Count(gs, []byte(`"file_close"`)) == len(reads)
	}, "%d file_close records on the g-stream", len(reads))
	// The f-stream and the summary flush on their own timers.
	var col *decode.Collector
	eventually.True(t, func() bool {
		col = decode.NewCollector()
		mu.Lock()
		for _, p := range packets {
			col.Add(p)
		}
		mu.Unlock()
		closed := 0
		for _, f := range col.Files() {
			if f.Closed {
				closed++
			}
		}
		return closed == len(reads) && len(col.Summaries()) > 0 && len(col.Idents()) > 0
	}, "the f-stream's close records and a summary")
	if err := col.Err(); err != nil {
		t.Error(err)
	}
	// The records name the version `hepcache version` prints, not the
	// module's pseudo-version (v0.0.0-2026...).
	vout, _, _ := hepcache(t, bin, "version")
	if f := strings.Fields(vout); len(f) < 2 || col.Summaries()[0].Attr["ver"] != f[1] {
		t.Errorf("summary ver=%q; hepcache version says %q", col.Summaries()[0].Attr["ver"], vout)
	}
	files := col.Files()
	if len(files) != len(reads) {
		t.Fatalf("f-stream: %d files, want %d: %+v", len(files), len(reads), files)
	}
	for i, f := range files {
		prot := map[bool]string{false: "xroot", true: "http"}[i == 1]
		if f.LFN != "/"+reads[i] || !f.Closed || f.Read != int64(sizes[reads[i]]) || f.User.Prot != prot || f.User.Host != "127.0.0.1" {
			t.Errorf("f-stream file %d: %+v, want %s read whole over %s", i, f, reads[i], prot)
		}
	}
	trace := filepath.Join(dir, "gstream.log")
	if err := os.WriteFile(trace, gs, 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := hepcache(t, bin, "sim", "run", "--trace", trace, "--size", "1GB", "--policy", "lru", "--json")
	if err != nil {
		t.Fatalf("sim run: %v\n%s\ncapture: %q", err, stderr, gs)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("sim output: %v\n%s", err, out)
	}
	// Three accesses of two files: the second read of a is a hit in any
	// cache that holds both.
	if res["requests"] != float64(len(reads)) || res["hits"] != float64(1) {
		t.Errorf("sim replayed %v requests with %v hits, want %d and 1: %s", res["requests"], res["hits"], len(reads), out)
	}
	if want := float64(2*sizes["a.root"] + sizes["b.root"]); res["bytes_out"] != want {
		t.Errorf("bytes_out %v, want %v", res["bytes_out"], want)
	}
}
