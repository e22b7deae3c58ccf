package cache

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Read depth: a reader of a file on disk keeps several blocks in flight
// from the disk, because a device reaches its bandwidth only with several
// reads queued (NVMe wants dozens; this project's VM disk read 1 GiB with
// O_DIRECT in 1.36 s one at a time and 0.85 s sixteen at a time, `bench
// floor`). A rotational disk gains less and loses to seeks between
// readers, but a reader's blocks are sequential, and virtual disks (this
// VM's among them) often say they are rotational when they are not.
const (
	depthSolid      = 16
	depthRotational = 8
)

// readDepthOf sizes the read depth for the device holding dir: the
// block device's queue/rotational flag (a partition's or a device
// mapper's, through /sys/dev/block), solid state when there is no block
// device (tmpfs) or it cannot be told.
func readDepthOf(dir string) int {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return depthSolid
	}
	dev := fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	base := filepath.Join("/sys/dev/block", dev)
	for _, p := range []string{"queue/rotational", "../queue/rotational"} {
		b, err := os.ReadFile(filepath.Join(base, p))
		if err == nil {
			if strings.TrimSpace(string(b)) == "1" {
				return depthRotational
			}
			return depthSolid
		}
	}
	return depthSolid
}

// DiskReadDepthOf is the read depth the cache sizes for the disk holding
// dir (Config.DiskReadDepth 0).
func DiskReadDepthOf(dir string) int { return readDepthOf(dir) }
