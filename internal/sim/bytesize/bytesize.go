// Package bytesize parses and prints byte counts such as "200TB" or "1.5 GiB".
//
// Decimal units (kB, MB, GB, TB, PB) are powers of 1000, as in the papers and on
// disk labels; binary units (KiB ... PiB) are powers of 1024.
package bytesize

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

var units = []struct {
	name string
	mult float64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40}, {"pib", 1 << 50}, {"eib", 1 << 60},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12}, {"pb", 1e15}, {"eb", 1e18},
	{"k", 1e3}, {"m", 1e6}, {"g", 1e9}, {"t", 1e12}, {"p", 1e15}, {"e", 1e18},
	{"b", 1},
}

// Parse reads a byte count: a plain integer, or a number followed by a unit
// (case-insensitive, optional space), e.g. "200TB", "1.5 GiB", "500g".
func Parse(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "" {
		return 0, fmt.Errorf("bytesize: empty size")
	}
	mult := 1.0
	for _, u := range units {
		if strings.HasSuffix(t, u.name) {
			mult = u.mult
			t = strings.TrimSpace(strings.TrimSuffix(t, u.name))
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("bytesize: parse %q: not a number with an optional unit (e.g. 200TB, 1.5GiB)", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("bytesize: parse %q: negative size", s)
	}
	b := v * mult
	if b >= math.MaxInt64 {
		return 0, fmt.Errorf("bytesize: parse %q: too large", s)
	}
	return int64(math.Round(b)), nil
}

// ParseList reads a comma-separated list of sizes.
func ParseList(s string) ([]int64, error) {
	var out []int64
	for _, f := range strings.Split(s, ",") {
		if strings.TrimSpace(f) == "" {
			continue
		}
		v, err := Parse(f)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// Format prints b with a decimal unit and three significant digits, e.g. "200 TB".
func Format(b int64) string {
	v := float64(b)
	neg := v < 0
	if neg {
		v = -v
	}
	names := []string{"B", "kB", "MB", "GB", "TB", "PB", "EB"}
	i := 0
	for v >= 999.5 && i < len(names)-1 {
		v /= 1000
		i++
	}
	sign := ""
	if neg {
		sign = "-"
	}
	if i == 0 {
		return fmt.Sprintf("%s%d B", sign, int64(v))
	}
	switch {
	case v >= 99.95:
		return fmt.Sprintf("%s%.0f %s", sign, v, names[i])
	case v >= 9.995:
		return fmt.Sprintf("%s%.1f %s", sign, v, names[i])
	default:
		return fmt.Sprintf("%s%.2f %s", sign, v, names[i])
	}
}
