package trace

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Value kinds reported by eachMember.
const (
	kindString = iota
	kindNumber
	kindOther // true, false, null, object, array: skipped
)

var errJSON = errors.New("malformed JSON object")

// eachMember walks the top-level members of the JSON object in b and calls fn
// with each key and value. For strings, val is the decoded text; for numbers,
// the literal. key and val alias b or scratch and are valid only during the
// call. The scanner handles exactly what the readers need, several times
// faster than encoding/json, and rejects malformed input.
func eachMember(b []byte, scratch *[]byte, fn func(key []byte, kind int, val []byte) error) error {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return fmt.Errorf("%w: does not start with '{'", errJSON)
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return trailing(b, i+1)
	}
	var err error
	for {
		if i >= len(b) || b[i] != '"' {
			return fmt.Errorf("%w: expected a key at byte %d", errJSON, i)
		}
		*scratch = (*scratch)[:0]
		var key []byte
		key, i, err = stringAt(b, i, scratch)
		if err != nil {
			return err
		}
		i = skipWS(b, i)
		if i >= len(b) || b[i] != ':' {
			return fmt.Errorf("%w: expected ':' at byte %d", errJSON, i)
		}
		i = skipWS(b, i+1)
		if i >= len(b) {
			return fmt.Errorf("%w: missing value", errJSON)
		}
		var kind int
		var val []byte
		switch c := b[i]; {
		case c == '"':
			kind = kindString
			val, i, err = stringAt(b, i, scratch)
			if err != nil {
				return err
			}
		case c == '-' || (c >= '0' && c <= '9'):
			kind = kindNumber
			j := i
			for j < len(b) && (b[j] == '-' || b[j] == '+' || b[j] == '.' || b[j] == 'e' || b[j] == 'E' || (b[j] >= '0' && b[j] <= '9')) {
				j++
			}
			val = b[i:j]
			i = j
		default:
			kind = kindOther
			i, err = skipValue(b, i)
			if err != nil {
				return err
			}
		}
		if err := fn(key, kind, val); err != nil {
			return err
		}
		i = skipWS(b, i)
		if i >= len(b) {
			return fmt.Errorf("%w: unterminated object", errJSON)
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case '}':
			return trailing(b, i+1)
		default:
			return fmt.Errorf("%w: unexpected %q at byte %d", errJSON, b[i], i)
		}
	}
}

// stringAt returns the text of the JSON string at b[i] == '"' and the index
// after it: a slice of b when it has no escapes, else decoded into scratch
// (appended: earlier slices of scratch stay valid).
func stringAt(b []byte, i int, scratch *[]byte) ([]byte, int, error) {
	if q := bytes.IndexByte(b[i+1:], '"'); q >= 0 {
		chunk := b[i+1 : i+1+q]
		if bytes.IndexByte(chunk, '\\') < 0 {
			return chunk, i + q + 2, nil
		}
	}
	start := len(*scratch)
	var err error
	*scratch, i, err = decodeString(b, i, *scratch)
	if err != nil {
		return nil, i, err
	}
	return (*scratch)[start:], i, nil
}

func trailing(b []byte, i int) error {
	if skipWS(b, i) != len(b) {
		return fmt.Errorf("%w: trailing data after the object", errJSON)
	}
	return nil
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// decodeString decodes the JSON string starting at b[i] == '"', appending the
// text to dst; it returns the index after the closing quote.
func decodeString(b []byte, i int, dst []byte) ([]byte, int, error) {
	i++
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return dst, i + 1, nil
		case c == '\\':
			if i+1 >= len(b) {
				return dst, i, fmt.Errorf("%w: bad escape", errJSON)
			}
			switch e := b[i+1]; e {
			case '"', '\\', '/':
				dst = append(dst, e)
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				if i+6 > len(b) {
					return dst, i, fmt.Errorf("%w: bad \\u escape", errJSON)
				}
				r, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 32)
				if err != nil {
					return dst, i, fmt.Errorf("%w: bad \\u escape", errJSON)
				}
				i += 4
				rr := rune(r)
				if rr >= 0xD800 && rr < 0xDC00 && i+8 <= len(b) && b[i+2] == '\\' && b[i+3] == 'u' {
					if lo, err := strconv.ParseUint(string(b[i+4:i+8]), 16, 32); err == nil && lo >= 0xDC00 && lo < 0xE000 {
						rr = 0x10000 + (rr-0xD800)<<10 + (rune(lo) - 0xDC00)
						i += 6
					}
				}
				dst = utf8.AppendRune(dst, rr)
			default:
				return dst, i, fmt.Errorf("%w: bad escape \\%c", errJSON, e)
			}
			i += 2
		case c < 0x20:
			return dst, i, fmt.Errorf("%w: control character in string", errJSON)
		default:
			dst = append(dst, c)
			i++
		}
	}
	return dst, i, fmt.Errorf("%w: unterminated string", errJSON)
}

// skipValue skips a literal, object or array starting at b[i].
func skipValue(b []byte, i int) (int, error) {
	switch b[i] {
	case 't', 'f', 'n':
		j := i
		for j < len(b) && b[j] >= 'a' && b[j] <= 'z' {
			j++
		}
		switch string(b[i:j]) {
		case "true", "false", "null":
			return j, nil
		}
		return i, fmt.Errorf("%w: bad literal at byte %d", errJSON, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, nil
				}
			case '"':
				var err error
				var discard [0]byte
				_, i, err = skipString(b, i, discard[:])
				if err != nil {
					return i, err
				}
				continue
			}
			i++
		}
		return i, fmt.Errorf("%w: unterminated value", errJSON)
	}
	return i, fmt.Errorf("%w: unexpected %q at byte %d", errJSON, b[i], i)
}

func skipString(b []byte, i int, _ []byte) ([]byte, int, error) {
	i++
	for i < len(b) {
		switch b[i] {
		case '"':
			return nil, i + 1, nil
		case '\\':
			i += 2
		default:
			i++
		}
	}
	return nil, i, fmt.Errorf("%w: unterminated string", errJSON)
}

// parseInt parses a JSON number that must be a non-negative integer; a value
// written as a float (1e9, 12.0) is accepted when it is integral.
func parseInt(raw []byte) (int64, error) {
	v, err := strconv.ParseInt(string(raw), 10, 64)
	if err == nil {
		return v, nil
	}
	f, ferr := strconv.ParseFloat(string(raw), 64)
	if ferr != nil || f != float64(int64(f)) {
		return 0, fmt.Errorf("not an integer: %q", raw)
	}
	return int64(f), nil
}
