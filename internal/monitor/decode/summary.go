package decode

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Summary is one summary report (xrd.report): the attributes of the
// statistics element and every value of its stats sections, keyed
// "section.element.element" ("link.num", "cache.rd.hits"); a section is
// named by its id ("link") and, for the cache, also by its type
// ("cache" with Types["cache"] = "pfc").
type Summary struct {
	Attr   map[string]string
	Values map[string]string
	Types  map[string]string
}

// ParseSummary reads a summary report. It accepts XRootD 5.5.3's
// "<hits>N></hits>" (a stray '>' in its cache section).
func ParseSummary(b []byte) (*Summary, error) {
	s := &Summary{Attr: map[string]string{}, Values: map[string]string{}, Types: map[string]string{}}
	d := xml.NewDecoder(bytes.NewReader(b))
	var path []string
	var text strings.Builder
	sawRoot := false
	flush := func() {
		if len(path) > 1 {
			v := strings.TrimSpace(text.String())
			v = strings.TrimRight(v, ">")
			if v != "" {
				s.Values[strings.Join(path[1:], ".")] = v
			}
		}
		text.Reset()
	}
	for {
		tok, err := d.Token()
		if err != nil {
			if errors.Is(err, io.EOF) && sawRoot && len(path) == 0 {
				return s, nil
			}
			return nil, fmt.Errorf("decode: summary: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			flush()
			name := t.Name.Local
			switch {
			case len(path) == 0:
				if name != "statistics" {
					return nil, fmt.Errorf("decode: summary root is <%s>, want <statistics>", name)
				}
				sawRoot = true
				for _, a := range t.Attr {
					s.Attr[a.Name.Local] = a.Value
				}
			case len(path) == 1 && name == "stats":
				typ := ""
				for _, a := range t.Attr {
					switch a.Name.Local {
					case "id":
						name = a.Value
					case "type":
						typ = a.Value
					}
				}
				if typ != "" {
					s.Types[name] = typ
				}
			}
			path = append(path, name)
		case xml.EndElement:
			flush()
			path = path[:len(path)-1]
		case xml.CharData:
			text.Write(t)
		}
	}
}
