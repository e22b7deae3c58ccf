package units

import (
	"testing"
	"time"
)

// TestOneMeaningOfM: "1M" is 2^20 wherever a size is read.
func TestOneMeaningOfM(t *testing.T) {
	for in, want := range map[string]int64{"1M": 1 << 20, "1MB": 1 << 20, "1MiB": 1 << 20, "128K": 128 << 10, "2T": 2 << 40, "1E": 1 << 60, "1.5G": 3 << 29, "4096": 4096} {
		got, err := ParseSize(in)
		if err != nil || int64(got) != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "-1M", "1Q", "9E"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
	if got := Format(3 << 29); got != "1.50 GiB" {
		t.Errorf("Format = %q", got)
	}
}

// TestDays: durations accept days ("30d", "1d12h"), as XRootD's do.
func TestDays(t *testing.T) {
	for in, want := range map[string]time.Duration{"30d": 720 * time.Hour, "1d12h": 36 * time.Hour, "1.5d": 36 * time.Hour, "90s": 90 * time.Second, "0s": 0} {
		got, err := ParseDuration(in)
		if err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "d", "xd", "-1d", "3 days", "1d-"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) accepted", bad)
		}
	}
}
