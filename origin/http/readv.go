package httporigin

import (
	"context"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"

	"github.com/hepcache/hepcache/internal/originhttp"
	"github.com/hepcache/hepcache/origin"
)

// ReadV implements origin.File: segments go out in multi-range GETs of up
// to MaxReadVRanges ranges, answered as multipart/byteranges. A server that
// answers a multi-range request with the whole file or one range gets one
// GET per segment instead.
func (f *file) ReadV(ctx context.Context, segs []origin.Segment) error {
	for _, s := range segs {
		if s.Offset < 0 || s.Offset+int64(len(s.Buf)) > f.info.Size {
			return fmt.Errorf("readv %s segment %d@%d: beyond the end (%d): %w", f.o.url(f.path), len(s.Buf), s.Offset, f.info.Size, origin.ErrInvalid)
		}
	}
	maxN := f.o.cfg.MaxReadVRanges
	for len(segs) > 0 {
		n := min(len(segs), maxN)
		batch := segs[:n]
		segs = segs[n:]
		if len(batch) == 1 || maxN == 1 {
			if err := origin.ReadVByReadAt(ctx, f, batch); err != nil {
				return err
			}
			continue
		}
		ok, err := f.readMulti(ctx, batch)
		if err != nil {
			return err
		}
		if !ok {
			if err := origin.ReadVByReadAt(ctx, f, batch); err != nil {
				return err
			}
		}
	}
	return nil
}

// readMulti reads segs with one multi-range GET. It returns false when the
// server does not answer with multipart/byteranges.
func (f *file) readMulti(ctx context.Context, segs []origin.Segment) (bool, error) {
	var b strings.Builder
	b.WriteString("bytes=")
	for i, s := range segs {
		if i > 0 {
			b.WriteByte(',')
		}
		if len(s.Buf) == 0 {
			fmt.Fprintf(&b, "%d-%d", s.Offset, s.Offset) // keeps indices aligned; ignored below
			continue
		}
		fmt.Fprintf(&b, "%d-%d", s.Offset, s.Offset+int64(len(s.Buf))-1)
	}
	hdr := f.identity()
	hdr.Set("Range", b.String())
	resp, err := f.get(origin.WithClientToken(ctx, f.tok), hdr)
	if err != nil {
		return false, fmt.Errorf("readv %d segments: %w", len(segs), err)
	}
	defer resp.Body.Close()
	u := f.o.url(f.path)
	if resp.StatusCode != http.StatusPartialContent {
		if resp.StatusCode == http.StatusOK {
			return false, nil
		}
		return false, fmt.Errorf("readv %d segments: %w", len(segs), statusError(http.MethodGet, u, resp))
	}
	mt, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/byteranges" || params["boundary"] == "" {
		return false, nil // a single range (the server merged them): read one by one
	}
	// Parts may come in any order and a server may merge adjacent ranges:
	// copy each part into every segment it covers.
	filled := make([]int, len(segs))
	mr := multipart.NewReader(resp.Body, params["boundary"])
	for {
		part, err := mr.NextRawPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return false, fmt.Errorf("GET %s multipart: %w: %w", u, err, origin.ErrUnavailable)
		}
		first, last, _, err := originhttp.ParseContentRange(part.Header.Get("Content-Range"))
		if err != nil {
			return false, fmt.Errorf("GET %s multipart part: %w: %w", u, err, origin.ErrInvalid)
		}
		data := make([]byte, last-first+1)
		if _, err := io.ReadFull(part, data); err != nil {
			return false, fmt.Errorf("GET %s multipart part %d-%d: %w: %w", u, first, last, err, origin.ErrUnavailable)
		}
		for i, s := range segs {
			lo, hi := max(s.Offset, first), min(s.Offset+int64(len(s.Buf)), last+1)
			if lo < hi {
				filled[i] += copy(s.Buf[lo-s.Offset:hi-s.Offset], data[lo-first:hi-first])
			}
		}
	}
	for i, s := range segs {
		if filled[i] < len(s.Buf) {
			return false, fmt.Errorf("GET %s multipart: range %d-%d missing from the answer: %w", u, s.Offset, s.Offset+int64(len(s.Buf))-1, origin.ErrInvalid)
		}
	}
	return true, nil
}
