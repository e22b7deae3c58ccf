package cache

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hepcache/hepcache/disk"
	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/sidecar"
	"github.com/hepcache/hepcache/origin"
)

// plantAdopted writes what adopt-xcache leaves for /f: cached bytes with
// every block present and a sidecar without origin version, unconfirmed,
// cached at cachedAt.
func plantAdopted(tb testing.TB, dir string, cached []byte, cachedAt time.Time) {
	tb.Helper()
	k := Key{Origin: "mem://o", Path: "/f"}
	side := sidecar.New(k.Origin, k.Path, int64(len(cached)), testBlock, time.Time{}, "", cachedAt)
	side.Flags |= sidecar.FlagUnconfirmed
	for b := range side.Durable.Len() {
		side.Durable.Set(b)
	}
	for _, p := range []string{DataPath(dir, k), MetaPath(dir, k)} {
		os.MkdirAll(filepath.Dir(p), 0o755)
	}
	if err := os.WriteFile(DataPath(dir, k), cached, 0o644); err != nil {
		tb.Fatal(err)
	}
	if err := disk.WriteFileAtomic(disk.OS{}, MetaPath(dir, k), side.Marshal(), false); err != nil {
		tb.Fatal(err)
	}
}

// TestAdoptedCopyConfirmedOnFirstOpen: an adopted copy is served only if
// the origin's file is the one XCache cached (same size, not modified
// since); otherwise it is dropped and the origin's bytes are served. While
// the origin cannot be asked, the copy is served and stays unconfirmed.
func TestAdoptedCopyConfirmedOnFirstOpen(t *testing.T) {
	cachedAt := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	data := randomData(1, 5*testBlock+99)
	other := randomData(2, len(data))
	cases := []struct {
		name       string
		origin     []byte
		mtime      time.Time
		down       bool
		want       []byte // nil: open fails
		fromOrigin bool
		kept       bool // the sidecar stays, unconfirmed
	}{
		{name: "same file", origin: data, mtime: cachedAt.Add(-time.Hour), want: data},
		{name: "another size", origin: data[:len(data)-1], mtime: cachedAt.Add(-time.Hour), want: data[:len(data)-1], fromOrigin: true},
		{name: "rewritten since", origin: other, mtime: cachedAt.Add(time.Hour), want: other, fromOrigin: true},
		{name: "gone from the origin"},
		{name: "origin down", origin: data, down: true, want: data, kept: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			plantAdopted(t, dir, data, cachedAt)
			m := origin.NewMem("mem://o")
			if tc.origin != nil {
				m.Put("/f", tc.origin, tc.mtime)
			}
			if tc.down {
				m.Fail(origin.ErrUnavailable)
			}
			c := newTestCache(t, dir, m, nil)
			if tc.want == nil {
				f, err := c.Open(t.Context(), backend.Request{Path: "/f"})
				if err == nil {
					f.Close()
					t.Fatal("open of a file the origin no longer has succeeded")
				}
				if _, err := os.Stat(MetaPath(dir, Key{Origin: "mem://o", Path: "/f"})); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("adopted copy of a file gone from the origin kept: %v", err)
				}
				return
			}
			st, err := c.Stat(t.Context(), backend.Request{Path: "/f"})
			if err != nil || st.Size != int64(len(tc.want)) || st.ModTime.Year() < 2000 {
				t.Fatalf("stat: %+v %v", st, err)
			}
			got := readAllVia(t, c, "/f")
			if !bytes.Equal(got, tc.want) {
				t.Fatalf("read %d bytes, not the origin's %d", len(got), len(tc.want))
			}
			if fromOrigin := m.BytesRead.Load() > 0; fromOrigin != tc.fromOrigin {
				t.Fatalf("origin read %d bytes; want from origin %v", m.BytesRead.Load(), tc.fromOrigin)
			}
			c.Close()
			b, _ := os.ReadFile(MetaPath(dir, Key{Origin: "mem://o", Path: "/f"}))
			side, err := sidecar.Unmarshal(b)
			if err != nil || side.Unconfirmed() != tc.kept {
				t.Fatalf("sidecar after the first open: %+v", side)
			}
			if !tc.kept && !tc.fromOrigin && !side.ModTime.Equal(tc.mtime) {
				t.Fatalf("confirmed copy records mtime %v, origin's %v", side.ModTime, tc.mtime)
			}
		})
	}
}
