package cache

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/hepcache/hepcache/origin"
)

// TestForeignWritableCopyDropped: a cached copy whose data file or sidecar
// another user may write (issue 36 item 3: an adopted file left 0666 had
// POISON written into it) is not served: it is dropped and fetched again
// into a data file of the cache's own mode.
func TestForeignWritableCopyDropped(t *testing.T) {
	for _, which := range []string{"data file", "sidecar"} {
		t.Run(which, func(t *testing.T) {
			dir := t.TempDir()
			m := origin.NewMem("mem://o")
			data := randomData(11, 3*testBlock+5)
			m.Put("/store/f", data, time.Unix(1700000000, 0))
			c := newTestCache(t, dir, m, nil)
			readAllVia(t, c, "/store/f")
			k := Key{Origin: m.String(), Path: "/store/f"}
			dataPath, metaPath := c.dataPath(k), c.metaPath(k)
			c.Close()

			// Another user, through the mode, writes into the copy.
			p := dataPath
			if which == "sidecar" {
				p = metaPath
			}
			if err := os.Chmod(p, 0o666); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(dataPath, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteAt([]byte("POISON"), 0)
			f.Close()

			fetched := m.BytesRead.Load()
			c2 := newTestCache(t, dir, m, nil)
			if got := readAllVia(t, c2, "/store/f"); !bytes.Equal(got, data) {
				t.Fatalf("served %q..., not the origin's bytes", got[:8])
			}
			if m.BytesRead.Load()-fetched != int64(len(data)) {
				t.Errorf("the file was not fetched again: %d bytes from the origin", m.BytesRead.Load()-fetched)
			}
			if c2.Stats().ForeignWritable.Load() != 1 {
				t.Errorf("ForeignWritable = %d, want 1", c2.Stats().ForeignWritable.Load())
			}
			c2.Close() // the new copy's sidecar is written
			for _, p := range []string{dataPath, metaPath} {
				if st, err := os.Stat(p); err != nil || st.Mode().Perm()&0o022 != 0 {
					t.Errorf("%s after the refetch: %v", p, err)
				}
			}
		})
	}
}
