package ttbar

import (
	_ "embed"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
)

// uprootJob is the same pseudo-analysis written with uproot and awkward
// (uproot_job.py), run with a Python that has uproot and fsspec-xrootd:
// root:// inputs are then read through XrdCl, the client the papers' jobs
// used, instead of hepcache's own.
//
//go:embed uproot_job.py
var uprootJob []byte

// WriteUprootJob writes the uproot job's script into dir and returns its
// path, for `python PATH ttbar|dump ...`.
func WriteUprootJob(dir string) (string, error) {
	p := filepath.Join(dir, "uproot_job.py")
	if err := os.WriteFile(p, uprootJob, 0o644); err != nil {
		return "", fmt.Errorf("ttbar: write the uproot job: %w", err)
	}
	return p, nil
}

// SamePhysics returns nil when a and b filled the same histograms (every
// bin's entries equal) from the same events, and says where they differ
// otherwise. The mean ttbar mass is compared to 1e-9: the two jobs' sine,
// cosine and sinh (Go's and C's) may differ in the last bit.
func SamePhysics(a, b *Timings) error {
	switch {
	case a.Events != b.Events:
		return fmt.Errorf("ttbar: %d events against %d", a.Events, b.Events)
	case a.Particles != b.Particles:
		return fmt.Errorf("ttbar: %d particles against %d", a.Particles, b.Particles)
	case len(a.EtaBins) == 0 || len(a.MttBins) == 0:
		return fmt.Errorf("ttbar: %s reported no histograms", a.Input)
	case !slices.Equal(a.EtaBins, b.EtaBins):
		return fmt.Errorf("ttbar: eta histograms differ: %s", binDiff(a.EtaBins, b.EtaBins))
	case !slices.Equal(a.MttBins, b.MttBins):
		return fmt.Errorf("ttbar: m_tt histograms differ: %s", binDiff(a.MttBins, b.MttBins))
	case math.Abs(a.MeanTTbarMass-b.MeanTTbarMass) > 1e-9*math.Abs(b.MeanTTbarMass):
		return fmt.Errorf("ttbar: mean m_tt %.12g against %.12g GeV", a.MeanTTbarMass, b.MeanTTbarMass)
	}
	return nil
}

func binDiff(a, b []int64) string {
	if len(a) != len(b) {
		return fmt.Sprintf("%d bins against %d", len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			return fmt.Sprintf("bin %d (0 is underflow) has %d entries against %d", i, a[i], b[i])
		}
	}
	return "equal"
}

// FileDigest is what the uproot job's dump mode reports for one file: a
// SHA-256 over every key's content (every TTree branch read as arrays,
// other objects as their uncompressed bytes), so that reads of one file
// over different paths can be compared.
type FileDigest struct {
	Input    string `json:"input"`
	Size     int64  `json:"size"`
	Trees    int    `json:"trees"`
	Branches int    `json:"branches"`
	// Failed counts the keys and branches uproot could not read; their
	// error types are part of the digest.
	Failed int `json:"failed"`
	// Failures name them: "key/branch: ErrorType".
	Failures []string `json:"failures,omitempty"`
	// Keys are the digests of each key and TTree branch ("tree;1/pt"):
	// a short SHA-256 of its content, or "error" and the error's type.
	Keys      map[string]string `json:"keys"`
	SHA256    string            `json:"sha256"`
	Seconds   float64           `json:"seconds"`
	BytesRead int64             `json:"bytes_read"`
	Reads     int64             `json:"reads"`
	Chunks    int64             `json:"chunks"`
	// Error is set when uproot could not open the file at all.
	Error string `json:"error,omitempty"`
}

// Dump is the dump mode's output.
type Dump struct {
	Files       []FileDigest `json:"files"`
	WallSeconds float64      `json:"wall_s"`
	CPUSeconds  float64      `json:"cpu_s"`
}
