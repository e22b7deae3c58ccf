// Package units is the one way hepcache reads and writes sizes and
// durations, in its configuration, on its command lines and in the
// simulator: sizes in binary units ("1M" is 2^20 bytes, "1MB" and "1MiB"
// too), durations as Go writes them ("300ms", "2s").
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Size is a byte count written as an integer or with a binary suffix:
// 512K, 1M, 500G, 2T, 1E (powers of 1024; "KiB", "MB" etc. also accepted,
// with the same meaning: there are no decimal units).
type Size int64

// ParseSize parses a Size.
func ParseSize(s string) (Size, error) {
	t := strings.TrimSpace(strings.ToUpper(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "IB"), "B")
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		case 'P':
			mult = 1 << 50
		case 'E':
			mult = 1 << 60
		}
		if mult > 1 {
			t = t[:n-1]
		}
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil || f < 0 || f*float64(mult) >= 1<<63 {
		return 0, fmt.Errorf("%q is not a size (want e.g. 1048576, 128K, 1M, 500G, 2T)", s)
	}
	return Size(math.Round(f * float64(mult))), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *Size) UnmarshalText(b []byte) error {
	v, err := ParseSize(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (s Size) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// String renders the size with the largest exact suffix.
func (s Size) String() string {
	for _, u := range []struct {
		suf string
		n   int64
	}{{"P", 1 << 50}, {"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if int64(s) >= u.n && int64(s)%u.n == 0 {
			return strconv.FormatInt(int64(s)/u.n, 10) + u.suf
		}
	}
	return strconv.FormatInt(int64(s), 10)
}

// Set implements flag.Value.
func (s *Size) Set(v string) error { return s.UnmarshalText([]byte(v)) }

// Duration is a time.Duration written as "300ms", "2s", "1h", or with
// days, "30d" or "1d12h" (a day is 24 hours).
type Duration time.Duration

// ParseDuration parses a Duration.
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	var days float64
	if i := strings.IndexByte(t, 'd'); i > 0 {
		n, err := strconv.ParseFloat(t[:i], 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%q is not a duration (want e.g. 500ms, 2s, 5m, 12h, 30d)", s)
		}
		days, t = n, t[i+1:]
	}
	var v time.Duration
	if t != "" || days == 0 {
		var err error
		if v, err = time.ParseDuration(t); err != nil {
			return 0, fmt.Errorf("%q is not a duration (want e.g. 500ms, 2s, 5m, 12h, 30d)", s)
		}
	}
	return v + time.Duration(days*24*float64(time.Hour)), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// String implements flag.Value.
func (d Duration) String() string { return time.Duration(d).String() }

// Set implements flag.Value.
func (d *Duration) Set(v string) error { return d.UnmarshalText([]byte(v)) }

// Format prints b for people with a binary unit and three significant
// digits, e.g. "200 TiB", "1.50 GiB".
func Format(b int64) string {
	v := float64(b)
	neg := v < 0
	if neg {
		v = -v
	}
	names := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := 0
	for v >= 1023.5 && i < len(names)-1 {
		v /= 1024
		i++
	}
	sign := ""
	if neg {
		sign = "-"
	}
	switch {
	case i == 0:
		return fmt.Sprintf("%s%d B", sign, int64(v))
	case v >= 99.95:
		return fmt.Sprintf("%s%.0f %s", sign, v, names[i])
	case v >= 9.995:
		return fmt.Sprintf("%s%.1f %s", sign, v, names[i])
	default:
		return fmt.Sprintf("%s%.2f %s", sign, v, names[i])
	}
}
