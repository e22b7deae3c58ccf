package httpfront

import (
	"errors"
	"strconv"
	"strings"
)

// byteRange is [start, start+length).
type byteRange struct {
	start, length int64
}

var (
	// errMalformedRange: the Range header is not understood; it is
	// ignored and the whole file sent (RFC 9110 14.2 allows this).
	errMalformedRange = errors.New("malformed range")
	// errUnsatisfiable: no range overlaps the file (416).
	errUnsatisfiable = errors.New("range not satisfiable")
)

// parseRange parses a Range header ("bytes=0-99,200-,-50") against a file
// of size bytes. Ranges that start beyond the end are dropped; if none is
// left it returns errUnsatisfiable. Ranges keep the order the client gave
// (uproot matches parts to its requests by their Content-Range).
func parseRange(s string, size int64) ([]byteRange, error) {
	spec, ok := strings.CutPrefix(strings.TrimSpace(s), "bytes=")
	if !ok {
		return nil, errMalformedRange // another unit
	}
	var out []byteRange
	n := 0
	for item := range strings.SplitSeq(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue // RFC 9110 allows empty list elements
		}
		n++
		a, b, ok := strings.Cut(item, "-")
		if !ok {
			return nil, errMalformedRange
		}
		a, b = strings.TrimSpace(a), strings.TrimSpace(b)
		if a == "" {
			// Suffix range: the last b bytes.
			k, err := parseDigits(b)
			if err != nil {
				return nil, errMalformedRange
			}
			if k == 0 || size == 0 {
				continue // unsatisfiable on its own
			}
			k = min(k, size)
			out = append(out, byteRange{size - k, k})
			continue
		}
		first, err := parseDigits(a)
		if err != nil {
			return nil, errMalformedRange
		}
		last := size - 1
		if b != "" {
			if last, err = parseDigits(b); err != nil || last < first {
				return nil, errMalformedRange
			}
		}
		if first >= size {
			continue
		}
		last = min(last, size-1)
		out = append(out, byteRange{first, last - first + 1})
	}
	if n == 0 {
		return nil, errMalformedRange
	}
	if len(out) == 0 {
		return nil, errUnsatisfiable
	}
	return out, nil
}

// parseDigits parses a non-negative decimal without sign or spaces.
func parseDigits(s string) (int64, error) {
	if s == "" || len(s) > 19 {
		return 0, errMalformedRange
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errMalformedRange
		}
	}
	return strconv.ParseInt(s, 10, 64)
}

func (r byteRange) contentRange(size int64) string {
	return "bytes " + strconv.FormatInt(r.start, 10) + "-" + strconv.FormatInt(r.start+r.length-1, 10) + "/" + strconv.FormatInt(size, 10)
}
