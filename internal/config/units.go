package config

import "github.com/hepcache/hepcache/internal/units"

// Size and Duration are the tree's one size and duration types
// (internal/units): the configuration and the flags read them there.
type (
	Size     = units.Size
	Duration = units.Duration
)

// ParseSize parses a Size ("1M" is 2^20 bytes).
func ParseSize(s string) (Size, error) { return units.ParseSize(s) }
