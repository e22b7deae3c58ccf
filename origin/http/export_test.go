package httporigin

import "time"

// SetClock replaces the clock of RedirectTTL (a test seam).
func SetClock(c *Config, now func() time.Time) { c.now = now }
