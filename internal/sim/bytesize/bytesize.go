// Package bytesize parses and prints the simulator's byte counts such as
// "200T" or "1.5 GiB", in binary units like the rest of hepcache
// (internal/units).
package bytesize

import (
	"fmt"
	"strings"

	"github.com/hepcache/hepcache/internal/units"
)

// Parse reads a byte count: a plain integer, or a number followed by a
// binary unit (case-insensitive), e.g. "200T", "1.5GiB", "500g": the same
// units as the configuration and `hepcache serve` (internal/units), so
// that "1M" is 2^20 bytes in the simulator too.
func Parse(s string) (int64, error) {
	v, err := units.ParseSize(s)
	if err != nil {
		return 0, fmt.Errorf("bytesize: %w", err)
	}
	return int64(v), nil
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

// Format prints b with a binary unit and three significant digits, e.g.
// "200 TiB".
func Format(b int64) string { return units.Format(b) }
