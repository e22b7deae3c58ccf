// Package gen generates seeded synthetic file-access traces shaped like the
// HEP workloads in the papers: GB-sized files, Zipf-like popularity, a mean
// number of reads per file, and popularity that fades after a file appears.
// The same Config and seed always give the same trace.
package gen

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hepcache/hepcache/internal/sim/bytesize"
	"github.com/hepcache/hepcache/internal/sim/trace"
)

// Config describes a workload. Zero fields take the defaults, which resemble
// the CMS study of seed 002: about 25 000 accesses a day over the four months
// June-October 2023 (3.1 M accesses), 1-5 GB files; LRU then reaches about 65 %
// at 200 TB with the knee of the curve near 220 TB, like the study's Figure 8.
type Config struct {
	// Seed selects the random stream. Zero is a valid seed.
	Seed uint64
	// Accesses is the number of file accesses. Default 3 100 000.
	Accesses int
	// Days is the period the accesses are spread over. Default 122.
	Days float64
	// Start is the time of the period's start. Default 2023-06-01 UTC.
	Start time.Time
	// ReadsPerFile is the mean number of reads per file (K); the number of
	// files is Accesses/K and an infinite cache hits 1 - 1/K of requests.
	// Default 3 (a 67 % ceiling; CMS measured about 60 % cumulative); the ATLAS
	// study (seed 003) assumed 20.
	ReadsPerFile float64
	// Zipf is the popularity exponent: beyond its first read, a file of
	// popularity rank r gets reads in proportion to 1/r^Zipf. Default 0.9.
	Zipf float64
	// Sizes is the file size distribution: "uniform:MIN:MAX",
	// "lognormal:MEDIAN:SIGMA[:MIN:MAX]" or "fixed:SIZE". Default uniform:1GB:5GB.
	Sizes string
	// Partial is the share of reads that read only part of the file (a
	// uniform share of it); the rest read it all. Default 0.2.
	Partial float64
	// Lifetime is the mean delay of a file's further reads after its first one
	// (exponential). Default 3 days, which puts the hit-rate knee near 200 TB
	// as in the CMS study.
	Lifetime time.Duration
	// Prefix starts every generated path. Default "/store/sim".
	Prefix string
}

const (
	defaultAccesses = 3_100_000
	defaultDays     = 122
	defaultK        = 3
	defaultZipf     = 0.9
	defaultSizes    = "uniform:1GB:5GB"
	defaultPartial  = 0.2
	defaultLifetime = 3 * 24 * time.Hour
	defaultPrefix   = "/store/sim"
)

// DefaultConfig returns the CMS-like defaults.
func DefaultConfig() Config {
	c := Config{}
	c.EnsureDefaults()
	return c
}

// EnsureDefaults fills zero fields.
func (c *Config) EnsureDefaults() {
	if c.Accesses == 0 {
		c.Accesses = defaultAccesses
	}
	if c.Days == 0 {
		c.Days = defaultDays
	}
	if c.Start.IsZero() {
		c.Start = time.Date(2023, 6, 1, 0, 0, 0, 0, time.UTC)
	}
	if c.ReadsPerFile == 0 {
		c.ReadsPerFile = defaultK
	}
	if c.Zipf == 0 {
		c.Zipf = defaultZipf
	}
	if c.Sizes == "" {
		c.Sizes = defaultSizes
	}
	if c.Partial == 0 {
		c.Partial = defaultPartial
	}
	if c.Lifetime == 0 {
		c.Lifetime = defaultLifetime
	}
	if c.Prefix == "" {
		c.Prefix = defaultPrefix
	}
}

// Validate reports every problem in one error.
func (c *Config) Validate() error {
	var errs []error
	if c.Accesses < 1 || c.Accesses > 1<<31-1 {
		errs = append(errs, fmt.Errorf("accesses %d outside [1, 2^31)", c.Accesses))
	}
	if !(c.Days > 0) {
		errs = append(errs, fmt.Errorf("days %g must be positive", c.Days))
	}
	if !(c.ReadsPerFile >= 1) {
		errs = append(errs, fmt.Errorf("reads per file %g must be at least 1", c.ReadsPerFile))
	}
	if c.Zipf < 0 {
		errs = append(errs, fmt.Errorf("zipf exponent %g is negative", c.Zipf))
	}
	if !(c.Partial >= 0 && c.Partial <= 1) {
		errs = append(errs, fmt.Errorf("partial share %g outside [0, 1]", c.Partial))
	}
	if c.Lifetime < 0 {
		errs = append(errs, fmt.Errorf("lifetime %v is negative", c.Lifetime))
	}
	if _, err := parseSizes(c.Sizes); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// sizeDist draws file sizes.
type sizeDist func(r *rand.Rand) int64

func parseSizes(s string) (sizeDist, error) {
	parts := strings.Split(s, ":")
	bad := fmt.Errorf("size distribution %q: want uniform:MIN:MAX, lognormal:MEDIAN:SIGMA[:MIN:MAX] or fixed:SIZE", s)
	sizes := func(fields []string) ([]int64, error) {
		var out []int64
		for _, f := range fields {
			v, err := bytesize.Parse(f)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", bad, err)
			}
			out = append(out, v)
		}
		return out, nil
	}
	switch {
	case parts[0] == "fixed" && len(parts) == 2:
		v, err := sizes(parts[1:])
		if err != nil {
			return nil, err
		}
		return func(*rand.Rand) int64 { return v[0] }, nil
	case parts[0] == "uniform" && len(parts) == 3:
		v, err := sizes(parts[1:])
		if err != nil {
			return nil, err
		}
		lo, hi := v[0], v[1]
		if hi < lo {
			return nil, fmt.Errorf("%w: max below min", bad)
		}
		return func(r *rand.Rand) int64 { return lo + r.Int64N(hi-lo+1) }, nil
	case parts[0] == "lognormal" && (len(parts) == 3 || len(parts) == 5):
		med, err := bytesize.Parse(parts[1])
		if err != nil {
			return nil, fmt.Errorf("%w: %w", bad, err)
		}
		sigma, err := strconv.ParseFloat(parts[2], 64)
		if err != nil || sigma < 0 {
			return nil, bad
		}
		lo, hi := int64(1), int64(math.MaxInt64/2)
		if len(parts) == 5 {
			v, err := sizes(parts[3:])
			if err != nil {
				return nil, err
			}
			lo, hi = v[0], v[1]
		}
		mu := math.Log(float64(med))
		return func(r *rand.Rand) int64 {
			v := int64(math.Exp(mu + sigma*r.NormFloat64()))
			return min(max(v, lo), hi)
		}, nil
	}
	return nil, bad
}

// Generate builds the trace cfg describes.
//
// Every file is read once when it appears (at a uniform time in the period)
// and gets further reads drawn by Zipf popularity over a random ranking, so
// the mean is exactly ReadsPerFile; those reads follow the first by an
// exponential delay of mean Lifetime (a read that would fall after the period
// is given to another file).
func Generate(cfg Config) (*trace.Trace, error) {
	c := cfg
	c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("gen: %w", err)
	}
	drawSize, _ := parseSizes(c.Sizes)
	rng := rand.New(rand.NewPCG(c.Seed, 0x4845504341434845)) // "HEPCACHE"
	nf := max(1, min(c.Accesses, int(math.Round(float64(c.Accesses)/c.ReadsPerFile))))
	period := int64(c.Days * float64(24*time.Hour))
	start := c.Start.UnixNano()

	sizes := make([]int64, nf)
	birth := make([]int64, nf)
	for i := range nf {
		sizes[i] = drawSize(rng)
		birth[i] = rng.Int64N(period)
	}
	// Popularity ranks are a random permutation: popularity and age independent.
	rank := rng.Perm(nf)
	cdf := make([]float64, nf)
	var sum float64
	for k := range nf {
		sum += math.Pow(float64(k+1), -c.Zipf)
		cdf[k] = sum
	}

	type rec struct {
		t int64
		f int32
		r int64
	}
	recs := make([]rec, 0, c.Accesses)
	readBytes := func(f int) int64 {
		s := sizes[f]
		if s > 0 && rng.Float64() < c.Partial {
			return 1 + rng.Int64N(s)
		}
		return s
	}
	for f := range nf {
		recs = append(recs, rec{birth[f], int32(f), readBytes(f)})
	}
	life := float64(c.Lifetime)
	for range c.Accesses - nf {
		var f int
		var t int64
		// A read that would fall after the period goes to another file instead:
		// folding it back would pile late files' reads up at the end.
		for try := 0; ; try++ {
			k, _ := slices.BinarySearch(cdf, rng.Float64()*sum)
			f = rank[min(k, nf-1)]
			t = birth[f] + int64(rng.ExpFloat64()*life)
			if t < period {
				break
			}
			if try == 100 { // lifetime far beyond the period: spread the read uniformly
				t = birth[f] + rng.Int64N(period-birth[f])
				break
			}
		}
		recs = append(recs, rec{t, int32(f), readBytes(f)})
	}
	slices.SortFunc(recs, func(a, b rec) int {
		switch {
		case a.t < b.t:
			return -1
		case a.t > b.t:
			return 1
		}
		return int(a.f - b.f)
	})

	// Files get ids in order of first access, like a reader would assign them.
	id := make([]int32, nf)
	for i := range id {
		id[i] = -1
	}
	tr := &trace.Trace{
		Time:  make([]int64, len(recs)),
		File:  make([]uint32, len(recs)),
		Bytes: make([]int64, len(recs)),
		Size:  make([]int64, 0, nf),
		Name:  make([]string, 0, nf),
	}
	for i, r := range recs {
		if id[r.f] < 0 {
			id[r.f] = int32(len(tr.Size))
			tr.Size = append(tr.Size, sizes[r.f])
			tr.Name = append(tr.Name, fmt.Sprintf("%s/%07d.root", c.Prefix, r.f))
		}
		tr.Time[i] = start + r.t
		tr.File[i] = uint32(id[r.f])
		tr.Bytes[i] = r.r
	}
	tr.Info = trace.ReadInfo{Format: "generated", Lines: len(recs), Accesses: len(recs), SampleRate: 1}
	return tr, nil
}
