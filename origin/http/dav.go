package httporigin

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/hepcache/hepcache/origin"
)

// propfindBody asks for the properties List reads.
const propfindBody = `<?xml version="1.0" encoding="utf-8"?>
<D:propfind xmlns:D="DAV:"><D:prop><D:resourcetype/><D:getcontentlength/><D:getlastmodified/><D:getetag/></D:prop></D:propfind>`

// maxMultistatus bounds a PROPFIND answer (about 100k entries).
const maxMultistatus = 64 << 20

type multistatus struct {
	Responses []davResponse `xml:"DAV: response"`
}

type davResponse struct {
	Href     string        `xml:"DAV: href"`
	Propstat []davPropstat `xml:"DAV: propstat"`
}

type davPropstat struct {
	Status string  `xml:"DAV: status"`
	Prop   davProp `xml:"DAV: prop"`
}

type davProp struct {
	ResourceType struct {
		Collection *struct{} `xml:"DAV: collection"`
	} `xml:"DAV: resourcetype"`
	ContentLength string `xml:"DAV: getcontentlength"`
	LastModified  string `xml:"DAV: getlastmodified"`
	ETag          string `xml:"DAV: getetag"`
}

// List implements origin.Origin with a WebDAV PROPFIND of depth 1. A server
// without WebDAV answers 405 or 501: ErrUnsupported.
func (o *Origin) List(ctx context.Context, p string, withStat bool) ([]origin.FileInfo, error) {
	dir := strings.TrimRight(path.Clean("/"+p), "/") + "/"
	hdr := http.Header{}
	hdr.Set("Depth", "1")
	hdr.Set("Content-Type", "application/xml; charset=utf-8")
	resp, err := o.do(ctx, "PROPFIND", dir, hdr, strings.NewReader(propfindBody))
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	defer resp.Body.Close()
	u := o.url(dir)
	if resp.StatusCode != http.StatusMultiStatus {
		return nil, fmt.Errorf("list: %w", statusError("PROPFIND", u, resp))
	}
	var ms multistatus
	if err := xml.NewDecoder(io.LimitReader(resp.Body, maxMultistatus)).Decode(&ms); err != nil {
		return nil, fmt.Errorf("PROPFIND %s: multistatus: %w: %w", u, err, origin.ErrInvalid)
	}
	self := path.Clean(o.base.Path + dir)
	out := make([]origin.FileInfo, 0, len(ms.Responses))
	for _, r := range ms.Responses {
		hu, err := url.Parse(r.Href)
		if err != nil {
			continue
		}
		hp := path.Clean(hu.Path)
		if hp == self || path.Dir(hp) != self {
			continue // the directory itself, or not a direct child
		}
		fi := origin.FileInfo{Name: path.Base(hp), Mode: 0o644}
		for _, ps := range r.Propstat {
			if !strings.Contains(ps.Status, " 200") {
				continue
			}
			if ps.Prop.ResourceType.Collection != nil || strings.HasSuffix(hu.Path, "/") {
				fi.Mode = fs.ModeDir | 0o755
			}
			if n, err := strconv.ParseInt(strings.TrimSpace(ps.Prop.ContentLength), 10, 64); err == nil {
				fi.Size = n
			}
			if t, err := http.ParseTime(strings.TrimSpace(ps.Prop.LastModified)); err == nil {
				fi.ModTime = t.UTC()
			}
			fi.ETag = strings.TrimSpace(ps.Prop.ETag)
		}
		if fi.IsDir() {
			fi.Size, fi.ETag = 0, ""
		}
		if !withStat {
			fi = origin.FileInfo{Name: fi.Name, Mode: fi.Mode}
		}
		out = append(out, fi)
	}
	return out, nil
}

// Checksum implements origin.Origin with a HEAD request carrying
// Want-Digest (RFC 3230). Adler32 and CRC32C come back as hex, MD5 as
// base64; all are returned as lower-case hex. No Digest: ErrUnsupported.
func (o *Origin) Checksum(ctx context.Context, p, algo string) (string, error) {
	algo = strings.ToLower(algo)
	// RFC 3230 names SHA-1 "sha" and SHA-256 "sha-256".
	if d, ok := map[string]string{"sha1": "sha", "sha256": "sha-256"}[algo]; ok {
		algo = d
	}
	hdr := http.Header{}
	hdr.Set("Want-Digest", algo)
	resp, err := o.pathRequest(ctx, http.MethodHead, p, hdr, nil)
	if err != nil {
		return "", fmt.Errorf("checksum %s: %w", algo, err)
	}
	defer resp.Body.Close()
	u := o.url(p)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("checksum %s: %w", algo, statusError(http.MethodHead, u, resp))
	}
	v, ok := DigestValue(resp.Header.Values("Digest"), algo)
	if !ok {
		return "", fmt.Errorf("HEAD %s: no %s in Digest: %w", u, algo, origin.ErrUnsupported)
	}
	return v, nil
}

// DigestValue finds algo in RFC 3230 Digest header values and returns it as
// lower-case hex: adler32 and crc32c are sent as hex, md5 and sha-* as
// base64 (a hex md5, as some servers send, is accepted too).
func DigestValue(values []string, algo string) (string, bool) {
	for _, hv := range values {
		for _, item := range strings.Split(hv, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(item), "=")
			if !ok || !strings.EqualFold(k, algo) {
				continue
			}
			v = strings.TrimSpace(v)
			switch algo {
			case "adler32", "crc32c", "crc32":
				if _, err := hex.DecodeString(v); err != nil || len(v) == 0 || len(v) > 8 {
					return "", false
				}
				return strings.Repeat("0", 8-len(v)) + strings.ToLower(v), true
			default:
				if _, err := hex.DecodeString(v); err == nil && (algo != "md5" || len(v) == 32) {
					return strings.ToLower(v), true
				}
				b, err := base64.StdEncoding.DecodeString(v)
				if err != nil {
					return "", false
				}
				return hex.EncodeToString(b), true
			}
		}
	}
	return "", false
}
