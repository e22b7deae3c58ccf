package readat

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
)

type failAt struct {
	r   io.ReaderAt
	off int64
}

func (f failAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= f.off {
		return 0, errors.New("bad sector")
	}
	return f.r.ReadAt(p, off)
}

func TestStream(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 1000)
	r := bytes.NewReader(data)
	var got bytes.Buffer
	collect := func(p []byte) error { got.Write(p); return nil }
	// A range inside, in chunks smaller than it.
	n, err := Stream(context.Background(), r, make([]byte, 64), 5, 1000, collect)
	if err != nil || n != 1000 || !bytes.Equal(got.Bytes(), data[5:1005]) {
		t.Fatalf("inside: %d %v", n, err)
	}
	// Past the end: what there is, no error.
	got.Reset()
	n, err = Stream(context.Background(), r, make([]byte, 64), 9990, 100, collect)
	if err != nil || n != 10 {
		t.Fatalf("at the end: %d %v", n, err)
	}
	// A reader error is a ReadError with the offset; fn's error as it is.
	_, err = Stream(context.Background(), failAt{r, 128}, make([]byte, 64), 0, 1000, collect)
	var re *ReadError
	if !errors.As(err, &re) || re.Off != 128 {
		t.Fatalf("reader error: %v", err)
	}
	stop := errors.New("client gone")
	if _, err := Stream(context.Background(), r, make([]byte, 64), 0, 1000, func([]byte) error { return stop }); err != stop {
		t.Fatalf("fn error: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Stream(ctx, r, make([]byte, 64), 0, 1000, collect); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}
