package cache

import (
	"context"
	"fmt"
	"github.com/hepcache/hepcache/internal/readat"
	"hash/crc32"
	"io"
	"os"
	"syscall"

	"github.com/hepcache/hepcache/disk"
	"github.com/hepcache/hepcache/internal/checksum"
	"github.com/hepcache/hepcache/internal/sidecar"
)

// BlockReport is what VerifyBlocks found for one cached file.
type BlockReport struct {
	Key Key
	// Durable blocks; Checked against their recorded CRC32C; Unknown have
	// none (cached by a version without per-block CRCs); Bad failed.
	Durable, Checked, Unknown int
	Bad                       []int
	// Repaired: the bad blocks were cleared in the sidecar (fetched again
	// at the next read).
	Repaired bool
	Err      error
}

// VerifyBlocks checks the durable blocks of cached files against their
// recorded CRC32C: of p (every origin's copy, or originURL's) or, with p
// "", of every file in the cache directory dir; dataDirs are its data
// disks (cache.data_dirs; none: dir). It only reads unless repair is set,
// which clears bad blocks from their sidecars and needs the cache
// directory to itself (no server running). report gets each file.
func VerifyBlocks(dir string, dataDirs []string, originURL, p string, repair bool, report func(BlockReport)) error {
	if len(dataDirs) == 0 {
		dataDirs = []string{dir}
	}
	var infos []*sidecar.Info
	if p != "" {
		var err error
		if infos, err = Inspect(dir, originURL, p); err != nil {
			return err
		}
	} else {
		err := walkSidecars(dir, func(in *sidecar.Info) {
			if in != nil {
				infos = append(infos, in)
			}
		})
		if err != nil {
			return err
		}
	}
	for _, in := range infos {
		r := verifyFile(dir, dataDirs, in)
		if repair && len(r.Bad) > 0 && r.Err == nil {
			for _, b := range r.Bad {
				in.ForgetBlock(b)
			}
			in.ChecksumState = sidecar.ChecksumNone
			if err := disk.WriteFileAtomic(disk.OS{}, MetaPath(dir, r.Key), in.Marshal(), true); err != nil {
				r.Err = err
			} else {
				r.Repaired = true
			}
		}
		report(r)
	}
	return nil
}

func verifyFile(dir string, dataDirs []string, in *sidecar.Info) BlockReport {
	k := Key{Origin: in.Origin, Path: in.Path}
	r := BlockReport{Key: k, Durable: in.Durable.Count()}
	var f *os.File
	for _, d := range dataDirs {
		p := DataPath(d, k)
		if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
			continue // absent, or a link: never followed
		}
		var err error
		if f, err = os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0); err == nil {
			break
		}
	}
	if f == nil {
		if r.Durable > 0 {
			r.Err = fmt.Errorf("%s: data file missing", k)
		}
		return r
	}
	defer f.Close()
	buf := make([]byte, readBufSize)
	for b := 0; b < in.Durable.Len(); b++ {
		if !in.Durable.Test(b) {
			continue
		}
		if !in.CRCKnown.Test(b) {
			r.Unknown++
			continue
		}
		off := int64(b) * in.BlockSize
		n := min(in.BlockSize, in.FileSize-off)
		var crc uint32
		read, err := readat.Stream(context.Background(), f, buf, off, n, func(p []byte) error {
			crc = crc32.Update(crc, checksum.Castagnoli, p)
			return nil
		})
		if err == nil && read < n {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			r.Err = fmt.Errorf("%s block %d: %w", r.Key, b, err)
			return r
		}
		r.Checked++
		if crc != in.BlockCRC[b] {
			r.Bad = append(r.Bad, b)
		}
	}
	return r
}
