package catalog

import (
	"net/url"
	"path/filepath"
	"strings"

	"github.com/hepcache/hepcache/internal/sidecar"
)

// Key names a cached file: the canonical origin URL and the path there.
type Key struct {
	Origin string
	Path   string
}

func (k Key) String() string { return k.Origin + "/" + k.Path }

// OriginDir maps an origin URL to the directory holding its files, readable
// for admins: root://host:1094 -> root/host:1094, file:///data -> file/%2Fdata.
// It is always two path components.
func OriginDir(o string) string {
	u, err := url.Parse(o)
	if err != nil || u.Scheme == "" {
		return "other/" + url.PathEscape(o)
	}
	if u.Host == "" {
		return u.Scheme + "/" + url.PathEscape(u.Path)
	}
	return u.Scheme + "/" + url.PathEscape(u.Host)
}

// DataPath is where the data of k lives under the data disk (or cache
// directory) root.
func DataPath(root string, k Key) string {
	return filepath.Join(root, "data", OriginDir(k.Origin), filepath.FromSlash(k.Path))
}

// MetaPath is where the sidecar of k lives under cache directory dir.
func MetaPath(dir string, k Key) string {
	return filepath.Join(dir, "meta", OriginDir(k.Origin), filepath.FromSlash(k.Path)) + sidecarSuffix
}

// sidecarSuffix ends every sidecar's name.
const sidecarSuffix = ".hcinfo"

// splitRel splits a path relative to the meta or data tree into its
// origin directory (two components) and the cached path, "" if it is not
// that deep.
func splitRel(rel string) (odir, p string) {
	i := strings.IndexByte(rel, '/')
	if i < 0 {
		return "", ""
	}
	j := strings.IndexByte(rel[i+1:], '/')
	if j < 0 {
		return "", ""
	}
	return rel[:i+1+j], rel[i+1+j:]
}

// DurableBytes is the size of the blocks a sidecar records as present.
func DurableBytes(in *sidecar.Info) int64 {
	n := int64(in.Durable.Count()) * in.BlockSize
	if nb := in.Durable.Len(); nb > 0 && in.Durable.Test(nb-1) {
		n -= int64(nb)*in.BlockSize - in.FileSize // the last block is short
	}
	return n
}
