package s3origin

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hepcache/hepcache/internal/originhttp"
	"github.com/hepcache/hepcache/origin"
)

// errChanged reports that the object is not the version opened (another
// ETag, or gone). It wraps origin.ErrChanged and origin.ErrNotFound like
// the http origin's: that version no longer exists, and the cache must not
// mix it with another.
var errChanged = fmt.Errorf("object replaced or deleted at the origin since it was opened: %w: %w", origin.ErrChanged, origin.ErrNotFound)

// Stat implements origin.Origin with a HEAD of the object. A key that is
// no object but the prefix of some ("a/b/..." for "a/b") is a directory,
// like the root of the bucket or prefix.
func (o *Origin) Stat(ctx context.Context, p string) (origin.FileInfo, error) {
	key := o.key(p)
	if key == o.prefix {
		return o.statDir(ctx, p, o.prefix) // the root
	}
	r := request{method: http.MethodHead, key: key}
	resp, err := o.do(ctx, r)
	if err != nil {
		var e *s3Error
		if errors.As(err, &e) && e.status == http.StatusNotFound {
			// No such object: a directory if objects lie under it (and a
			// missing bucket is named by the listing's NoSuchBucket).
			return o.statDir(ctx, p, key+"/")
		}
		if errors.As(err, &e) && e.status == http.StatusForbidden {
			return origin.FileInfo{}, o.refusalReason(ctx, key, e)
		}
		return origin.FileInfo{}, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return origin.FileInfo{}, fmt.Errorf("%s: unexpected %s: %w", o.op(r), resp.Status, origin.ErrInvalid)
	}
	return infoFrom(p, resp.Header), nil
}

// refusalReason asks again with a GET, whose answer (unlike HEAD's) has a
// body saying why: a wrong secret, an unknown key id, no permission.
func (o *Origin) refusalReason(ctx context.Context, key string, headErr *s3Error) error {
	resp, err := o.do(ctx, request{method: http.MethodGet, key: key, header: http.Header{"Range": {"bytes=0-0"}}})
	if err != nil {
		var e *s3Error
		if errors.As(err, &e) && errors.Is(e.sentinel, origin.ErrNotAuthorized) {
			return err
		}
		return headErr
	}
	resp.Body.Close()
	return headErr
}

// statDir reports p as a directory when the listing of dirPrefix finds
// an object or common prefix under it (or it is the root).
func (o *Origin) statDir(ctx context.Context, p, dirPrefix string) (origin.FileInfo, error) {
	root := dirPrefix == o.prefix
	page, err := o.listPage(ctx, dirPrefix, "", 1)
	if err != nil {
		return origin.FileInfo{}, err
	}
	if !root && len(page.Contents) == 0 && len(page.CommonPrefixes) == 0 {
		return origin.FileInfo{}, fmt.Errorf("s3 HEAD %s: NoSuchKey: no object and no objects under it: %w",
			o.objectName(strings.TrimSuffix(dirPrefix, "/")), origin.ErrNotFound)
	}
	return origin.FileInfo{Name: p, Mode: fs.ModeDir | 0o755}, nil
}

// infoFrom builds a file's metadata from a HEAD or GET answer.
func infoFrom(p string, h http.Header) origin.FileInfo {
	fi := origin.FileInfo{Name: p, Mode: 0o644, ETag: h.Get("ETag"), Size: -1}
	if n, err := strconv.ParseInt(h.Get("Content-Length"), 10, 64); err == nil {
		fi.Size = n
	}
	if t, err := http.ParseTime(h.Get("Last-Modified")); err == nil {
		fi.ModTime = t.UTC()
	}
	// An archived object (Glacier) is readable only after a restore.
	switch h.Get("X-Amz-Storage-Class") {
	case "GLACIER", "DEEP_ARCHIVE":
		fi.Offline = !strings.Contains(h.Get("X-Amz-Restore"), `ongoing-request="false"`)
	}
	return fi
}

// Open implements origin.Origin: a HEAD learns the object's size and ETag,
// which every read then requires.
func (o *Origin) Open(ctx context.Context, p string) (origin.File, error) {
	fi, err := o.Stat(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("open s3 %s: %w", o.objectName(o.key(p)), origin.ErrIsDir)
	}
	if fi.Size < 0 {
		return nil, fmt.Errorf("open s3 %s: no Content-Length in the HEAD answer: %w", o.objectName(o.key(p)), origin.ErrUnsupported)
	}
	if fi.ETag == "" && fi.ModTime.IsZero() {
		// Nothing tells two versions of the object apart: a copy could mix
		// them without anyone noticing.
		return nil, fmt.Errorf("open s3 %s: the object store gives neither ETag nor Last-Modified, so hepcache cannot tell its versions apart and does not cache it: %w", o.objectName(o.key(p)), origin.ErrUnsupported)
	}
	fi.VersionPinned = fi.ETag != ""
	return &file{o: o, key: o.key(p), info: fi}, nil
}

// file is an open object. It implements origin.File.
type file struct {
	o    *Origin
	key  string
	info origin.FileInfo
	// learnt is the ETag of the first GET answer when the HEAD gave none
	// (a store that omits it there): later answers must carry the same.
	learnt atomic.Pointer[string]
}

var _ origin.File = (*file)(nil)

// Info implements origin.File.
func (f *file) Info() origin.FileInfo { return f.info }

// Close implements origin.File; an object holds no server resource.
func (f *file) Close() error { return nil }

// ReadAt implements origin.File with one ranged GET carrying If-Match: the
// object's ETag at open. A replaced object answers 412 (or, from a server
// ignoring If-Match, another ETag): errChanged, never the new bytes.
func (f *file) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	return f.readAt(ctx, p, off, nil)
}

var _ origin.ProgressReader = (*file)(nil)

// ReadAtProgress implements origin.ProgressReader: the body is read into
// p as it arrives.
func (f *file) ReadAtProgress(ctx context.Context, p []byte, off int64, progress func(int)) (int, error) {
	return f.readAt(ctx, p, off, progress)
}

func (f *file) readAt(ctx context.Context, p []byte, off int64, progress func(int)) (int, error) {
	name := f.o.objectName(f.key)
	if off < 0 {
		return 0, fmt.Errorf("s3 GET %s at %d: negative offset: %w", name, off, origin.ErrInvalid)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if off >= f.info.Size {
		return 0, io.EOF
	}
	want := min(int64(len(p)), f.info.Size-off)
	rng := fmt.Sprintf("bytes=%d-%d", off, off+want-1)
	hdr := http.Header{"Range": {rng}}
	etag := f.info.ETag
	if etag == "" {
		if p := f.learnt.Load(); p != nil {
			etag = *p
		}
	}
	if etag != "" {
		hdr.Set("If-Match", etag)
	}
	resp, err := f.o.do(ctx, request{method: http.MethodGet, key: f.key, header: hdr})
	if err != nil {
		if errors.Is(err, origin.ErrNotFound) {
			return 0, fmt.Errorf("s3 GET %s %s: %w: %w", name, rng, err, errChanged)
		}
		return 0, fmt.Errorf("read %d@%d: %w", len(p), off, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusPartialContent:
		start, _, total, err := originhttp.ParseContentRange(resp.Header.Get("Content-Range"))
		if err != nil || start != off {
			return 0, fmt.Errorf("s3 GET %s %s: answered Content-Range %q: %w", name, rng, resp.Header.Get("Content-Range"), origin.ErrInvalid)
		}
		if total >= 0 && total != f.info.Size {
			return 0, fmt.Errorf("s3 GET %s %s: size %d, opened with %d: %w", name, rng, total, f.info.Size, errChanged)
		}
	case http.StatusOK:
		// The server ignored Range: skip to off.
		if _, err := io.CopyN(io.Discard, resp.Body, off); err != nil {
			return 0, fmt.Errorf("s3 GET %s: skipping to %d of a whole object: %w: %w", name, off, err, origin.ErrUnavailable)
		}
	case http.StatusPreconditionFailed:
		return 0, fmt.Errorf("s3 GET %s %s: 412 If-Match %s failed: %w", name, rng, f.info.ETag, errChanged)
	case http.StatusRequestedRangeNotSatisfiable:
		return 0, fmt.Errorf("s3 GET %s %s: 416: the object shrank: %w", name, rng, errChanged)
	default:
		return 0, fmt.Errorf("s3 GET %s %s: unexpected %s: %w", name, rng, resp.Status, origin.ErrInvalid)
	}
	if err := f.sameVersion(resp.Header); err != nil {
		return 0, fmt.Errorf("s3 GET %s %s: %w", name, rng, err)
	}
	n, err := origin.ReadFullProgress(resp.Body, p[:want], progress)
	if err != nil {
		return n, fmt.Errorf("s3 GET %s %s: body after %d bytes: %w: %w", name, rng, n, err, origin.ErrUnavailable)
	}
	if want < int64(len(p)) {
		return n, io.EOF
	}
	return n, nil
}

// sameVersion checks a GET answer's headers against the version opened,
// before any byte of its body is used: its ETag (the HEAD's, or the first
// answer's when the HEAD gave none) and its Last-Modified. A store that
// ignores If-Match is caught by the ETag it answers with; one that sends
// no ETag at all, by Last-Modified (to the second: a replacement within
// the second the object was written, with the same size, goes unseen, as
// for POSIX and XRootD origins).
func (f *file) sameVersion(h http.Header) error {
	et := h.Get("ETag")
	switch {
	case et == "":
	case f.info.ETag != "":
		if et != f.info.ETag {
			return fmt.Errorf("ETag %s, opened with %s: %w", et, f.info.ETag, errChanged)
		}
	default:
		if !f.learnt.CompareAndSwap(nil, &et) {
			if was := *f.learnt.Load(); et != was {
				return fmt.Errorf("ETag %s, earlier reads had %s: %w", et, was, errChanged)
			}
		}
	}
	if lm, err := http.ParseTime(h.Get("Last-Modified")); err == nil && !f.info.ModTime.IsZero() && lm.Unix() != f.info.ModTime.Unix() {
		return fmt.Errorf("Last-Modified %s, opened with %s: %w", lm.UTC().Format(http.TimeFormat), f.info.ModTime.UTC().Format(http.TimeFormat), errChanged)
	}
	return nil
}

// ReadV implements origin.File: S3 has no multi-range GET, so one ranged
// GET per segment.
func (f *file) ReadV(ctx context.Context, segs []origin.Segment) error {
	for _, s := range segs {
		n, err := f.ReadAt(ctx, s.Buf, s.Offset)
		if err == io.EOF && n == len(s.Buf) {
			err = nil
		}
		if err != nil {
			if err == io.EOF {
				return fmt.Errorf("s3 readv %s: %d@%d beyond the end: %w", f.o.objectName(f.key), len(s.Buf), s.Offset, origin.ErrInvalid)
			}
			return err
		}
	}
	return nil
}

// listResult is a ListObjectsV2 answer.
type listResult struct {
	IsTruncated           bool   `xml:"IsTruncated"`
	NextContinuationToken string `xml:"NextContinuationToken"`
	Contents              []struct {
		Key          string `xml:"Key"`
		LastModified string `xml:"LastModified"`
		ETag         string `xml:"ETag"`
		Size         int64  `xml:"Size"`
	} `xml:"Contents"`
	CommonPrefixes []struct {
		Prefix string `xml:"Prefix"`
	} `xml:"CommonPrefixes"`
}

// listPage fetches one ListObjectsV2 page of the keys under prefix, one
// level deep (delimiter "/").
func (o *Origin) listPage(ctx context.Context, prefix, token string, max int) (*listResult, error) {
	q := url.Values{"list-type": {"2"}, "delimiter": {"/"}, "max-keys": {strconv.Itoa(max)}, "prefix": {prefix}}
	if token != "" {
		q.Set("continuation-token", token)
	}
	r := request{method: http.MethodGet, query: q}
	resp, err := o.do(ctx, r)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: unexpected %s: %w", o.op(r), resp.Status, origin.ErrInvalid)
	}
	var lr listResult
	if err := xml.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&lr); err != nil {
		return nil, fmt.Errorf("%s: answer: %w: %w", o.op(r), err, origin.ErrUnavailable)
	}
	return &lr, nil
}

var _ origin.ListEacher = (*Origin)(nil)

// List implements origin.Origin: ListEach's entries collected, at most
// maxListEntries.
func (o *Origin) List(ctx context.Context, p string, withStat bool) ([]origin.FileInfo, error) {
	var out []origin.FileInfo
	err := o.ListEach(ctx, p, withStat, func(fi origin.FileInfo) error {
		if len(out) == maxListEntries {
			return fmt.Errorf("s3 LIST %s/%s: more than %d entries: %w", o.bucket, o.key(p), maxListEntries, origin.ErrUnsupported)
		}
		out = append(out, fi)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListEach implements origin.ListEacher with ListObjectsV2, page after
// page, each page's entries handed over before the next is asked for: the
// objects directly under p are files, the common prefixes directories. S3
// lists sizes, times and ETags anyway, so withStat costs nothing.
func (o *Origin) ListEach(ctx context.Context, p string, withStat bool, fn func(origin.FileInfo) error) error {
	dir := o.key(p)
	if dir != "" && !strings.HasSuffix(dir, "/") {
		dir += "/"
	}
	n := 0
	token := ""
	for {
		page, err := o.listPage(ctx, dir, token, o.cfg.listPageSize)
		if err != nil {
			return fmt.Errorf("list: %w", err)
		}
		for _, c := range page.Contents {
			name := strings.TrimPrefix(c.Key, dir)
			if name == "" || strings.Contains(name, "/") {
				continue // the directory's own marker object
			}
			fi := origin.FileInfo{Name: name, Size: c.Size, Mode: 0o644, ETag: c.ETag}
			if t, err := time.Parse(time.RFC3339Nano, c.LastModified); err == nil {
				fi.ModTime = t.UTC()
			}
			n++
			if err := fn(fi); err != nil {
				return err
			}
		}
		for _, cp := range page.CommonPrefixes {
			name := strings.TrimSuffix(strings.TrimPrefix(cp.Prefix, dir), "/")
			if name == "" || strings.Contains(name, "/") {
				continue
			}
			n++
			if err := fn(origin.FileInfo{Name: name, Mode: fs.ModeDir | 0o755}); err != nil {
				return err
			}
		}
		if !page.IsTruncated {
			break
		}
		if page.NextContinuationToken == "" || page.NextContinuationToken == token {
			return fmt.Errorf("s3 LIST %s/%s: truncated page without a new continuation token: %w", o.bucket, dir, origin.ErrInvalid)
		}
		token = page.NextContinuationToken
	}
	if n == 0 && dir != o.prefix {
		// S3 has no directories: an empty listing is a missing one.
		return fmt.Errorf("list: s3 LIST %s/%s: no objects under it: %w", o.bucket, dir, origin.ErrNotFound)
	}
	return nil
}

// Checksum implements origin.Origin: "crc32c" when the object store keeps
// that additional checksum for the whole object (x-amz-checksum-crc32c).
// Nothing else: a multipart object's ETag is no MD5 of the object, and a
// composite checksum (per part) is no checksum of the whole.
func (o *Origin) Checksum(ctx context.Context, p, algo string) (string, error) {
	key := o.key(p)
	if algo != "crc32c" {
		return "", fmt.Errorf("s3 checksum %s of %s: S3 keeps only crc32c among the algorithms the cache knows: %w", algo, o.objectName(key), origin.ErrUnsupported)
	}
	resp, err := o.do(ctx, request{method: http.MethodHead, key: key, header: http.Header{"X-Amz-Checksum-Mode": {"ENABLED"}}})
	if err != nil {
		return "", fmt.Errorf("checksum: %w", err)
	}
	resp.Body.Close()
	v := resp.Header.Get("X-Amz-Checksum-Crc32c")
	if v == "" || strings.Contains(v, "-") || strings.EqualFold(resp.Header.Get("X-Amz-Checksum-Type"), "COMPOSITE") {
		return "", fmt.Errorf("s3 checksum crc32c of %s: none stored for the whole object: %w", o.objectName(key), origin.ErrUnsupported)
	}
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil || len(b) != 4 {
		return "", fmt.Errorf("s3 checksum crc32c of %s: malformed %q: %w", o.objectName(key), v, origin.ErrInvalid)
	}
	return hex.EncodeToString(b), nil
}
