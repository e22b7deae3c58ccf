package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
)

// CheckOwnDisk refuses data directory dir when it sits on the file system
// of cacheDir or of "/": a data disk has a file system of its own, and an
// empty mount point of a disk that is not mounted sits on its parent's
// (`hepcache disk init` would record that bare directory as the disk, and
// the cache would fill the root or the metadata disk). Neither path needs
// to exist: the nearest existing parent is what a new directory would sit
// on.
func CheckOwnDisk(cacheDir, dir string) error {
	dev, on, err := deviceOfNearest(dir)
	if err != nil {
		return fmt.Errorf("data dir %s: %w", dir, err)
	}
	for _, other := range []string{cacheDir, "/"} {
		odev, oon, err := deviceOfNearest(other)
		if err != nil {
			return fmt.Errorf("data dir %s: %w", dir, err)
		}
		if odev != dev {
			continue
		}
		what := "the cache directory " + cacheDir
		if other == "/" {
			what = "the root file system"
		}
		return fmt.Errorf("data dir %s: %s is on the file system of %s (%s, device %s): a data disk has a file system of its own, and a disk that is not mounted leaves its empty mount point on its parent's; mount the disk first, or pass --same-filesystem if this directory is meant (a test, a disk shared on purpose)",
			dir, on, what, oon, devString(dev))
	}
	return nil
}

// deviceOfNearest returns the device of p, or of its nearest existing
// parent, and that path.
func deviceOfNearest(p string) (uint64, string, error) {
	p = filepath.Clean(p)
	for {
		dev, err := deviceOf(p)
		if err == nil {
			return dev, p, nil
		}
		if !errors.Is(err, fs.ErrNotExist) || p == filepath.Dir(p) {
			return 0, "", err
		}
		p = filepath.Dir(p)
	}
}
