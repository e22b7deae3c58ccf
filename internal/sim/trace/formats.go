package trace

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// hepcacheParser reads docs/access-log.md records. A file is origin + path; an
// access delivers bytes_read bytes (size when bytes_read is 0 or absent).
type hepcacheParser struct {
	byOpen  bool
	scratch []byte
	key     []byte
	origin  []byte
}

func (p *hepcacheParser) parse(line []byte) (key []byte, t, size, nbytes int64, skip bool, err error) {
	var haveTime, havePath, haveSize bool
	var closeT, openT int64
	var haveOpen bool
	p.key = p.key[:0]
	p.origin = p.origin[:0]
	err = eachMember(line, &p.scratch, func(k []byte, kind int, v []byte) error {
		var ferr error
		switch string(k) {
		case "time":
			if !p.byOpen { // parse only the time that orders the trace
				closeT, ferr = parseTimeField(kind, v)
				haveTime = ferr == nil
			}
		case "open_time":
			if p.byOpen {
				openT, ferr = parseTimeField(kind, v)
				haveOpen = ferr == nil
			}
		case "path":
			if kind != kindString {
				return errors.New("path is not a string")
			}
			p.key = append(p.key, v...)
			havePath = len(v) > 0
		case "origin":
			if kind == kindString {
				p.origin = append(p.origin, v...)
			}
		case "size":
			size, ferr = intField(kind, v)
			haveSize = ferr == nil
		case "bytes_read":
			nbytes, ferr = intField(kind, v)
		}
		if ferr != nil {
			return fmt.Errorf("field %s: %w", k, ferr)
		}
		return nil
	})
	switch {
	case err != nil:
		return nil, 0, 0, 0, false, err
	case !havePath:
		return nil, 0, 0, 0, false, errors.New("missing path")
	case !haveSize:
		return nil, 0, 0, 0, false, errors.New("missing size")
	}
	t = closeT
	if p.byOpen {
		if !haveOpen {
			return nil, 0, 0, 0, false, errors.New("missing open_time (ordering by open)")
		}
		t = openT
	} else if !haveTime {
		return nil, 0, 0, 0, false, errors.New("missing time")
	}
	if nbytes == 0 {
		nbytes = size
	}
	return joinKey(&p.scratch, p.origin, p.key), t, size, nbytes, false, nil
}

// joinKey builds "origin/path" (root://host:port//store/... for a root:// origin).
func joinKey(buf *[]byte, origin, path []byte) []byte {
	if len(origin) == 0 {
		return path
	}
	b := append((*buf)[:0], origin...)
	if len(path) > 0 && path[0] == '/' {
		b = append(b, '/')
	}
	b = append(b, path...)
	*buf = b
	return b
}

func intField(kind int, v []byte) (int64, error) {
	if kind != kindNumber {
		return 0, errors.New("not a number")
	}
	n, err := parseInt(v)
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, fmt.Errorf("negative value %d", n)
	}
	return n, nil
}

func parseTimeField(kind int, v []byte) (int64, error) {
	switch kind {
	case kindString:
		return parseTime(v)
	case kindNumber:
		return parseUnix(v)
	}
	return 0, errors.New("not a time")
}

// parseTime reads RFC 3339 (with or without fractional seconds) or Unix seconds.
func parseTime(v []byte) (int64, error) {
	if len(v) > 0 && (v[0] >= '0' && v[0] <= '9') && bytes.IndexByte(v, '-') < 0 {
		return parseUnix(v)
	}
	tm, err := time.Parse(time.RFC3339Nano, string(v))
	if err != nil {
		return 0, fmt.Errorf("bad time %q (want RFC 3339 or Unix seconds)", v)
	}
	return tm.UnixNano(), nil
}

func parseUnix(v []byte) (int64, error) {
	if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
		if n < 0 || n > math.MaxInt64/int64(time.Second) {
			return 0, fmt.Errorf("time %d out of range", n)
		}
		return n * int64(time.Second), nil
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || f < 0 || f > float64(math.MaxInt64/int64(time.Second)) {
		return 0, fmt.Errorf("bad time %q (want RFC 3339 or Unix seconds)", v)
	}
	return int64(f * float64(time.Second)), nil
}

// gstreamParser reads XrdPfc g-stream records as a collector of the UDP
// packets (xrootd.mongstream pfc use send json ...) stores them: each packet is
// an optional JSON header line, then one record per line, ending in a NUL.
// Records:
// {"event":"file_close","lfn":...,"size":...,"attach_t":...,"detach_t":...,
// "b_hit":...,"b_miss":...,"b_bypass":...}; the file key is lfn.
type gstreamParser struct {
	byOpen  bool
	scratch []byte
	key     []byte
}

func (p *gstreamParser) parse(line []byte) (key []byte, t, size, nbytes int64, skip bool, err error) {
	var event []byte
	var attach, detach, hit, miss, bypass int64
	var haveEvent, haveLFN, haveSize, haveAttach, haveDetach, haveCode bool
	p.key = p.key[:0]
	err = eachMember(line, &p.scratch, func(k []byte, kind int, v []byte) error {
		var ferr error
		switch string(k) {
		case "code":
			haveCode = true
		case "event":
			haveEvent = true
			event = append(event[:0], v...)
		case "lfn":
			if kind != kindString {
				return errors.New("lfn is not a string")
			}
			p.key = append(p.key, v...)
			haveLFN = len(v) > 0
		case "size":
			size, ferr = intField(kind, v)
			haveSize = ferr == nil
		case "attach_t":
			attach, ferr = parseTimeField(kind, v)
			haveAttach = ferr == nil
		case "detach_t":
			detach, ferr = parseTimeField(kind, v)
			haveDetach = ferr == nil
		case "b_hit":
			hit, ferr = intField(kind, v)
		case "b_miss":
			miss, ferr = intField(kind, v)
		case "b_bypass":
			bypass, ferr = intField(kind, v)
		}
		if ferr != nil {
			return fmt.Errorf("field %s: %w", k, ferr)
		}
		return nil
	})
	switch {
	case err != nil:
		return nil, 0, 0, 0, false, err
	case haveEvent && string(event) != "file_close":
		return nil, 0, 0, 0, true, nil
	case haveCode && !haveEvent && !haveLFN:
		// A packet header ({"code":"g",...,"gs":{...}}) or identification
		// record that a UDP collector wrote along with the records.
		return nil, 0, 0, 0, true, nil
	case !haveLFN:
		return nil, 0, 0, 0, false, errors.New("missing lfn")
	case !haveSize:
		return nil, 0, 0, 0, false, errors.New("missing size")
	}
	switch {
	case p.byOpen && haveAttach:
		t = attach
	case !p.byOpen && haveDetach:
		t = detach
	default:
		return nil, 0, 0, 0, false, errors.New("missing attach_t/detach_t")
	}
	nbytes = hit + miss + bypass
	if nbytes == 0 {
		nbytes = size
	}
	return p.key, t, size, nbytes, false, nil
}

// csvParser reads CSV with a header naming the columns. Unquoted lines are
// split directly; lines with quotes go through encoding/csv.
type csvParser struct {
	cols                        CSVColumns
	header                      bool
	nfields                     int
	iTime, iPath, iSize, iBytes int
	iOrigin                     int
	fields                      [][]byte
	scratch                     []byte
}

func (p *csvParser) parse(line []byte) (key []byte, t, size, nbytes int64, skip bool, err error) {
	fields, err := p.split(line)
	if err != nil {
		return nil, 0, 0, 0, false, err
	}
	if !p.header {
		return nil, 0, 0, 0, true, p.readHeader(fields)
	}
	if len(fields) != p.nfields {
		return nil, 0, 0, 0, false, fmt.Errorf("%d fields, header has %d", len(fields), p.nfields)
	}
	t, err = parseTime(bytes.TrimSpace(fields[p.iTime]))
	if err != nil {
		return nil, 0, 0, 0, false, fmt.Errorf("column %s: %w", p.cols.Time, err)
	}
	path := bytes.TrimSpace(fields[p.iPath])
	if len(path) == 0 {
		return nil, 0, 0, 0, false, fmt.Errorf("column %s: empty path", p.cols.Path)
	}
	size, err = csvInt(fields[p.iSize])
	if err != nil {
		return nil, 0, 0, 0, false, fmt.Errorf("column %s: %w", p.cols.Size, err)
	}
	if p.iBytes >= 0 && len(bytes.TrimSpace(fields[p.iBytes])) > 0 {
		nbytes, err = csvInt(fields[p.iBytes])
		if err != nil {
			return nil, 0, 0, 0, false, fmt.Errorf("column %s: %w", p.cols.BytesRead, err)
		}
	}
	if nbytes == 0 {
		nbytes = size
	}
	var origin []byte
	if p.iOrigin >= 0 {
		origin = bytes.TrimSpace(fields[p.iOrigin])
	}
	return joinKey(&p.scratch, origin, path), t, size, nbytes, false, nil
}

func csvInt(v []byte) (int64, error) {
	n, err := parseInt(bytes.TrimSpace(v))
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, fmt.Errorf("negative value %d", n)
	}
	return n, nil
}

func (p *csvParser) split(line []byte) ([][]byte, error) {
	p.fields = p.fields[:0]
	if bytes.IndexByte(line, '"') < 0 {
		for {
			i := bytes.IndexByte(line, ',')
			if i < 0 {
				p.fields = append(p.fields, line)
				return p.fields, nil
			}
			p.fields = append(p.fields, line[:i])
			line = line[i+1:]
		}
	}
	rec, err := csv.NewReader(bytes.NewReader(line)).Read()
	if err != nil {
		return nil, fmt.Errorf("csv: %w", err)
	}
	for _, f := range rec {
		p.fields = append(p.fields, []byte(f))
	}
	return p.fields, nil
}

// errBadHeader is fatal: without a header no line can be read.
var errBadHeader = errors.New("csv header")

func (p *csvParser) readHeader(fields [][]byte) error {
	p.header = true
	p.nfields = len(fields)
	p.iTime, p.iPath, p.iSize, p.iBytes, p.iOrigin = -1, -1, -1, -1, -1
	for i, f := range fields {
		switch string(bytes.TrimSpace(f)) {
		case p.cols.Time:
			p.iTime = i
		case p.cols.Path:
			p.iPath = i
		case p.cols.Size:
			p.iSize = i
		case p.cols.BytesRead:
			p.iBytes = i
		case p.cols.Origin:
			p.iOrigin = i
		}
	}
	var missing []string
	if p.iTime < 0 {
		missing = append(missing, p.cols.Time)
	}
	if p.iPath < 0 {
		missing = append(missing, p.cols.Path)
	}
	if p.iSize < 0 {
		missing = append(missing, p.cols.Size)
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: first line %q lacks column(s) %q (set the names with --csv-time/--csv-path/--csv-size)",
			errBadHeader, bytes.Join(fields, []byte(",")), missing)
	}
	return nil
}
