package cache

import "testing"

// TestDiskNeed: a data disk's file system is purged when its free space is
// short of what the watermarks keep free of the smaller of its size and the
// capacity (issue 21, S3).
func TestDiskNeed(t *testing.T) {
	const M, G = int64(1) << 20, int64(1) << 30
	for _, tc := range []struct {
		name                  string
		capacity, total, used int64
		want                  int64
	}{
		{"fs-mode disk under its high watermark", 0, 100 * G, 90 * G, 0},
		{"fs-mode disk over its high watermark", 0, 100 * G, 96 * G, 6 * G},
		{"small disk, larger capacity, full", 600 * M, 300 * M, 290 * M, 20 * M},
		{"small disk, larger capacity, room", 600 * M, 300 * M, 200 * M, 0},
		{"large shared disk, small capacity, room for the cache", 20 * G, 4096 * G, 4000 * G, 0},
		{"large shared disk, small capacity, nearly full", 20 * G, 4096 * G, 4096*G - 512*M, 2*G - 512*M},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Cache{}
			d := &dataDisk{}
			d.total.Store(tc.total)
			d.used.Store(tc.used)
			got := c.diskNeed(d, 0.95, 0.90, tc.capacity)
			// Float rounding: within a few bytes.
			if diff := got - tc.want; diff < -16 || diff > 16 {
				t.Fatalf("diskNeed = %d, want %d", got, tc.want)
			}
		})
	}
}
