package client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/xrdtest"
	"github.com/hepcache/hepcache/internal/xrootd/proto"
	"github.com/hepcache/hepcache/origin"
)

// fakeFile serves one file's content for open, read, stat and close.
type fakeFile struct {
	content []byte
	opens   atomic.Int32
}

func (ff *fakeFile) handle(h proto.RequestHeader, data []byte) ([]byte, bool) {
	st := proto.StatInfo{ID: 1, Size: int64(len(ff.content)), Flags: proto.StatReadable, MTime: 1700000000}
	switch h.RequestID {
	case proto.ReqOpen:
		ff.opens.Add(1)
		return proto.AppendOpenResponse(nil, h.StreamID, proto.FHandle{0, 0, 0, 1}, &st), false
	case proto.ReqStat:
		return proto.AppendStatResponse(nil, h.StreamID, &st), false
	case proto.ReqRead:
		var r proto.ReadRequest
		if err := r.Decode(&h, data); err != nil {
			return proto.AppendError(nil, h.StreamID, proto.ErrArgInvalid, err.Error()), false
		}
		end := min(int64(len(ff.content)), r.Offset+int64(r.Length))
		if r.Offset >= end {
			return proto.AppendOK(nil, h.StreamID, nil), false
		}
		return proto.AppendOK(nil, h.StreamID, ff.content[r.Offset:end]), false
	case proto.ReqClose, proto.ReqPing:
		return proto.AppendOK(nil, h.StreamID, nil), false
	}
	return nil, false
}

func TestRedirect(t *testing.T) {
	dir, files := testData(t)
	srv := xrdtest.StartOrigin(t, dir)
	_, port, _ := strings.Cut(srv.Addr, ":")
	var redirects atomic.Int32
	fake := xrdtest.StartFake(t, func(h proto.RequestHeader, data []byte) ([]byte, bool) {
		if h.RequestID == proto.ReqProtocol || h.RequestID == proto.ReqLogin {
			return nil, false
		}
		redirects.Add(1)
		p := 0
		for _, c := range port {
			p = p*10 + int(c-'0')
		}
		return proto.AppendRedirect(nil, h.StreamID, int32(p), "127.0.0.1?tried=fake"), false
	})
	c := newClient(t)
	ctx := ctxT(t)

	f, err := c.Open(ctx, fake.Addr, "/odd.bin")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(ctx)
	if f.Addr() != srv.Addr || f.Path() != "/odd.bin?tried=fake" {
		t.Fatalf("after redirect: %s %s", f.Addr(), f.Path())
	}
	got := make([]byte, len(files["odd.bin"]))
	if n, err := f.ReadAt(ctx, got, 0); n != len(got) || err != nil || !bytes.Equal(got, files["odd.bin"]) {
		t.Fatalf("read after redirect: %d %v", n, err)
	}
	if st, err := c.Stat(ctx, fake.Addr, "/big.bin"); err != nil || st.Size != int64(len(files["big.bin"])) {
		t.Fatalf("stat via redirect: %+v %v", st, err)
	}
	if redirects.Load() != 2 {
		t.Fatalf("%d redirects", redirects.Load())
	}

	// A redirect loop ends after MaxRedirects hops.
	var selfAddr atomic.Value
	self := xrdtest.StartFake(t, func(h proto.RequestHeader, data []byte) ([]byte, bool) {
		if h.RequestID == proto.ReqProtocol || h.RequestID == proto.ReqLogin {
			return nil, false
		}
		return proto.AppendRedirect(nil, h.StreamID, -1, "root://"+selfAddr.Load().(string)+"/"), false
	})
	selfAddr.Store(self.Addr)
	_, err = newClient(t, func(c *Config) { c.MaxRedirects = 3 }).Stat(ctx, self.Addr, "/x")
	if !errors.Is(err, ErrTooManyRedirects) {
		t.Fatalf("redirect loop: %v", err)
	}
}

func TestWaitAndAsync(t *testing.T) {
	content := bytes.Repeat([]byte("0123456789"), 1000)
	ff := &fakeFile{content: content}
	var waits atomic.Int32
	fake := xrdtest.StartFake(t, func(h proto.RequestHeader, data []byte) ([]byte, bool) {
		switch h.RequestID {
		case proto.ReqStat:
			if waits.Add(1) <= 2 {
				return proto.AppendWait(nil, h.StreamID, 0, "busy"), false
			}
		case proto.ReqQuery:
			// Job scheduled; the answer follows as an asynchronous response.
			b := proto.AppendWaitResp(nil, h.StreamID, 600)
			return proto.AppendAsynResp(b, h.StreamID, proto.StatusOK, []byte("adler32 0a0b0c0d\x00")), false
		case proto.ReqRead:
			var r proto.ReadRequest
			r.Decode(&h, data)
			b := proto.AppendWaitResp(nil, h.StreamID, 1)
			// The data arrives in two asynchronous parts.
			part := content[r.Offset : r.Offset+int64(r.Length)]
			b = proto.AppendAsynResp(b, h.StreamID, proto.StatusOKSoFar, part[:len(part)/2])
			return proto.AppendAsynResp(b, h.StreamID, proto.StatusOK, part[len(part)/2:]), false
		case proto.ReqDirlist:
			return proto.AppendWait(nil, h.StreamID, 0, "forever"), false
		}
		return ff.handle(h, data)
	})
	c := newClient(t, func(c *Config) { c.MaxWaits = 4 })
	ctx := ctxT(t)

	if st, err := c.Stat(ctx, fake.Addr, "/f"); err != nil || st.Size != int64(len(content)) || waits.Load() != 3 {
		t.Fatalf("stat after 2 waits: %+v %v (%d requests)", st, err, waits.Load())
	}
	if algo, v, err := c.QueryChecksum(ctx, fake.Addr, "/f", "adler32"); err != nil || algo != "adler32" || v != "0a0b0c0d" {
		t.Fatalf("async checksum: %s %s %v", algo, v, err)
	}
	f, err := c.Open(ctx, fake.Addr, "/f")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1000)
	if n, err := f.ReadAt(ctx, buf, 123); n != 1000 || err != nil || !bytes.Equal(buf, content[123:1123]) {
		t.Fatalf("async read: %d %v", n, err)
	}
	if _, err := c.Dirlist(ctx, fake.Addr, "/", false); !errors.Is(err, ErrTooManyWaits) {
		t.Fatalf("endless wait: %v", err)
	}
}

func TestAuthRequired(t *testing.T) {
	fake := xrdtest.StartFake(t, func(h proto.RequestHeader, data []byte) ([]byte, bool) {
		if h.RequestID == proto.ReqLogin {
			return proto.AppendLoginResponse(nil, h.StreamID, &proto.LoginResponse{Sec: []byte("&P=gsi,v:10000,c:ssl,ca:0")}), false
		}
		return nil, false
	})
	_, err := newClient(t).Stat(ctxT(t), fake.Addr, "/f")
	if !errors.Is(err, origin.ErrNotAuthorized) || !strings.Contains(err.Error(), "requires authentication") {
		t.Fatalf("login to a server demanding gsi: %v", err)
	}
}

func TestConnectionLoss(t *testing.T) {
	content := bytes.Repeat([]byte("abcdefgh"), 1<<16)
	ff := &fakeFile{content: content}
	var dropNext atomic.Bool
	fake := xrdtest.StartFake(t, func(h proto.RequestHeader, data []byte) ([]byte, bool) {
		if h.RequestID == proto.ReqRead && dropNext.Swap(false) {
			// Half an answer, then the connection goes away.
			return proto.AppendOKSoFar(nil, h.StreamID, content[:100])[:50], true
		}
		return ff.handle(h, data)
	})
	c := newClient(t, func(c *Config) { c.ConnsPerHost = 1 })
	ctx := ctxT(t)
	f, err := c.Open(ctx, fake.Addr, "/f")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	dropNext.Store(true)
	if _, err := f.ReadAt(ctx, buf, 0); !errors.Is(err, origin.ErrUnavailable) {
		t.Fatalf("read on a dropped connection: %v", err)
	}
	// The next read reconnects and reopens the file.
	if n, err := f.ReadAt(ctx, buf, 8); n != len(buf) || err != nil || !bytes.Equal(buf, content[8:8+len(buf)]) {
		t.Fatalf("read after reconnect: %d %v", n, err)
	}
	if ff.opens.Load() != 2 {
		t.Fatalf("%d opens, want 2", ff.opens.Load())
	}
	// A file that changed meanwhile is not silently read.
	fake.DropConns()
	ff.content = content[:100]
	if _, err := f.ReadAt(ctx, buf, 0); !errors.Is(err, origin.ErrUnavailable) && !errors.Is(err, ErrFileChanged) {
		t.Fatalf("read after drop: %v", err)
	}
	if _, err := f.ReadAt(ctx, buf, 0); !errors.Is(err, ErrFileChanged) {
		t.Fatalf("read of a changed file: %v", err)
	}
}

func TestCancelDoesNotTouchBuffer(t *testing.T) {
	content := bytes.Repeat([]byte{0xAA}, 1<<20)
	ff := &fakeFile{content: content}
	release := make(chan struct{})
	fake := xrdtest.StartFake(t, func(h proto.RequestHeader, data []byte) ([]byte, bool) {
		if h.RequestID == proto.ReqRead {
			<-release // answer only after the caller gave up
		}
		return ff.handle(h, data)
	})
	c := newClient(t, func(c *Config) { c.ConnsPerHost = 1 })
	ctx := ctxT(t)
	f, err := c.Open(ctx, fake.Addr, "/f")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	short, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() {
		_, err := f.ReadAt(short, buf, 0)
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled read: %v", err)
	}
	close(release)
	// The late answer must be discarded, and the connection stays usable.
	if err := c.Ping(ctx, fake.Addr); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, make([]byte, len(buf))) {
		t.Fatal("a late answer was written into the buffer of a cancelled read")
	}
	if n, err := f.ReadAt(ctx, buf[:10], 0); n != 10 || err != nil {
		t.Fatalf("read after cancel: %d %v", n, err)
	}
}

func TestServerKilledMidRead(t *testing.T) {
	dir, files := testData(t)
	srv := xrdtest.StartOrigin(t, dir)
	c := newClient(t)
	ctx := ctxT(t)
	f, err := c.Open(ctx, srv.Addr, "/big.bin")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var failed atomic.Int32
	start := make(chan struct{})
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1<<20)
			<-start
			for i := 0; ; i++ {
				_, err := f.ReadAt(ctx, buf, int64(i%9)<<20)
				if err != nil && err != io.EOF {
					if !errors.Is(err, origin.ErrUnavailable) {
						t.Errorf("read error does not wrap ErrUnavailable: %v", err)
					}
					failed.Add(1)
					return
				}
			}
		}()
	}
	close(start)
	time.Sleep(50 * time.Millisecond) // let reads be in flight; not a correctness wait
	srv.Stop()
	wg.Wait()
	if failed.Load() != 16 {
		t.Fatalf("%d of 16 readers saw the failure", failed.Load())
	}
	if _, err := c.Stat(ctx, srv.Addr, "/big.bin"); !errors.Is(err, origin.ErrUnavailable) {
		t.Fatalf("stat on a dead server: %v", err)
	}
	_ = files
}

func TestGarbageResponse(t *testing.T) {
	fake := xrdtest.StartFake(t, func(h proto.RequestHeader, data []byte) ([]byte, bool) {
		if h.RequestID == proto.ReqStat {
			return proto.AppendOK(nil, proto.StreamID{0x7f, 0x7f}, []byte("x")), false
		}
		return nil, false
	})
	_, err := newClient(t).Stat(ctxT(t), fake.Addr, "/f")
	if !errors.Is(err, origin.ErrUnavailable) || !errors.Is(err, proto.ErrMalformed) {
		t.Fatalf("answer on an unknown stream: %v", err)
	}
}

func TestStalledServer(t *testing.T) {
	ff := &fakeFile{content: make([]byte, 100)}
	hang := make(chan struct{})
	fake := xrdtest.StartFake(t, func(h proto.RequestHeader, data []byte) ([]byte, bool) {
		if h.RequestID == proto.ReqRead {
			<-hang // never answers while the test runs
		}
		return ff.handle(h, data)
	})
	t.Cleanup(func() { close(hang) }) // runs before the fake's Close
	// Long enough that a loaded machine answers a stat in time, so only the
	// hung read can trip it.
	c := newClient(t, func(c *Config) { c.StallTimeout = time.Second; c.ConnsPerHost = 1 })
	f, err := c.Open(context.Background(), fake.Addr, "/f")
	if err != nil {
		t.Fatal(err)
	}
	// An idle connection is not stalled.
	time.Sleep(1300 * time.Millisecond)
	if _, err := f.Stat(context.Background()); err != nil {
		t.Fatalf("stat on an idle connection: %v", err)
	}
	_, err = f.ReadAt(context.Background(), make([]byte, 10), 0)
	if !errors.Is(err, origin.ErrUnavailable) || !errors.Is(err, errStalled) {
		t.Fatalf("read from a hung server: %v", err)
	}
}

func TestClientClose(t *testing.T) {
	ff := &fakeFile{content: make([]byte, 100)}
	fake := xrdtest.StartFake(t, ff.handle)
	c := newClient(t)
	ctx := ctxT(t)
	f, err := c.Open(ctx, fake.Addr, "/f")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := f.ReadAt(ctx, make([]byte, 10), 0); !errors.Is(err, ErrClosed) && !errors.Is(err, origin.ErrUnavailable) {
		t.Fatalf("read after Client.Close: %v", err)
	}
	if _, err := c.Stat(ctx, fake.Addr, "/f"); !errors.Is(err, ErrClosed) {
		t.Fatalf("stat after Client.Close: %v", err)
	}
	if ff.opens.Load() != 1 {
		t.Fatalf("%d opens: the closed client reconnected", ff.opens.Load())
	}
}

// TestReadAtProgress: progress reports the bytes filled as the answer
// arrives (in parts, every progressStep bytes), growing to the total, and
// never after the call returned.
func TestReadAtProgress(t *testing.T) {
	content := make([]byte, 300<<10)
	for i := range content {
		content[i] = byte(i * 7)
	}
	ff := &fakeFile{content: content}
	fake := xrdtest.StartFake(t, func(h proto.RequestHeader, data []byte) ([]byte, bool) {
		if h.RequestID == proto.ReqRead {
			var r proto.ReadRequest
			r.Decode(&h, data)
			end := min(int64(len(content)), r.Offset+int64(r.Length))
			if r.Offset >= end {
				return proto.AppendOK(nil, h.StreamID, nil), false
			}
			part := content[r.Offset:end]
			b := proto.AppendOKSoFar(nil, h.StreamID, part[:len(part)/3])
			return proto.AppendOK(b, h.StreamID, part[len(part)/3:]), false
		}
		return ff.handle(h, data)
	})
	c := newClient(t)
	f, err := c.Open(ctxT(t), fake.Addr, "/f")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []int
	returned := false
	progress := func(n int) {
		mu.Lock()
		defer mu.Unlock()
		if returned {
			t.Error("progress after return")
		}
		seen = append(seen, n)
	}
	p := make([]byte, 250<<10)
	n, err := f.ReadAtProgress(ctxT(t), p, 1000, progress)
	mu.Lock()
	returned = true
	mu.Unlock()
	if err != nil || n != len(p) || !bytes.Equal(p, content[1000:1000+len(p)]) {
		t.Fatalf("read: %d %v", n, err)
	}
	if len(seen) < len(p)/progressStep || seen[len(seen)-1] != len(p) {
		t.Fatalf("progress reports %v", seen)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] <= seen[i-1] {
			t.Fatalf("progress went back: %v", seen)
		}
	}
	// Past the end: nothing read, nothing reported.
	seen, returned = nil, false
	if n, err := f.ReadAtProgress(ctxT(t), p, int64(len(content)), progress); err != io.EOF || n != 0 || len(seen) != 0 {
		t.Fatalf("read at EOF: %d %v, progress %v", n, err, seen)
	}
}
