package cache

import "testing"

// TestDiskNeed: a data disk's file system is purged when its free space is
// short of what the watermarks keep free of the smaller of its size and the
// capacity (issue 21, S3); watermarks given as sizes, without a capacity,
// are the whole cache's, shared by the disks in proportion to their sizes
// (issue 34 item 7).
func TestDiskNeed(t *testing.T) {
	t.Run("sizes", diskNeedSizes)
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
			high, low := diskMarks(tc.total, tc.total, &spaceRules{high: 0.95, low: 0.90, capacity: tc.capacity})
			got := diskNeed(tc.used, high, low)
			// Float rounding: within a few bytes.
			if diff := got - tc.want; diff < -16 || diff > 16 {
				t.Fatalf("diskNeed = %d, want %d", got, tc.want)
			}
		})
	}
}

func diskNeedSizes(t *testing.T) {
	const M, G = int64(1) << 20, int64(1) << 30
	r := &spaceRules{high: float64(640 * M), low: float64(600 * M)}
	for _, tc := range []struct {
		name                       string
		total, upTotal, used, want int64
		high, low                  int64
	}{
		{"one of two equal disks, over its share", G, 2 * G, 640 * M, 340 * M, 320 * M, 300 * M},
		{"one of two equal disks, within its share", G, 2 * G, 310 * M, 0, 320 * M, 300 * M},
		{"the larger of two disks", 3 * G, 4 * G, 500 * M, 50 * M, 480 * M, 450 * M},
		{"the only disk", G, G, 700 * M, 100 * M, 640 * M, 600 * M},
		{"sizes beyond the disk", 100 * M, 100 * M, 99 * M, 0, 100 * M, 100 * M},
	} {
		t.Run(tc.name, func(t *testing.T) {
			high, low := diskMarks(tc.total, tc.upTotal, r)
			if high != tc.high || low != tc.low {
				t.Fatalf("watermarks %d, %d; want %d, %d", high, low, tc.high, tc.low)
			}
			if got := diskNeed(tc.used, high, low); got != tc.want {
				t.Fatalf("diskNeed = %d, want %d", got, tc.want)
			}
		})
	}
}
