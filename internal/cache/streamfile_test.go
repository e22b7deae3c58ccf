package cache

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/origin"
)

// fileStreamResult is what one StreamFile call delivered, and how.
type fileStreamResult struct {
	got                  []byte
	viaFile, viaBytes    int64
	n                    int64
	err                  error
	outOfOrder, fileRead error
}

// streamFile reads [off, off+n) of f with StreamFile, reading the file
// ranges back from the handed file as a front end's sendfile would.
func streamFile(f backend.File, off, n int64) fileStreamResult {
	var r fileStreamResult
	next := off
	r.n, r.err = f.(backend.FileStreamer).StreamFile(context.Background(), off, n,
		func(b []byte) error {
			r.got = append(r.got, b...)
			r.viaBytes += int64(len(b))
			next += int64(len(b))
			return nil
		},
		func(of *os.File, o, k int64) error {
			if o != next && r.outOfOrder == nil {
				r.outOfOrder = errors.New("a file range out of order")
			}
			buf := make([]byte, k)
			if _, err := of.ReadAt(buf, o); err != nil && r.fileRead == nil {
				r.fileRead = err
			}
			r.got = append(r.got, buf...)
			r.viaFile += k
			next += k
			return nil
		})
	return r
}

func TestStreamFileHandsBytesOnDiskAsFileRanges(t *testing.T) {
	dir := t.TempDir()
	m, data := memWithFile(71, 3*testBlock+333)
	size := int64(len(data))
	c := newTestCache(t, dir, m, nil)
	f := openTest(t, c, "/f")

	// Cold: every piece is on disk before its readers are woken, so the
	// whole read goes out as ranges of the data file, in order.
	r := streamFile(f, 0, size)
	if r.err != nil || r.outOfOrder != nil || r.fileRead != nil {
		t.Fatalf("cold StreamFile: %v %v %v", r.err, r.outOfOrder, r.fileRead)
	}
	if !bytes.Equal(r.got, data) || r.n != size {
		t.Fatalf("cold StreamFile delivered %d bytes (reported %d), want the file's %d", len(r.got), r.n, size)
	}
	if r.viaFile != size {
		t.Fatalf("cold StreamFile: %d bytes as file ranges and %d as bytes, want all %d as ranges", r.viaFile, r.viaBytes, size)
	}
	if got := m.BytesRead.Load(); got != size {
		t.Fatalf("cold read fetched %d bytes from the origin, want %d", got, size)
	}

	// Hot, from the middle of one block into the next.
	waitBlocks(t, c, 4)
	r = streamFile(f, testBlock-100, testBlock)
	if r.err != nil || !bytes.Equal(r.got, data[testBlock-100:2*testBlock-100]) || r.viaBytes != 0 {
		t.Fatalf("hot StreamFile: err %v, %d via bytes, right bytes %v", r.err, r.viaBytes, bytes.Equal(r.got, data[testBlock-100:2*testBlock-100]))
	}

	// A front end's send failure ends the read with that error.
	sendErr := errors.New("client gone")
	_, err := f.(backend.FileStreamer).StreamFile(context.Background(), 0, size,
		func([]byte) error { return nil },
		func(*os.File, int64, int64) error { return sendErr })
	if !errors.Is(err, sendErr) {
		t.Fatalf("a failing file sink gave %v, want %v", err, sendErr)
	}
	f.Close()
	c.Close()

	// After a restart the blocks at rest wait for their CRC check: they go
	// through the checked byte path, and only once checked as file ranges.
	c2 := newTestCache(t, dir, m, nil)
	m.Fail(origin.ErrUnavailable)
	f2 := openTest(t, c2, "/f")
	defer f2.Close()
	r = streamFile(f2, 0, size)
	if r.err != nil || !bytes.Equal(r.got, data) {
		t.Fatalf("StreamFile after restart: %v, right bytes %v", r.err, bytes.Equal(r.got, data))
	}
	if r.viaFile != 0 {
		t.Fatalf("%d bytes of unchecked blocks handed out as file ranges", r.viaFile)
	}
	r = streamFile(f2, 0, size)
	if r.err != nil || !bytes.Equal(r.got, data) || r.viaFile != size {
		t.Fatalf("StreamFile of checked blocks: err %v, %d as ranges of %d", r.err, r.viaFile, size)
	}
}

func TestStreamFileWithoutFileSinkIsStream(t *testing.T) {
	m, data := memWithFile(72, 2*testBlock)
	c := newTestCache(t, t.TempDir(), m, nil)
	f := openTest(t, c, "/f")
	defer f.Close()
	var got []byte
	n, err := f.(backend.FileStreamer).StreamFile(context.Background(), 0, int64(len(data)),
		func(b []byte) error { got = append(got, b...); return nil }, nil)
	if err != nil || n != int64(len(data)) || !bytes.Equal(got, data) {
		t.Fatalf("StreamFile with no file sink: %d bytes, %v", n, err)
	}
}
