package gen

import (
	"slices"
	"testing"
	"time"
)

func small(seed uint64) Config {
	return Config{Seed: seed, Accesses: 30000, Days: 10, ReadsPerFile: 4}
}

func TestGenerateReproducible(t *testing.T) {
	a, err := Generate(small(1))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Generate(small(1))
	c, _ := Generate(small(2))
	if !slices.Equal(a.Time, b.Time) || !slices.Equal(a.File, b.File) || !slices.Equal(a.Bytes, b.Bytes) || !slices.Equal(a.Name, b.Name) {
		t.Fatal("same seed, different traces")
	}
	if slices.Equal(a.Time, c.Time) {
		t.Fatal("different seeds, same trace")
	}
}

func TestGenerateShape(t *testing.T) {
	cfg := small(3)
	tr, err := Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Len() != 30000 || tr.NumFiles() != 7500 {
		t.Fatalf("%d accesses over %d files, want 30000 over 7500 (K=4)", tr.Len(), tr.NumFiles())
	}
	start := time.Date(2023, 6, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	if tr.Start() < start || tr.End() >= start+int64(10*24*time.Hour) || !slices.IsSorted(tr.Time) {
		t.Errorf("times outside the period or unsorted: %d..%d", tr.Start(), tr.End())
	}
	partial := 0
	for i, f := range tr.File {
		if tr.Bytes[i] < tr.Size[f] {
			partial++
		}
		if tr.Bytes[i] < 1 || tr.Bytes[i] > tr.Size[f] {
			t.Fatalf("access %d reads %d of %d bytes", i, tr.Bytes[i], tr.Size[f])
		}
	}
	if share := float64(partial) / float64(tr.Len()); share < 0.17 || share > 0.23 {
		t.Errorf("partial share %.3f, want about 0.2", share)
	}
	for _, s := range tr.Size {
		if s < 1<<30 || s > 5<<30 {
			t.Fatalf("file size %d outside 1-5 GiB", s)
		}
	}
	// Zipf: the most read file gets far more than the mean of 4 reads.
	counts := make([]int, tr.NumFiles())
	for _, f := range tr.File {
		counts[f]++
	}
	if m := slices.Max(counts); m < 100 {
		t.Errorf("most popular file read %d times: no skew", m)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name  string
		sizes string
		ok    bool
	}{
		{"uniform", "uniform:1GB:5GB", true},
		{"lognormal", "lognormal:2GB:0.5", true},
		{"lognormal clipped", "lognormal:2GB:0.5:100MB:10GB", true},
		{"fixed", "fixed:3GB", true},
		{"inverted", "uniform:5GB:1GB", false},
		{"unknown", "pareto:1", false},
		{"bad size", "fixed:lots", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := small(1)
			c.Sizes = tc.sizes
			_, err := Generate(c)
			if (err == nil) != tc.ok {
				t.Fatalf("Generate with %q: err = %v", tc.sizes, err)
			}
		})
	}
	c := Config{Accesses: -1, ReadsPerFile: 0.5, Partial: 2}
	c.EnsureDefaults()
	if err := c.Validate(); err == nil {
		t.Fatal("invalid config accepted")
	}
}
