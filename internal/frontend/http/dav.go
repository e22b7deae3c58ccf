package httpfront

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/origin"
)

// maxPropfindBody bounds the request body of PROPFIND.
const maxPropfindBody = 1 << 20

// servePropfind answers WebDAV PROPFIND (RFC 4918) with depth 0 (the
// resource) or 1 (a directory and its entries). Depth infinity, or no Depth
// header, is answered as depth 1 rather than refused: clients that send it
// want a listing. Every live property we have is returned whatever the body
// asks for (allprop), which WebDAV clients accept.
func (s *Server) servePropfind(w http.ResponseWriter, r *http.Request) error {
	req, prefix, err := s.request(r)
	if err == nil {
		err = s.authorize(r, &req, "stat")
	}
	if err == nil {
		err = checkPropfindBody(r)
	}
	if err != nil {
		s.writeError(w, r, err)
		return err
	}
	depth := 1
	if strings.TrimSpace(r.Header.Get("Depth")) == "0" {
		depth = 0
	}
	ctx := r.Context()
	fi, err := s.cfg.Backend.Stat(ctx, req)
	if err != nil {
		s.writeError(w, r, err)
		return err
	}
	href := escapePath(prefix + req.Path)
	if fi.IsDir() && !strings.HasSuffix(href, "/") {
		href += "/"
	}
	responses := []davResponse{propResponse(href, fi, req.Path)}
	if fi.IsDir() && depth == 1 {
		if err := s.authorize(r, &req, "list"); err != nil {
			s.writeError(w, r, err)
			return err
		}
		return s.streamPropfind(w, r, req, href, responses[0])
	}
	body, err := xml.Marshal(davMultistatus{XMLNS: "DAV:", Responses: responses})
	if err != nil {
		err = fmt.Errorf("propfind %s: encode: %w", req.Path, err)
		s.writeError(w, r, err)
		return err
	}
	w.Header().Set("Content-Type", `application/xml; charset="utf-8"`)
	w.Header().Set("Content-Length", strconv.Itoa(len(xml.Header)+len(body)))
	w.WriteHeader(http.StatusMultiStatus)
	io.WriteString(w, xml.Header)
	w.Write(body)
	return nil
}

// streamPropfind answers a PROPFIND of depth 1 of a directory as its
// listing arrives (backend.ListEach): a prefix of 100k objects is not held
// whole (it was, about 70 MB per request). The status and the first
// entries go out once the listing's first entry is in, so that a listing
// that fails at once still gets its status code; one that fails later
// cuts the answer off (the connection is aborted, and the client cannot
// take a partial listing for the whole).
func (s *Server) streamPropfind(w http.ResponseWriter, r *http.Request, req backend.Request, href string, self davResponse) error {
	bw := bufio.NewWriterSize(w, 32<<10)
	enc := xml.NewEncoder(bw)
	elem := xml.StartElement{Name: xml.Name{Local: "D:response"}}
	started := false
	start := func() error {
		started = true
		w.Header().Set("Content-Type", `application/xml; charset="utf-8"`)
		w.WriteHeader(http.StatusMultiStatus)
		bw.WriteString(xml.Header)
		bw.WriteString(`<D:multistatus xmlns:D="DAV:">`)
		return enc.EncodeElement(self, elem)
	}
	dir := strings.TrimSuffix(href, "/") + "/"
	err := backend.ListEach(r.Context(), s.cfg.Backend, req, true, func(e origin.FileInfo) error {
		if !started {
			if err := start(); err != nil {
				return err
			}
		}
		h := dir + escapePath(e.Name)
		if e.IsDir() {
			h += "/"
		}
		return enc.EncodeElement(propResponse(h, e, e.Name), elem)
	})
	if err == nil && !started {
		err = start() // an empty directory
	}
	if err == nil {
		if err = enc.Flush(); err == nil {
			bw.WriteString("</D:multistatus>")
			err = bw.Flush()
		}
	}
	switch {
	case err == nil:
		return nil
	case !started:
		s.writeError(w, r, err)
		return err
	case r.Context().Err() != nil:
		return fmt.Errorf("propfind %s: %w", req.Path, err) // the client is gone
	}
	s.cfg.Logger.Warn("propfind listing cut off", "path", r.URL.Path, "client", r.RemoteAddr, "err", err)
	panic(http.ErrAbortHandler)
}

// checkPropfindBody reads the (optional) body and rejects malformed XML, as
// RFC 4918 9.1 asks.
func checkPropfindBody(r *http.Request) error {
	if r.Body == nil {
		return nil
	}
	d := xml.NewDecoder(io.LimitReader(r.Body, maxPropfindBody))
	for {
		_, err := d.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return &httpError{code: http.StatusBadRequest, msg: "PROPFIND body: " + err.Error(), err: backend.ErrInvalidPath}
		}
	}
}

type davMultistatus struct {
	XMLName   xml.Name      `xml:"D:multistatus"`
	XMLNS     string        `xml:"xmlns:D,attr"`
	Responses []davResponse `xml:"D:response"`
}

type davResponse struct {
	Href     string      `xml:"D:href"`
	Propstat davPropstat `xml:"D:propstat"`
}

type davPropstat struct {
	Prop   davProp `xml:"D:prop"`
	Status string  `xml:"D:status"`
}

type davProp struct {
	DisplayName   string          `xml:"D:displayname"`
	ResourceType  davResourceType `xml:"D:resourcetype"`
	ContentLength *int64          `xml:"D:getcontentlength,omitempty"`
	LastModified  string          `xml:"D:getlastmodified,omitempty"`
	CreationDate  string          `xml:"D:creationdate,omitempty"`
	ETag          string          `xml:"D:getetag,omitempty"`
	ContentType   string          `xml:"D:getcontenttype,omitempty"`
}

type davResourceType struct {
	Collection *struct{} `xml:"D:collection,omitempty"`
}

func propResponse(href string, fi origin.FileInfo, name string) davResponse {
	p := davProp{DisplayName: baseName(name)}
	if fi.IsDir() {
		p.ResourceType.Collection = &struct{}{}
	} else {
		size := fi.Size
		p.ContentLength = &size
		p.ETag = etag(fi)
		p.ContentType = "application/octet-stream"
	}
	if !fi.ModTime.IsZero() {
		p.LastModified = fi.ModTime.UTC().Format(http.TimeFormat)
		p.CreationDate = fi.ModTime.UTC().Format(time.RFC3339)
	}
	return davResponse{Href: href, Propstat: davPropstat{Prop: p, Status: "HTTP/1.1 200 OK"}}
}

func baseName(p string) string {
	p = strings.TrimSuffix(p, "/")
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		p = p[i+1:]
	}
	if p == "" {
		return "/"
	}
	return p
}
