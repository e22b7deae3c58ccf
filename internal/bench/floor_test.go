package bench

import (
	"os"
	"path/filepath"
	"testing"
)

// TestFloorsNextToAPass: the floors a benchmark measures next to each
// pass (send from memory, O_DIRECT read at a depth) measure something and
// leave nothing behind.
func TestFloorsNextToAPass(t *testing.T) {
	hot, err := HotFloor(8 << 20)
	if err != nil || hot <= 0 {
		t.Fatalf("hot floor %v s/GiB: %v", hot, err)
	}
	dir := filepath.Join(t.TempDir(), "floor")
	disk, err := DiskFloor(dir, 8<<20, 4)
	if err != nil || disk <= 0 {
		t.Fatalf("disk floor %v s/GiB: %v", disk, err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("the disk floor left %d files in %s", len(left), dir)
	}
}
