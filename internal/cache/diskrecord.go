package cache

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// A data disk (Config.DataDirs) is used only if it carries the marker the
// cache wrote there and sits on the device recorded with it in the
// metadata directory (diskRecordFile). A disk not mounted at start-up
// leaves a bare mount point on another file system: without that check the
// cache would adopt it, fill the root disk and report the wrong capacity.
// `hepcache disk init` (InitDataDir) is the only way a data directory
// enters service: a first start, a new disk, a disk replaced or moved.

// diskRecordFile, in Config.Dir, records every data disk taken into
// service: its directory, its marker and its device.
const diskRecordFile = "disks.json"

// diskRecord is one data disk as recorded.
type diskRecord struct {
	Dir    string `json:"dir"`
	Marker string `json:"marker"`
	Device uint64 `json:"device"`
}

// readDiskRecords returns the data disks recorded in cacheDir by directory
// (none if there is no record yet).
func readDiskRecords(cacheDir string) (map[string]diskRecord, error) {
	b, err := os.ReadFile(filepath.Join(cacheDir, diskRecordFile))
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]diskRecord{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("data disk record: %w", err)
	}
	var recs []diskRecord
	if err := json.Unmarshal(b, &recs); err != nil {
		return nil, fmt.Errorf("data disk record %s: %w", filepath.Join(cacheDir, diskRecordFile), err)
	}
	m := make(map[string]diskRecord, len(recs))
	for _, r := range recs {
		m[r.Dir] = r
	}
	return m, nil
}

// writeDiskRecords replaces cacheDir's record atomically.
func writeDiskRecords(cacheDir string, m map[string]diskRecord) error {
	recs := make([]diskRecord, 0, len(m))
	for _, r := range m {
		recs = append(recs, r)
	}
	b, err := json.MarshalIndent(recs, "", "  ")
	if err != nil {
		return err
	}
	p := filepath.Join(cacheDir, diskRecordFile)
	if err := writeFileSync(p+".tmp", append(b, '\n')); err != nil {
		return fmt.Errorf("data disk record: %w", err)
	}
	if err := os.Rename(p+".tmp", p); err != nil {
		return fmt.Errorf("data disk record: %w", err)
	}
	return nil
}

func writeFileSync(p string, b []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// devString renders a device number as major:minor, as lsblk shows it.
func devString(dev uint64) string {
	return fmt.Sprintf("%d:%d", unix.Major(dev), unix.Minor(dev))
}

// InitDataDir takes dir into service as a data disk of the cache whose
// metadata is in cacheDir (`hepcache disk init`): it keeps the marker
// found there or writes a new one, and records it with the device dir sits
// on now. Files already on the disk stay where sidecars claim them. It
// must not run while a server uses cacheDir. It returns what it did.
func InitDataDir(cacheDir, dir string) (string, error) {
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("data dir %q: want an absolute path", dir)
	}
	dir = filepath.Clean(dir)
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return "", fmt.Errorf("data dir %s: %w", dir, err)
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("cache dir %s: %w", cacheDir, err)
	}
	recs, err := readDiskRecords(cacheDir)
	if err != nil {
		return "", err
	}
	did := "kept its marker"
	mark, err := os.ReadFile(filepath.Join(dir, diskMarker))
	if errors.Is(err, fs.ErrNotExist) {
		mark, err = newMarker(dir)
		did = "wrote a new marker"
	}
	if err != nil {
		return "", fmt.Errorf("data dir %s: %w", dir, err)
	}
	dev, err := deviceOf(dir)
	if err != nil {
		return "", fmt.Errorf("data dir %s: %w", dir, err)
	}
	recs[dir] = diskRecord{Dir: dir, Marker: string(mark), Device: dev}
	if err := writeDiskRecords(cacheDir, recs); err != nil {
		return "", err
	}
	return fmt.Sprintf("data dir %s: %s, recorded on device %s", dir, did, devString(dev)), nil
}

// newMarker writes a fresh marker (64 random bits) into dir.
func newMarker(dir string) ([]byte, error) {
	var id [8]byte
	rand.Read(id[:])
	mark := []byte(hex.EncodeToString(id[:]) + "\n")
	if err := writeFileSync(filepath.Join(dir, diskMarker), mark); err != nil {
		return nil, err
	}
	return mark, nil
}

// checkRecorded says why data dir dir (marker mark, read error merr, device
// dev) must not be used, "" if it may. recs are the recorded disks.
func checkRecorded(recs map[string]diskRecord, dir string, mark []byte, merr error, dev uint64) string {
	r, recorded := recs[dir]
	fix := fmt.Sprintf("if this directory is the disk you mean, take it into service with `hepcache disk init --config FILE %s` (files already on it are kept)", dir)
	switch {
	case merr != nil && !errors.Is(merr, fs.ErrNotExist):
		return fmt.Sprintf("marker %s unreadable: %v", diskMarker, merr)
	case merr != nil && recorded:
		return fmt.Sprintf("no marker %s, although this cache used the disk (recorded on device %s, the directory is on %s now): the disk is not mounted? Mount it; %s",
			diskMarker, devString(r.Device), devString(dev), fix)
	case merr != nil:
		return fmt.Sprintf("not a data disk of this cache (no marker %s): a bare mount point means the disk is not mounted; %s", diskMarker, fix)
	case !recorded:
		return fmt.Sprintf("marker %s found, but the disk is not recorded in %s: %s", diskMarker, filepath.Join("cache.dir", diskRecordFile), fix)
	case r.Marker != string(mark):
		return fmt.Sprintf("the marker %s is another disk's: a different disk is mounted there; %s", diskMarker, fix)
	case r.Device != dev:
		return fmt.Sprintf("on device %s, recorded on %s: another file system than the one taken into service (disk not mounted, or moved); %s",
			devString(dev), devString(r.Device), fix)
	}
	return ""
}
